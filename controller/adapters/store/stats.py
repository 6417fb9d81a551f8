"""Small read queries for metrics (the audit head)."""

from __future__ import annotations

from sqlalchemy import func, select

from controller.adapters.store.database import Database
from controller.adapters.store.tables import audit_events


def audit_head_seq(db: Database) -> int:
    """The newest audit record's seq (0 for an empty log)."""
    with db.tx("reading the audit head") as conn:
        return int(conn.execute(select(func.max(audit_events.c.seq))).scalar() or 0)
