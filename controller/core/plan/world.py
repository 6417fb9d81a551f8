"""The planner's input (pure): the World as observed, and the Context one DAG's queue is planned in.

The World is what a pass read: each DAG's backfills and runs, the store's bindings, dry-run results, unfinished
create intents, the scheduler's health, the downstream systems' analysis verdicts, and `now` (rules about the
future and the guards need it; the core never reads a clock).
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime

from controller.core.model.airflow import Backfill, DagInfo, DagRun, RunSummary
from controller.core.model.binding import Binding, Claim
from controller.core.model.capabilities import Capabilities
from controller.core.model.guards import SchedulerHealth
from controller.core.model.policy import Policy
from controller.core.model.stages import Stage, StageRecord
from controller.core.model.stops import EmergencyStop, HandPause
from controller.core.plan.identity import NO_IDENTITY, Identity
from controller.core.plan.ownership import Owned
from controller.core.rules.analysis import Verdict
from controller.core.rules.code_history import CodeInRange
from controller.core.rules.selection import Selection


@dataclass(frozen=True, slots=True)
class DagObservation:
    dag_id: str
    info: DagInfo | None
    backfills: tuple[Backfill, ...] = ()
    runs: Mapping[int, RunSummary] = field(default_factory=dict)
    error: str | None = None
    similar: tuple[str, ...] = ()  # a missing DAG: the existing ids closest to its id (a typo's fix)
    owned: Mapping[int, Owned] = field(default_factory=dict)  # backfills whose own runs were read one by one


def closest_ids(dag_id: str, known: Iterable[str]) -> tuple[str, ...]:
    """The existing DAG ids a typo most likely meant: the closest (difflib's ratio, at least 0.6) and any as close."""
    scored = sorted(
        ((-difflib.SequenceMatcher(None, dag_id, other).ratio(), other) for other in set(known) - {dag_id}),
    )
    best = -scored[0][0] if scored else 0.0
    return tuple(other for score, other in scored[:3] if -score >= max(0.6, best - 0.02))


@dataclass(frozen=True, slots=True)
class DryRun:
    dates: tuple[datetime, ...] = ()  # logical dates, or partition dates for a partitioned DAG
    in_range: int | None = None
    error: str | None = None
    partitions: tuple[str, str] | None = None  # first and last partition key to run (partitioned DAGs)
    in_flight: tuple[tuple[str, str], ...] | None = ()  # (date or partition, state) Airflow will skip; None: unread
    in_flight_more: int = 0  # in flight beyond those listed (a page of them is read)
    code: CodeInRange | None = None  # the code of each interval's latest run in range (None: not read)
    selection: Selection | None = None  # a `select` spec: the intervals it re-runs (None: not read, or no select)


def run_label(run: DagRun) -> str:
    """A run as the in-flight line names it: its logical date, or its partition key."""
    if run.logical_date is not None:
        return run.logical_date.date().isoformat()
    return run.partition_key or run.run_id


@dataclass(frozen=True, slots=True)
class Holds:
    """What holds specs by a person's word: the store's unlifted stops, the pauses Airflow's event log names,
    and the backfills whose latest steer was a stop's pause (unpaused once no stop holds them)."""

    stops: tuple[EmergencyStop, ...] = ()
    hand_pauses: Mapping[int, HandPause] = field(default_factory=dict)
    stop_paused: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True)
class World:
    observations: Mapping[str, DagObservation] = field(default_factory=dict)
    bindings: Mapping[str, Binding] = field(default_factory=dict)
    dry_runs: Mapping[str, DryRun] = field(default_factory=dict)
    intents: Mapping[str, datetime] = field(default_factory=dict)  # spec → time of a create intent without outcome
    now: datetime = field(kw_only=True)  # for rules about the future (partitioned DAGs) and the guards
    scheduler: SchedulerHealth | None = None  # observed only when the policy's scheduler guard is on
    airflow: Capabilities | None = None  # the server's release (None: not read, e.g. no create was planned)
    # each downstream system's metric verdict this pass (None: not evaluated, e.g. `plan --no-store`); never part
    # of the plan's checksum (`commands/reconcile/analysis.py` plans without it for the checksum)
    analysis: Mapping[str, Verdict] | None = None
    holds: Holds = field(default_factory=Holds)  # emergency stops and hand pauses (`core.plan.stops`)
    # each spec's rehearsal (with the current key), canary and final verification and publish (`core.plan.stages`)
    stages: Mapping[tuple[str, Stage], StageRecord] = field(default_factory=dict)
    identity: Identity = NO_IDENTITY  # this controller's Airflow login: another login's backfills are not ours
    rested: frozenset[str] = frozenset()  # finished specs the pass counts, not plans (`core.plan.rest`)
    # of them, those on a DAG the pass walks: what their bindings (not read) claim there (`AtRest.walked`)
    claims: Mapping[str, Claim] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Context:
    """One DAG's queue as the walk has got so far: each spec's step reads it, none changes it; the walk makes the
    next one from the step's item (`queue.next_context`)."""

    obs: DagObservation
    policy: Policy
    world: World
    queue: tuple[str, ...]  # the names of the DAG's specs, in queue order
    taken: frozenset[int]  # backfills bound to or adopted by a spec: never another spec's to adopt
    occupant: tuple[str, int] | None = None  # (who, backfill id) holding the DAG's one active slot
    waiting_on: str | None = None  # the first spec in the queue that is not finished yet

    @property
    def dag_id(self) -> str:
        return self.obs.dag_id

    def backfill(self, backfill_id: int | None) -> Backfill | None:
        """The backfill as listed (None: not listed, or no id)."""
        return next((b for b in self.obs.backfills if b.id == backfill_id), None)

    def runs(self, backfill_id: int) -> RunSummary:
        """The backfill's runs as observed (none when they were not read)."""
        return self.obs.runs.get(backfill_id, RunSummary({}))

    def ours(self, who: str) -> str | None:
        """`who` when it is a spec of this queue, counted at rest or not (not an unmanaged backfill, nor a deleted
        spec's)."""
        return who if who in self.queue or who in self.world.rested else None
