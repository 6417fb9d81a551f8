"""What a `drain_dag` backfill holds back (pure), for the plan and the PR comment: while it runs, Airflow (3.4+)
creates none of the DAG's scheduled or asset-triggered runs, and when nothing of it is left it pauses the DAG, which
backfillctl never unpauses. How long the backfill runs is not known ahead, so neither is how many intervals are held
back: the plan says so instead of guessing. The DAG's `catchup` decides what happens to the missed intervals when a
person unpauses it: created, or skipped (a data gap).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from controller.core.model.airflow import DagInfo


@dataclass(frozen=True, slots=True)
class DrainHold:
    """The drained DAG's schedule and `catchup` as its details say them (None: not known, `unknown` says why)."""

    dag_id: str
    schedule: str | None = None  # the timetable's summary ("0 0 * * *")
    description: str | None = None  # its description ("At 00:00")
    catchup: bool | None = None
    unknown: str | None = None  # why the DAG's details could not be read

    @classmethod
    def of(cls, dag_id: str, info: DagInfo | None, unknown: str | None = None) -> DrainHold:
        if info is None:
            return cls(dag_id, unknown=unknown or "the DAG's details were not read")
        schedule = info.schedule
        summary, description = (None, None) if schedule is None else (schedule.summary, schedule.description)
        return cls(dag_id, summary, description, info.catchup, unknown)

    @property
    def on_unpause(self) -> str | None:
        """What the scheduler does with the missed intervals when the DAG is unpaused (None: not known)."""
        if self.catchup is None:
            return None
        return "created" if self.catchup else "skipped"

    def lines(self) -> list[str]:
        """The plan's two lines: what is held back and until when, and what unpausing does with it."""
        return [
            f"drain: scheduled and asset-triggered runs of DAG {self.dag_id}{self._schedule()} are not created "
            "while the backfill runs (how long it runs, and so how many intervals, is not known ahead); Airflow "
            "pauses the DAG once none of its runs is left unfinished, and backfillctl never unpauses it: a person "
            "does",
            self._catchup(),
        ]

    def _schedule(self) -> str:
        if self.schedule is None:
            return ""
        return f" (schedule {self.schedule}" + (f", {self.description})" if self.description else ")")

    def _catchup(self) -> str:
        if self.catchup is None:
            why = f" ({self.unknown})" if self.unknown else ""
            return (
                f"drain: catchup of DAG {self.dag_id} is not known{why}: whether the intervals missed while it is "
                "drained and paused are created on unpause or skipped (a data gap) is not known"
            )
        if self.catchup:
            return (
                f"drain: DAG {self.dag_id} has catchup: true: when a person unpauses it, the scheduler creates the "
                "intervals missed while it was drained and paused"
            )
        return (
            f"drain: DAG {self.dag_id} has catchup: false: when a person unpauses it, the scheduler creates only the "
            "latest interval; the others missed while it was drained and paused are skipped (a data gap: backfill "
            "them with a new spec)"
        )

    def as_json(self) -> dict[str, Any]:
        """The plan JSON's `facts.drain` of a create."""
        return {
            "dag_id": self.dag_id,
            "held_back": "scheduled and asset-triggered runs while the backfill runs",
            "schedule": self.schedule,
            "schedule_description": self.description,
            "catchup": self.catchup,
            "missed_on_unpause": self.on_unpause,
            "unknown": self.unknown,
        }
