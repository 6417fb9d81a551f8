"""`backfillctl audit …` and `backfillctl store …`: open the store, read or check the chain, unlock.

Reading (audit show/verify/export, report, offline status) opens the store read-only: a missing store
is an error, never an empty success, and nothing is created or migrated.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from controller.adapters.store import EventFilter, Lease, Store
from controller.commands.settings import Settings
from controller.core.audit import AuditRecord, VerifyResult, controller_event
from controller.core.binding import Binding


def show(
    settings: Settings, where: EventFilter, *, first: int | None = None, last: int | None = None
) -> Iterator[AuditRecord]:
    """The events that match, oldest first: all, the `first` N or the `last` N."""
    with Store(settings.store_url, read_only=True) as store:
        yield from itertools.islice(store.events(where, last=last), first)


def verify(settings: Settings, expect_head: str | None) -> VerifyResult:
    with Store(settings.store_url, read_only=True) as store:
        return store.verify(expect_head)


def migrate(settings: Settings) -> tuple[str | None, str]:
    with Store(settings.store_url, migrate=False) as store:
        return store.migrate()


def unlock(settings: Settings, lease_id: str) -> Lease:
    """Release a stuck lease by its exact id, and audit who did it."""
    with Store(settings.store_url) as store:
        released = store.unlock(lease_id)
        message = f"released the lease of {released.describe()}"
        store.append(controller_event("unlock", settings.actor, "released", message, phase="outcome"))
        return released


def spec_record(settings: Settings, name: str) -> tuple[Binding | None, list[AuditRecord]]:
    """The stored binding and the audit events of one spec."""
    with Store(settings.store_url, read_only=True) as store:
        return store.binding(name), list(store.events(EventFilter(spec=name)))


def stored_bindings(settings: Settings) -> dict[str, Binding]:
    with Store(settings.store_url, read_only=True) as store:
        return store.bindings()
