"""Stuck backfills (pure): runs of an unpaused backfill queued longer than a threshold while none of it runs,
with the likely cause from what was observed.  `now`, the runs and the scheduler's health are parameters.

It plugs in after a pass (commands/loop/passhooks.py) over the plan's items; a planner-level version would take
the oldest queue time from `RunSummary` instead of reading the queued runs again.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from controller.core.model.binding import Phase
from controller.core.model.guards import SchedulerHealth
from controller.core.model.spec import format_utc
from controller.core.plan.values import Item, Plan

# apache/airflow#72337 (open in 3.3.2 and 3.4.0b2): after a cancel, the backfill is paused and completed, and the
# queued→running promotion still filters on its is_paused, so a run of it queued then (cleared after the cancel)
# never starts; unpausing the backfill answers 409
AIRFLOW_72337 = "https://github.com/apache/airflow/issues/72337"
CANCELLED_QUEUED = (
    f"the backfill was cancelled, and Airflow never starts a cancelled backfill's queued runs ({AIRFLOW_72337}; "
    "unpausing it answers 409): set those runs to failed in Airflow (or success, if their data is right), and "
    "backfill the dates again with a new spec; waiting will not help"
)


def candidates(plan: Plan) -> list[Item]:
    """Specs whose backfill runs, with queued runs and none running (or its DAG paused: Airflow's scheduler examines
    no run of a paused DAG, so a run in flight at the pause reads `running` for ever), and cancelled specs with
    queued runs (never to start: #72337): worth reading their queue times."""
    paused = _paused_dags(plan)
    out = []
    for item in plan.items:
        counts = item.runs.counts if item.runs is not None else {}
        idle = not counts.get("running") or item.dag_id in paused
        if ((item.phase is Phase.RUNNING and idle) or item.phase is Phase.CANCELLED) and item.backfill_id:
            out += [item] if counts.get("queued") else []
    return out


def _paused_dags(plan: Plan) -> set[str]:
    return {f.dag_id for f in plan.findings if f.kind == "dag-paused"}


def threshold_of(item: Item, minutes: int) -> int:
    """How long its runs may stay queued before it is stuck: a cancelled backfill's queued runs never start (0)."""
    return 0 if item.phase is Phase.CANCELLED else minutes


@dataclass(frozen=True, slots=True)
class Stuck:
    spec: str
    dag_id: str
    backfill_id: int
    queued: int
    since: datetime
    cause: str
    cancelled: bool = False  # a cancelled backfill's queued runs (#72337): stuck at once, whatever the threshold
    paused: bool = False  # its DAG is paused: none starts, and a run in flight at the pause may read `running`

    def message(self, threshold_minutes: int) -> str:
        """Stable while the situation lasts (no ages that change every pass): audited once, on change."""
        if self.cancelled:
            return f"{self.queued} run(s) queued (oldest since {format_utc(self.since)}) will never start: {self.cause}"
        # no count of runs marked running: it changes as Airflow settles them, and the message is the dedup key
        held = "while none starts (Airflow examines no run of a paused DAG)" if self.paused else "while none runs"
        return (
            f"{self.queued} run(s) queued for more than {threshold_minutes} min (oldest since "
            f"{format_utc(self.since)}) {held}; likely cause: {self.cause}"
        )


def too_young(created_at: datetime | None, now: datetime, threshold_minutes: int) -> bool:
    """No run of a backfill created less than the threshold ago has waited that long (its create queues its runs; a
    clear queues one later): its queued runs need no read."""
    return created_at is not None and now - created_at < timedelta(minutes=threshold_minutes)


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
    """`queued` runs, the oldest queued at `oldest`, of a candidate (nothing of it runs, or its DAG is paused: see
    `candidates`)."""
    threshold = threshold_of(item, threshold_minutes)
    if item.backfill_id is None or oldest is None or not overdue(queued, oldest, now, threshold):
        return None
    if item.phase is Phase.CANCELLED:
        return Stuck(item.spec, item.dag_id, item.backfill_id, queued, oldest, CANCELLED_QUEUED, cancelled=True)
    cause = likely_cause(item.dag_id, plan, health)
    paused = item.dag_id in _paused_dags(plan)
    return Stuck(item.spec, item.dag_id, item.backfill_id, queued, oldest, cause, paused=paused)


def likely_cause(dag_id: str, plan: Plan, health: SchedulerHealth) -> str:
    if dag_id in _paused_dags(plan):
        return f"the DAG {dag_id} is paused in Airflow (backfill runs wait for it): unpause the DAG"
    if health.error is not None:
        return f"not known: the scheduler's health could not be read ({health.error})"
    if health.status is not None and health.status != "healthy":
        beat = "" if health.heartbeat else " (no heartbeat)"  # never its time: a heartbeat moves, the key must not
        return f"the scheduler is {health.status}{beat}: check the scheduler process"
    return (
        "no free slot: the scheduler is healthy and the DAG unpaused, so check the pools (default_pool), "
        "parallelism and max_active_tasks, and other DAG runs holding them"
    )
