"""A spec's stages (table `stages`): its rehearsal in another environment, its verification runs, its publish run.

One row per (spec, environment, stage, key): a new rehearsal key (a new `attempt`, a fixed DAG) is a new row, so
an earlier rehearsal's outcome stays readable for the change record.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import insert, select, update

from controller.adapters.store.database import Clock, Database, stamp, unstamp
from controller.adapters.store.tables import stages
from controller.core.model.stages import Stage, StageRecord, StageState


class Stages:
    def __init__(self, db: Database, clock: Clock) -> None:
        self._db, self._clock = db, clock

    def get(self, spec: str, environment: str, stage: Stage, key: str) -> StageRecord | None:
        where = (
            (stages.c.spec_name == spec)
            & (stages.c.environment == environment)
            & (stages.c.stage == stage.value)
            & (stages.c.stage_key == key)
        )
        with self._db.tx(f"reading the {stage.value} stage of {spec}") as conn:
            row = conn.execute(select(stages).where(where)).mappings().first()
        return None if row is None else _record(row)

    def of_spec(self, spec: str) -> tuple[StageRecord, ...]:
        """Every stage the spec went through, oldest first (the change record lists them)."""
        with self._db.tx(f"reading the stages of {spec}") as conn:
            rows = conn.execute(select(stages).where(stages.c.spec_name == spec).order_by(stages.c.id)).mappings()
            return tuple(_record(row) for row in rows)

    def all(self) -> tuple[StageRecord, ...]:
        """Every stage row, oldest first (one read a pass: the planner sees each spec's latest per stage)."""
        with self._db.tx("reading stages") as conn:
            return tuple(_record(row) for row in conn.execute(select(stages).order_by(stages.c.id)).mappings())

    def save(self, record: StageRecord) -> StageRecord:
        """Insert the record, or update the row with its key (the state, the backfills, the run, the result)."""
        values = _values(record) | {"updated_at": stamp(self._clock())}
        key = {k: values[k] for k in ("spec_name", "environment", "stage", "stage_key")}
        with self._db.tx(f"recording the {record.stage.value} stage of {record.spec}") as conn:
            where = [getattr(stages.c, k) == v for k, v in key.items()]
            changed = conn.execute(update(stages).where(*where).values(**values)).rowcount
            if not changed:
                conn.execute(insert(stages).values(**values))
        return record


def _values(record: StageRecord) -> dict[str, Any]:
    return {
        "spec_name": record.spec,
        "environment": record.environment,
        "stage": record.stage.value,
        "stage_key": record.key,
        "state": record.state.value,
        "started_at": stamp(record.started_at),
        "backfill_ids": list(record.backfill_ids),
        "run_id": record.run_id,
        "triggered_at": None if record.triggered_at is None else stamp(record.triggered_at),
        "reason": record.reason,
        "metrics": None if record.metrics is None else dict(record.metrics),
        "runs": None if record.runs is None else dict(record.runs),
    }


def _record(row: Any) -> StageRecord:  # a RowMapping
    return StageRecord(
        spec=row["spec_name"],
        environment=row["environment"],
        stage=Stage(row["stage"]),
        key=row["stage_key"],
        state=StageState(row["state"]),
        started_at=unstamp(row["started_at"]),
        backfill_ids=tuple(int(i) for i in row["backfill_ids"] or ()),
        run_id=row["run_id"],
        triggered_at=None if row["triggered_at"] is None else unstamp(row["triggered_at"]),
        reason=row["reason"],
        metrics=row["metrics"],
        runs=row["runs"],
    )
