"""Small read queries for metrics (the audit head)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from sqlalchemy import func, select

from controller.adapters.store.tables import audit_events

if TYPE_CHECKING:
    from controller.adapters.store import Store


def audit_head_seq(store: Store) -> int:
    """The newest audit record's seq (0 for an empty log)."""
    with store._tx("reading the audit head") as conn:
        return int(conn.execute(select(func.max(audit_events.c.seq))).scalar() or 0)
