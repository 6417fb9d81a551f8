"""`backfillctl audit …` and `backfillctl store …`: open the store, read or check the chain, unlock."""

from __future__ import annotations

from collections.abc import Iterator

from controller.adapters.store import EventFilter, Lease, Store
from controller.commands.settings import Settings
from controller.core.audit import AuditRecord, VerifyResult, controller_event


def open_store(settings: Settings) -> Store:
    return Store(settings.store_url)


def show(settings: Settings, where: EventFilter) -> Iterator[AuditRecord]:
    store = open_store(settings)
    try:
        yield from store.events(where)
    finally:
        store.close()


def verify(settings: Settings, expect_head: str | None) -> VerifyResult:
    store = open_store(settings)
    try:
        return store.verify(expect_head)
    finally:
        store.close()


def migrate(settings: Settings) -> tuple[str | None, str]:
    store = Store(settings.store_url, migrate=False)
    try:
        return store.migrate()
    finally:
        store.close()


def unlock(settings: Settings, lease_id: str) -> Lease:
    """Release a stuck lease by its exact id, and audit who did it."""
    store = open_store(settings)
    try:
        released = store.unlock(lease_id)
        store.append(
            controller_event(
                "unlock", settings.actor, "released", f"released the lease of {released.describe()}", phase="outcome"
            )
        )
        return released
    finally:
        store.close()


def spec_record(settings: Settings, name: str) -> tuple[dict[str, object], list[AuditRecord]]:
    """The stored binding and the audit events of one spec."""
    store = open_store(settings)
    try:
        return store.binding(name) or {}, list(store.events(EventFilter(spec=name)))
    finally:
        store.close()


def stored_bindings(settings: Settings) -> dict[str, dict[str, object]]:
    store = open_store(settings)
    try:
        return store.bindings()
    finally:
        store.close()
