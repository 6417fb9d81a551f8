"""The notification outbox (table `notifications`, migration 0005).

Rows are queued inside the transaction of their audit record (`Outbox.queue`, run by the append), so an
event is either recorded and queued for its receivers, or neither.  The delivery step reads due rows, posts
them and marks each delivered, or failed with the next attempt time (backoff).  A row is never dropped: a
receiver that is down gets its events when it is back, also after a restart of the reconciler.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Connection, func, insert, select, update

from controller.adapters.store.database import Database
from controller.adapters.store.tables import notifications
from controller.core.audit.chain import AuditRecord
from controller.core.audit.notify import Delivery, Notification, idempotency_key
from controller.errors import truncate

PENDING, DELIVERED = "pending", "delivered"


@dataclass(frozen=True, slots=True)
class OutboxRow:
    key: str
    receiver: str
    event: str
    spec: str | None
    audit_seq: int
    attempts: int
    next_attempt_at: str
    last_error: str | None
    created_at: str

    @property
    def state(self) -> str:
        """pending: not tried yet (or due for the first time); failed: its last attempt failed (retried)."""
        return "failed" if self.last_error else "pending"


class Outbox:
    def __init__(self, db: Database) -> None:
        self._db = db

    @staticmethod
    def queue(conn: Connection, record: AuditRecord, rows: Sequence[Notification], now: str) -> None:
        """Inside the record's transaction: its notifications, pending."""
        conn.execute(
            insert(notifications),
            [
                {
                    "key": idempotency_key(record.hash, row.receiver),
                    "audit_seq": record.seq,
                    "receiver": row.receiver,
                    "event": row.event,
                    "format": row.format,
                    "facts": {**row.facts, "time": record.time},
                    "status": PENDING,
                    "attempts": 0,
                    "next_attempt_at": now,
                    "created_at": now,
                }
                for row in rows
            ],
        )

    def due(self, now: str, limit: int = 100) -> list[Delivery]:
        """Undelivered rows whose next attempt is due, oldest event first (each receiver in event order)."""
        query = (
            select(notifications)
            .where(notifications.c.status == PENDING, notifications.c.next_attempt_at <= now)
            .order_by(notifications.c.audit_seq, notifications.c.receiver)
            .limit(limit)
        )
        with self._db.tx("reading due notifications") as conn:
            return [_delivery(row) for row in conn.execute(query).mappings()]

    def mark_delivered(self, delivery_id: int, now: str) -> None:
        with self._db.tx("marking a notification delivered") as conn:
            conn.execute(
                update(notifications)
                .where(notifications.c.id == delivery_id)
                .values(status=DELIVERED, delivered_at=now, attempts=notifications.c.attempts + 1, last_error=None)
            )

    def mark_failed(self, delivery_id: int, error: str, next_attempt_at: str) -> None:
        with self._db.tx("recording a failed notification") as conn:
            conn.execute(
                update(notifications)
                .where(notifications.c.id == delivery_id)
                .values(
                    attempts=notifications.c.attempts + 1, last_error=truncate(error), next_attempt_at=next_attempt_at
                )
            )

    def undelivered(self) -> list[OutboxRow]:
        query = (
            select(notifications)
            .where(notifications.c.status == PENDING)
            .order_by(notifications.c.audit_seq, notifications.c.receiver)
        )
        with self._db.tx("reading undelivered notifications") as conn:
            return [
                OutboxRow(
                    row["key"],
                    row["receiver"],
                    row["event"],
                    _facts(row["facts"]).get("spec"),
                    int(row["audit_seq"]),
                    int(row["attempts"]),
                    row["next_attempt_at"],
                    row["last_error"],
                    row["created_at"],
                )
                for row in conn.execute(query).mappings()
            ]

    def counts(self) -> dict[str, int]:
        """Rows by status (pending, delivered), for metrics and `notify status`."""
        query = select(notifications.c.status, func.count()).group_by(notifications.c.status)
        with self._db.tx("counting notifications") as conn:
            return {str(status): int(n) for status, n in conn.execute(query)}


def _facts(value: Any) -> Mapping[str, Any]:
    return json.loads(value) if isinstance(value, str) else dict(value)


def _delivery(row: Any) -> Delivery:
    facts = _facts(row["facts"])
    return Delivery(
        id=int(row["id"]),
        key=row["key"],
        receiver=row["receiver"],
        event=row["event"],
        format=row["format"],
        audit_seq=int(row["audit_seq"]),
        time=str(facts.get("time", row["created_at"])),
        facts=facts,
        attempts=int(row["attempts"]),
        last_error=row["last_error"],
    )
