"""Backfill history (tables `backfill_history`, `backfill_watermarks`): per Airflow (its base URL without
credentials) and DAG, the completed backfills read once and the watermark up to which every backfill of the DAG
is kept. A completed backfill never changes, so what is kept stays true unless the Airflow's database was reset or
restored: then `forget` drops that Airflow's history and the next read rebuilds it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import delete, insert, select, update

from controller.adapters.store.database import Clock, Database, decoded, json_text, stamp
from controller.adapters.store.tables import backfill_history, backfill_watermarks
from controller.core.model.airflow import Backfill


@dataclass(frozen=True, slots=True)
class KnownHistory:
    """A DAG's kept history: every backfill with an id up to `watermark`, each completed, oldest first."""

    watermark: int
    backfills: tuple[Backfill, ...]


class BackfillHistory:
    def __init__(self, db: Database, clock: Clock) -> None:
        self._db, self._clock = db, clock

    def known(self, environment: str, dag_ids: Collection[str]) -> dict[str, KnownHistory]:
        """The kept history of each of `dag_ids` that has a watermark (a DAG never read has none)."""
        if not dag_ids:
            return {}
        marks = select(backfill_watermarks.c.dag_id, backfill_watermarks.c.watermark).where(
            backfill_watermarks.c.environment == environment, backfill_watermarks.c.dag_id.in_(sorted(dag_ids))
        )
        rows = select(backfill_history.c.dag_id, json_text(backfill_history.c.params)).where(
            backfill_history.c.environment == environment, backfill_history.c.dag_id.in_(sorted(dag_ids))
        )
        with self._db.tx("reading the kept backfill history") as conn:
            watermarks = {str(d): int(w) for d, w in conn.execute(marks).all()}
            found = conn.execute(rows.order_by(backfill_history.c.backfill_id)).all()
        kept: dict[str, list[Backfill]] = {d: [] for d in watermarks}
        for (dag_id, _text), params in zip(found, decoded([t for _d, t in found]), strict=True):
            if dag_id in kept:
                kept[dag_id].append(_backfill(params))
        return {d: KnownHistory(w, tuple(kept[d])) for d, w in watermarks.items()}

    def keep(self, environment: str, dag_id: str, watermark: int, completed: Sequence[Backfill]) -> None:
        """The DAG's watermark, and its `completed` backfills up to it that are not kept yet (kept ones never
        change)."""
        now = stamp(self._clock())
        where = (backfill_history.c.environment == environment) & (backfill_history.c.dag_id == dag_id)
        mark = (backfill_watermarks.c.environment == environment) & (backfill_watermarks.c.dag_id == dag_id)
        with self._db.tx(f"keeping the backfill history of DAG {dag_id}") as conn:
            present = {int(i) for (i,) in conn.execute(select(backfill_history.c.backfill_id).where(where))}
            new = [_row(environment, b) for b in completed if b.id <= watermark and b.id not in present]
            if new:
                conn.execute(insert(backfill_history), new)
            moved = conn.execute(update(backfill_watermarks).where(mark).values(watermark=watermark, read_at=now))
            if not moved.rowcount:
                values = {"environment": environment, "dag_id": dag_id, "watermark": watermark, "read_at": now}
                conn.execute(insert(backfill_watermarks).values(**values))

    def forget(self, environment: str) -> int:
        """Drop everything kept of this Airflow (its database was reset or restored): the backfills dropped."""
        with self._db.tx("dropping the kept backfill history") as conn:
            conn.execute(delete(backfill_watermarks).where(backfill_watermarks.c.environment == environment))
            dropped = conn.execute(delete(backfill_history).where(backfill_history.c.environment == environment))
            return int(dropped.rowcount)


def _row(environment: str, backfill: Backfill) -> dict[str, Any]:
    params = {
        "id": backfill.id,
        "dag_id": backfill.dag_id,
        "from_date": backfill.from_date.isoformat(),
        "to_date": backfill.to_date.isoformat(),
        "reprocess_behavior": backfill.reprocess_behavior,
        "max_active_runs": backfill.max_active_runs,
        "is_paused": backfill.is_paused,
        "dag_run_conf": None if backfill.dag_run_conf is None else dict(backfill.dag_run_conf),
        "created_at": backfill.created_at.isoformat(),
        "completed_at": None if backfill.completed_at is None else backfill.completed_at.isoformat(),
    }
    return {"environment": environment, "backfill_id": backfill.id, "dag_id": backfill.dag_id, "params": params}


def _backfill(params: Mapping[str, Any]) -> Backfill:
    completed = params["completed_at"]
    return Backfill(
        id=int(params["id"]),
        dag_id=params["dag_id"],
        from_date=datetime.fromisoformat(params["from_date"]),
        to_date=datetime.fromisoformat(params["to_date"]),
        reprocess_behavior=params["reprocess_behavior"],
        max_active_runs=int(params["max_active_runs"]),
        is_paused=bool(params["is_paused"]),
        dag_run_conf=params["dag_run_conf"],
        created_at=datetime.fromisoformat(params["created_at"]),
        completed_at=None if completed is None else datetime.fromisoformat(completed),
    )
