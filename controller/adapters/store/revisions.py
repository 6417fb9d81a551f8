"""The store's revision counters (table `store_revisions`): `finished` is bumped, in the writer's own transaction,
by every write a rest summary depends on (`rest_summary.py`): a binding finished before or after, the spec index."""

from __future__ import annotations

from sqlalchemy import Connection, select, update

from controller.adapters.store.tables import store_revisions

FINISHED = "finished"

BUMP = update(store_revisions).where(store_revisions.c.name == FINISHED).values(revision=store_revisions.c.revision + 1)
REVISION = select(store_revisions.c.revision).where(store_revisions.c.name == FINISHED)


def bump_finished(conn: Connection) -> None:
    """Mark every rest summary out of date: a finished binding or the spec index changed."""
    conn.execute(BUMP)
