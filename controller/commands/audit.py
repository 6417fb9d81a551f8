"""`backfillctl audit …` and `backfillctl store …`: open the store, read or check the chain, unlock.

Reading (audit show/verify/export, report, offline status) opens the store read-only: a missing store
is an error, never an empty success, and nothing is created or migrated.

A row that no backfillctl wrote is skipped by show and export, each with an error on stderr, and the command
exits 1: stdout stays a stream of genuine records (JSONL feeds log platforms), the error says which seq and
what is wrong, and nothing is green. `audit verify` names it as the first bad record.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Callable, Iterator

from controller.adapters.store import Store
from controller.adapters.store.audit_log import EventFilter
from controller.adapters.store.lease import Lease
from controller.commands.settings import Settings
from controller.core.audit.chain import AuditRecord, Unreadable, VerifyResult, controller_event
from controller.core.audit.vocabulary import Action, AuditPhase, Outcome
from controller.core.model.binding import Binding
from controller.core.model.stages import StageRecord
from controller.errors import StoreError


def show(
    settings: Settings, where: EventFilter, *, first: int | None = None, last: int | None = None
) -> Iterator[AuditRecord | Unreadable]:
    """The events that match, oldest first: all, the `first` N or the `last` N."""
    with Store(settings.store_url, read_only=True) as store:
        yield from itertools.islice(store.events(where, last=last), first)


def print_events(
    settings: Settings,
    where: EventFilter,
    line: Callable[[AuditRecord], str],
    *,
    first: int | None = None,
    last: int | None = None,
) -> int:
    """Write each readable record as a line on stdout and each unreadable one as an error on stderr;
    return how many were unreadable."""
    skipped = 0
    for record in show(settings, where, first=first, last=last):
        if isinstance(record, Unreadable):
            sys.stdout.flush()  # keep the error next to where the record belongs on a terminal
            sys.stderr.write(f"error: {record.describe()}; skipped (run `backfillctl audit verify`)\n")
            skipped += 1
        else:
            sys.stdout.write(line(record) + "\n")
    sys.stdout.flush()
    if skipped:
        sys.stderr.write(
            f"error: {skipped} unreadable audit record(s) skipped: the store was edited outside backfillctl\n"
        )
    return skipped


def verify(settings: Settings, expect_head: str | None) -> VerifyResult:
    with Store(settings.store_url, read_only=True, audit_key=settings.audit_key) as store:
        return store.verify(expect_head)


def migrate(settings: Settings) -> tuple[str | None, str]:
    with Store(settings.store_url, migrate=False) as store:
        return store.migrate()


def unlock(settings: Settings, lease_id: str) -> Lease:
    """Release a stuck lease by its exact id, and audit who did it."""
    with Store(settings.store_url, audit_key=settings.audit_key) as store:
        released = store.unlock(lease_id)
        message = f"released the lease of {released.describe()}"
        store.append(
            controller_event(Action.UNLOCK, settings.actor, Outcome.RELEASED, message, phase=AuditPhase.OUTCOME)
        )
        return released


def spec_record(settings: Settings, name: str) -> tuple[Binding | None, list[AuditRecord], tuple[StageRecord, ...]]:
    """The stored binding, the audit events and the stages of one spec."""
    with Store(settings.store_url, read_only=True) as store:
        events = [_readable(record) for record in store.events(EventFilter(spec=name))]
        return store.binding(name), events, store.stages_of(name)


def _readable(record: AuditRecord | Unreadable) -> AuditRecord:
    """A change record with a hole would mislead: an unreadable event stops the report with what it is."""
    if isinstance(record, Unreadable):
        raise StoreError(record.describe(), hint="run `backfillctl audit verify` to check the whole chain")
    return record


def stored_bindings(settings: Settings) -> dict[str, Binding]:
    with Store(settings.store_url, read_only=True) as store:
        return store.bindings()
