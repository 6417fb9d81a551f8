"""The notification outbox: rows committed in the same transaction as their audit record (SQLite and PostgreSQL)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from controller.adapters.store import Store
from controller.core.audit.chain import AuditEntry
from controller.core.audit.notify import Notification
from controller.errors import StoreError

ENTRY = AuditEntry(
    action="observe", phase="observation", actor="t", controller_version="0", outcome="Succeeded", spec_name="s"
)


def _rows(*receivers: str) -> tuple[Notification, ...]:
    return tuple(Notification(r, "succeeded", "json", {"event": "succeeded", "spec": "s"}) for r in receivers)


def test_rows_are_written_with_their_record_and_keyed_by_its_hash(make: Callable[..., Store], store_url: str) -> None:
    store = make(store_url)
    record = store.append(ENTRY, _rows("team-a", "team-b"))
    due = store.due_notifications("9999")
    assert [(d.receiver, d.key, d.audit_seq, d.event) for d in due] == [
        ("team-a", f"{record.hash[:32]}.team-a", 1, "succeeded"),
        ("team-b", f"{record.hash[:32]}.team-b", 1, "succeeded"),
    ]
    assert due[0].facts == {"event": "succeeded", "spec": "s", "time": record.time}
    assert store.notification_counts() == {"pending": 2}


def test_a_failing_outbox_insert_rolls_back_the_audit_record(make: Callable[..., Store], store_url: str) -> None:
    store = make(store_url)
    with pytest.raises(StoreError):
        store.append(ENTRY, _rows("team-a", "team-a"))  # the same key twice: the unique index refuses it
    assert list(store.events()) == []
    assert store.notification_counts() == {}


def test_failed_rows_wait_for_their_next_attempt_and_delivered_ones_leave(
    make: Callable[..., Store], store_url: str
) -> None:
    store = make(store_url)
    store.append(ENTRY, _rows("team-a", "team-b"))
    first, second = store.due_notifications("9999")
    store.notification_failed(first.id, "receiver team-a: HTTP 503", "2030-01-01T00:00:00.000000Z")
    store.notification_delivered(second.id, "2026-01-01T00:00:00.000000Z")
    assert store.due_notifications("2029-12-31T23:59:59.000000Z") == []
    (again,) = store.due_notifications("2030-01-01T00:00:00.000000Z")
    assert (again.key, again.attempts, again.last_error) == (first.key, 1, "receiver team-a: HTTP 503")
    assert store.notification_counts() == {"pending": 1, "delivered": 1}
    read_only = make(store_url, read_only=True)
    (row,) = read_only.undelivered_notifications()
    assert (row.receiver, row.state, row.attempts, row.spec) == ("team-a", "failed", 1, "s")
