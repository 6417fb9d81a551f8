"""Values describing what Airflow holds (pure): backfills, DAGs, DAG runs, and run summaries."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any

from controller.core.spec import canonical_json


@dataclass(frozen=True, slots=True)
class Backfill:
    id: int
    dag_id: str
    from_date: datetime
    to_date: datetime
    reprocess_behavior: str
    max_active_runs: int
    is_paused: bool
    dag_run_conf: Mapping[str, Any] | None
    created_at: datetime
    completed_at: datetime | None

    @property
    def active(self) -> bool:
        return self.completed_at is None

    def conf_json(self) -> str | None:
        return None if not self.dag_run_conf else canonical_json(dict(self.dag_run_conf))


@dataclass(frozen=True, slots=True)
class DagInfo:
    dag_id: str
    is_paused: bool
    is_stale: bool
    has_import_errors: bool
    is_backfillable: bool
    depends_on_past: bool | None  # None: not looked up (Airflow's dry run enforces its rules anyway)
    params: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class DagRun:
    run_id: str
    logical_date: datetime
    state: str
    start_date: datetime | None
    end_date: datetime | None


class Phase(StrEnum):
    PENDING = "Pending"
    QUEUED = "Queued"
    RUNNING = "Running"
    PAUSED = "Paused"
    SUCCEEDED = "Succeeded"
    COMPLETED_WITH_FAILURES = "CompletedWithFailures"
    CANCELLED = "Cancelled"
    BLOCKED = "Blocked"
    ORPHANED = "Orphaned"

    @property
    def terminal(self) -> bool:
        return self in (Phase.SUCCEEDED, Phase.COMPLETED_WITH_FAILURES, Phase.CANCELLED)


@dataclass(frozen=True, slots=True)
class RunSummary:
    """DAG runs of one backfill, by state, with what status and reports need."""

    counts: Mapping[str, int]
    failed_dates: tuple[datetime, ...] = ()
    never_started: int = 0  # failed without a start: cancelled while queued
    mean_duration: float | None = None  # seconds, over finished runs

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def count(self, state: str) -> int:
        return self.counts.get(state, 0)

    @property
    def unfinished(self) -> int:
        return self.count("queued") + self.count("running")

    def as_json(self) -> dict[str, Any]:
        return {
            "counts": dict(sorted(self.counts.items())),
            "total": self.total,
            "failed_dates": [d.isoformat() for d in self.failed_dates],
            "never_started": self.never_started,
            "mean_duration": self.mean_duration,
        }


def summarise(runs: Sequence[DagRun]) -> RunSummary:
    counts = Counter(run.state for run in runs)
    failed = tuple(r.logical_date for r in runs if r.state == "failed" and r.start_date is not None)
    never = sum(1 for r in runs if r.state == "failed" and r.start_date is None)
    durations = [(r.end_date - r.start_date).total_seconds() for r in runs if r.start_date and r.end_date]
    mean = sum(durations) / len(durations) if durations else None
    return RunSummary(dict(counts), failed, never, mean)
