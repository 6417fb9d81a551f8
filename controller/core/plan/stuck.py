"""Stuck backfills (pure): runs of an unpaused backfill queued longer than a threshold while none of it runs,
with the likely cause from what was observed.  `now`, the runs and the scheduler's health are parameters.

It plugs in after a pass (commands/passhooks.py) over the plan's items; a planner-level version would take
the oldest queue time from `RunSummary` instead of reading the queued runs again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from controller.core.model.binding import Phase
from controller.core.model.guards import SchedulerHealth
from controller.core.model.spec import format_utc
from controller.core.plan.values import Item, Plan


def candidates(plan: Plan) -> list[Item]:
    """Specs whose backfill runs, with queued runs and none running: worth reading their queue times."""
    out = []
    for item in plan.items:
        counts = item.runs.counts if item.runs is not None else {}
        if item.phase is Phase.RUNNING and item.backfill_id and counts.get("queued") and not counts.get("running"):
            out.append(item)
    return out


@dataclass(frozen=True, slots=True)
class Stuck:
    spec: str
    dag_id: str
    backfill_id: int
    queued: int
    since: datetime
    cause: str

    def message(self, threshold_minutes: int) -> str:
        """Stable while the situation lasts (no ages that change every pass): audited once, on change."""
        return (
            f"{self.queued} run(s) queued for more than {threshold_minutes} min (oldest since "
            f"{format_utc(self.since)}) while none runs; likely cause: {self.cause}"
        )


def overdue(queued: int, oldest: datetime | None, now: datetime, threshold_minutes: int) -> bool:
    """Runs queued for at least the threshold (the cheap test, before the cause is looked up)."""
    return bool(queued) and oldest is not None and now - oldest >= timedelta(minutes=threshold_minutes)


def find_stuck(
    item: Item,
    queued: int,
    oldest: datetime | None,
    plan: Plan,
    *,
    health: SchedulerHealth,
    now: datetime,
    threshold_minutes: int,
) -> Stuck | None:
    """`queued` runs, the oldest queued at `oldest`, of a candidate (nothing of it runs: see `candidates`)."""
    if item.backfill_id is None or oldest is None or not overdue(queued, oldest, now, threshold_minutes):
        return None
    return Stuck(item.spec, item.dag_id, item.backfill_id, queued, oldest, likely_cause(item.dag_id, plan, health))


def likely_cause(dag_id: str, plan: Plan, health: SchedulerHealth) -> str:
    if any(f.kind == "dag-paused" and f.dag_id == dag_id for f in plan.findings):
        return f"the DAG {dag_id} is paused in Airflow (backfill runs wait for it): unpause the DAG"
    if health.error is not None:
        return f"not known: the scheduler's health could not be read ({health.error})"
    if health.status is not None and health.status != "healthy":
        beat = f", latest heartbeat {format_utc(health.heartbeat)}" if health.heartbeat else ", no heartbeat"
        return f"the scheduler is {health.status}{beat}: check the scheduler process"
    return (
        "no free slot: the scheduler is healthy and the DAG unpaused, so check the pools (default_pool), "
        "parallelism and max_active_tasks, and other DAG runs holding them"
    )
