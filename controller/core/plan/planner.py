"""The plan: desired specs vs observed Airflow → one action per spec, plus findings (pure).

`make_plan` is a function of the specs (in queue order), the policy, what was observed, the store's
bindings, dry-run results and unfinished create intents. It never does I/O and never reads a clock.
Run it once without dry runs: head-of-queue creates come back as `dry-run`, the caller dry-runs exactly
those, then plans again.
"""

from __future__ import annotations

import difflib
import hashlib
import itertools
from collections.abc import Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from enum import StrEnum
from typing import Any

from controller.core.model.airflow import Backfill, BackfillRequest, DagInfo, DagRun, RunSummary
from controller.core.model.binding import Binding, Phase
from controller.core.model.capabilities import Capabilities, rerun_code
from controller.core.model.chunks import Chunk, Progress, Slice
from controller.core.model.guards import SchedulerHealth
from controller.core.model.policy import DriftMode, Policy
from controller.core.model.ranges import DateRange, compact
from controller.core.model.spec import BackfillSpec, DesiredState, canonical_json, format_utc
from controller.core.plan.ownership import Owned
from controller.core.rules.chunks import (
    Chunking,
    all_runs,
    awaiting_promotion,
    chunk_count,
    chunking,
    halt,
    next_size,
    remaining,
    request_for,
    slice_of,
    take,
)
from controller.core.rules.guards import BudgetLoad, Claim, Stop, admit, guard_stop, resumed_text, scheduler_problem
from controller.core.rules.schedules import FUTURE_HINT, failed_partitions_text, future_partitions, unbackfillable

HALT = "halt"  # the guard name of a halt's pause: never `state: paused`, never drift

__all__ = ["Binding", "DagObservation", "DryRun", "Finding", "Item", "Kind", "Plan", "World", "make_plan"]

PLAN_FORMAT_VERSION = 1
AWAITING_DRY_RUN = "awaiting dry run"  # a queue head that would be created once its run count is known
UNOBSERVED = "observation incomplete"  # how the items of an unobserved DAG's specs begin their reason


class FindingKind(StrEnum):
    DRIFT = "drift"  # a managed backfill paused by hand
    ORPHANED = "orphaned"  # a deleted spec's backfill runs on
    UNMANAGED = "unmanaged"  # a backfill backfillctl does not own blocks a DAG's queue
    DAG_PAUSED = "dag-paused"
    INCOMPLETE = "observation-incomplete"
    STILL_RUNNING = "still-running"  # cancelled: running runs finish
    COMPLETED_EARLY = "completed-early"  # Airflow set completed_at while runs are queued or running
    ORPHAN_SUSPECTED = "orphan-suspected"  # a backfill of ours completed with none of the runs its dry run listed


INCOMPLETE = FindingKind.INCOMPLETE  # the finding kind that makes a plan unusable for changes


class Kind(StrEnum):
    CREATE = "create"
    ADOPT = "adopt"
    PAUSE = "pause"
    UNPAUSE = "unpause"
    CANCEL = "cancel"
    WAIT = "wait"
    NOOP = "noop"
    REFUSE = "refuse"
    BLOCKED = "blocked"

    @property
    def mutating(self) -> bool:
        return self in (Kind.CREATE, Kind.PAUSE, Kind.UNPAUSE, Kind.CANCEL)

    @property
    def change(self) -> bool:
        return self.mutating or self is Kind.ADOPT


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


@dataclass(frozen=True, slots=True)
class World:
    observations: Mapping[str, DagObservation] = field(default_factory=dict)
    bindings: Mapping[str, Binding] = field(default_factory=dict)
    dry_runs: Mapping[str, DryRun] = field(default_factory=dict)
    intents: Mapping[str, datetime] = field(default_factory=dict)  # spec → time of a create intent without outcome
    now: datetime | None = None  # for rules about the future (partitioned DAGs) and guards; None skips them
    scheduler: SchedulerHealth | None = None  # observed only when the policy's scheduler guard is on
    airflow: Capabilities | None = None  # the server's release (None: not read, e.g. no create was planned)


@dataclass(frozen=True, slots=True)
class Item:
    spec: str
    dag_id: str
    kind: Kind
    phase: Phase
    reason: str = ""
    backfill_id: int | None = None
    runs_to_create: int | None = None
    runs_in_range: int | None = None
    first_date: datetime | None = None
    last_date: datetime | None = None
    error: bool = False
    source: BackfillSpec | None = field(default=None, repr=False, compare=False)  # None for an orphan
    runs: RunSummary | None = None  # the observed (or last recorded) runs of its backfill
    request: BackfillRequest | None = None  # what a create sends
    partitions: tuple[str, str] | None = None  # first and last partition key to run (partitioned DAGs)
    guard: str | None = None  # the guard rule behind this item ("window", "freeze 'x'", "budget warehouse", …)
    task_ceiling: int | None = None  # max_active_runs × the DAG's max_active_tasks (None: not known)
    in_flight: tuple[tuple[str, str], ...] | None = ()  # queued or running runs in range that Airflow skips
    in_flight_more: int = 0  # in flight beyond those listed
    chunk: tuple[int, int] | None = None  # a chunked spec: (k, n), its k-th chunk of about n
    chunking: Chunking | None = None  # a chunked spec's chunk sizes (the plan line says them)
    progress: Progress | None = field(default=None, repr=False, compare=False)  # a chunked spec's progress to keep
    promoting: bool = False  # this create is the first chunk after the canary: `promote: true` was merged
    behind: str | None = None  # queued behind this spec of ours: it moves when that one does
    code: str | None = None  # a create: the Airflow release and the DAG code its runs will use
    dates: tuple[DateRange, ...] | None = field(default=None, repr=False)  # the dates a create (re)runs, or
    # an adopted backfill's own dates recovered from its runs
    whole: bool | None = None  # an adopted backfill's own dates are every backfill run of its range
    refused_at_head: str | None = None  # `plan` only: a queued spec's dry run now exceeds its limit (lookahead.py)

    @property
    def held_by_guard(self) -> bool:
        """Paused by a guard: it moves on by itself when the guard lifts (never settled)."""
        return self.guard is not None and self.phase is Phase.PAUSED

    @property
    def moving(self) -> bool:
        """It goes on without a human (for now): pending, queued, running, or paused by a guard."""
        return self.phase in (Phase.PENDING, Phase.QUEUED, Phase.RUNNING) or self.held_by_guard

    @property
    def facts(self) -> dict[str, Any]:
        """The item's facts as JSON (the plan's `--format json` and the PR comment read these)."""
        facts = spec_facts(self.source) if self.source is not None else {}
        if self.runs is not None:
            facts["runs"] = self.runs.as_json()
        if self.request is not None:
            facts["request"] = self.request.body()
        if self.partitions is not None:
            facts["first_partition"], facts["last_partition"] = self.partitions
        if self.task_ceiling is not None:
            facts["task_ceiling"] = self.task_ceiling
        if self.in_flight is None or self.in_flight:
            facts["in_flight"] = (
                None if self.in_flight is None else [{"date": d, "state": s} for d, s in self.in_flight]
            )
        if self.in_flight_more:
            facts["in_flight_more"] = self.in_flight_more
        if self.chunk is not None:
            facts["chunk"] = {"index": self.chunk[0], "count": self.chunk[1]}
        if self.chunking is not None:
            facts["chunking"] = {"chunk_runs": self.chunking.size, "canary_runs": self.chunking.canary}
        if self.progress is not None:
            facts["backfills"] = list(self.progress.ids)
        if self.code is not None:
            facts["code"] = self.code
        return facts

    def as_json(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "dag_id": self.dag_id,
            "action": self.kind.value,
            "phase": self.phase.value,
            "reason": self.reason,
            "backfill_id": self.backfill_id,
            "runs_to_create": self.runs_to_create,
            "runs_in_range": self.runs_in_range,
            "first_date": _iso(self.first_date),
            "last_date": _iso(self.last_date),
            "error": self.error,
            "guard": self.guard,
            "facts": self.facts,
        } | ({"refused_at_head": self.refused_at_head} if self.refused_at_head is not None else {})


@dataclass(frozen=True, slots=True)
class Finding:
    kind: FindingKind
    dag_id: str
    message: str
    spec: str | None = None
    backfill_id: int | None = None
    cause: str = ""  # the shared cause, so a renderer can say it once for many DAGs

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "dag_id": self.dag_id,
            "spec": self.spec,
            "backfill_id": self.backfill_id,
            "message": self.message,
        }


@dataclass(frozen=True, slots=True)
class Plan:
    items: tuple[Item, ...]
    findings: tuple[Finding, ...] = ()
    dry_runs_needed: tuple[str, ...] = ()  # queue heads whose create waits for a dry run (never in an applied plan)
    budgets: tuple[BudgetLoad, ...] = ()  # per budgeted system, the specs that list it (the plan's load lines)
    settled: tuple[Item, ...] = ()  # deleted specs whose backfill finished: their outcome, to record (not shown)

    def checksum(self) -> str:
        """Over the decisions only, not progress, so a reviewed plan stays valid while runs advance."""
        decisions = [
            [i.spec, i.kind.value, i.backfill_id, i.runs_to_create, i.request.body() if i.request else None]
            for i in self.items
            if i.kind.change or i.kind in (Kind.REFUSE, Kind.BLOCKED)
        ]
        return hashlib.sha256(canonical_json(decisions).encode()).hexdigest()[:16]

    @property
    def complete(self) -> bool:
        """Every DAG the plan needed was observed; only then may it be reviewed (checksum) or applied."""
        return not any(f.kind == INCOMPLETE for f in self.findings)

    @property
    def changes(self) -> tuple[Item, ...]:
        return tuple(i for i in self.items if i.kind.change)

    def count(self, *kinds: Kind) -> int:
        return sum(1 for i in self.items if i.kind in kinds)

    def as_json(self) -> dict[str, Any]:
        return {
            "format_version": PLAN_FORMAT_VERSION,
            "checksum": self.checksum() if self.complete else None,
            "complete": self.complete,
            "items": [i.as_json() for i in self.items],
            "findings": [f.as_json() for f in self.findings],
            "summary": summary_counts(self),
            "budgets": [b.as_json() for b in self.budgets],
        }


def summary_counts(plan: Plan) -> dict[str, int]:
    return {
        "create": plan.count(Kind.CREATE),
        "pause": plan.count(Kind.PAUSE),
        "unpause": plan.count(Kind.UNPAUSE),
        "cancel": plan.count(Kind.CANCEL),
        "adopt": plan.count(Kind.ADOPT),
        "queued": plan.count(Kind.WAIT),
        "blocked": plan.count(Kind.BLOCKED, Kind.REFUSE),
        "refused": plan.count(Kind.REFUSE),
        "in_sync": plan.count(Kind.NOOP),
    }


def _iso(value: datetime | None) -> str | None:
    return None if value is None else format_utc(value)


# --- matching -------------------------------------------------------------------------------------------


def matches(spec: BackfillSpec, backfill: Backfill) -> bool:
    """Same backfill as the spec would create: DAG, dates, reprocess, max_active_runs and conf."""
    return matches_request(BackfillRequest.from_spec(spec), backfill)


def matches_request(request: BackfillRequest, backfill: Backfill) -> bool:
    """The backfill a create with this body makes (a whole spec's, or one chunk's)."""
    conf = canonical_json(dict(request.dag_run_conf)) if request.dag_run_conf else None
    return (
        backfill.dag_id == request.dag_id
        and backfill.from_date == request.from_date
        and backfill.to_date == request.to_date
        and backfill.reprocess_behavior == request.reprocess_behavior
        and backfill.max_active_runs == request.max_active_runs
        and backfill.conf_json() == conf
    )


def pending_request(spec: BackfillSpec, binding: Binding | None) -> BackfillRequest | None:
    """The chunk create a chunked spec asked for and has no answer to (a crash or a lost answer)."""
    if binding is None or binding.progress is None or binding.progress.pending is None:
        return None
    return request_for(spec, binding.progress.pending)


LARGE = 10**9  # a run count above any policy's threshold: would the spec be chunked at all


def chunk_of(spec: BackfillSpec, backfill: Backfill) -> bool:
    """A backfill the chunked spec may have created as one of its chunks: its parameters (any concurrency: it
    may change between chunks), dates inside its range."""
    request = replace(
        BackfillRequest.from_spec(spec),
        from_date=backfill.from_date,
        to_date=backfill.to_date,
        max_active_runs=backfill.max_active_runs,
    )
    return (
        matches_request(request, backfill) and spec.from_date <= backfill.from_date <= spec.to_date >= backfill.to_date
    )


def adoptable_chunks(spec: BackfillSpec, backfills: Sequence[Backfill], taken: set[int]) -> tuple[Backfill, ...]:
    """A chunked spec's chunks, oldest first: contiguous slices one after another in its direction; nothing
    when the candidates overlap or go the other way (they are not one spec's chunks)."""
    found = sorted(
        (b for b in backfills if b.id not in taken and chunk_of(spec, b)), key=lambda b: (b.created_at, b.id)
    )
    for before, after in itertools.pairwise(found):
        if (after.to_date >= before.from_date) if spec.run_backwards else (after.from_date <= before.to_date):
            return ()
    return tuple(found)


def _creation(backfill: Backfill) -> tuple[datetime, int]:
    return backfill.created_at, backfill.id


def adoptable(
    spec: BackfillSpec, backfills: Sequence[Backfill], taken: set[int], intent: datetime | None
) -> Backfill | None:
    """A backfill we may have created for this spec: active ones first, then the newest completed."""
    found = [
        b for b in backfills if b.id not in taken and matches(spec, b) and (intent is None or b.created_at >= intent)
    ]
    found.sort(key=lambda b: (b.active, b.created_at, b.id), reverse=True)
    return found[0] if found else None


# --- the plan -------------------------------------------------------------------------------------------


def _code(item: Item, world: World) -> Item:
    """A create says which Airflow release and which DAG code its runs will use (where the API tells it)."""
    if item.kind is not Kind.CREATE or world.airflow is None or item.source is None:
        return item
    obs = world.observations.get(item.dag_id)
    info = obs.info if obs is not None else None
    where = f"Airflow {world.airflow.version}"
    if info is not None and info.dag_version is not None:
        where += f", DAG version {info.dag_version}"
    asked, dag_default = item.source.run_on_latest_version, info.rerun_with_latest_version if info else None
    request = item.request  # the DAG's own choice is sent explicitly, as Airflow 3.3 would fall back to it
    if request is not None and asked is None and dag_default is not None and world.airflow.rerun_with_latest_version:
        request = replace(request, run_on_latest_version=dag_default)
    return replace(item, request=request, code=f"{where}: {rerun_code(world.airflow, asked, dag_default)}")


def make_plan(specs: Sequence[BackfillSpec], policy: Policy, world: World) -> Plan:
    """Specs must be in queue order (first merged first); the result is sorted by DAG then queue."""
    items: list[Item] = []
    findings: list[Finding] = []
    needed: list[str] = []
    by_dag: dict[str, list[BackfillSpec]] = {}
    for spec in specs:
        by_dag.setdefault(spec.dag_id, []).append(spec)
    for dag_id in sorted(by_dag):
        dag_items, dag_findings, dag_needs = _plan_dag(dag_id, by_dag[dag_id], policy, world)
        items += dag_items
        findings += dag_findings
        needed += dag_needs
    orphan_items, orphan_findings, settled = _orphans({s.name for s in specs}, world)
    findings += orphan_findings
    findings += [
        Finding(FindingKind.INCOMPLETE, dag_id, _unobserved(dag_id, obs.error), cause=obs.error)
        for dag_id, obs in sorted(world.observations.items())
        if obs.error and dag_id not in by_dag
    ]
    items += orphan_items
    items = [_code(_load(i, world), world) for i in _admit(items, specs, policy)]
    findings += _scheduler_findings(policy, world)
    ordered = tuple(sorted(findings, key=lambda f: (f.dag_id, f.kind, f.spec or "", f.backfill_id or 0)))
    return Plan(tuple(items), ordered, tuple(needed), budget_loads(specs, items, policy), tuple(settled))


def dry_runs_needed(specs: Sequence[BackfillSpec], policy: Policy, world: World) -> tuple[str, ...]:
    """The queue heads a create would start, whose run counts must come from Airflow's dry run first."""
    return make_plan(specs, policy, world).dry_runs_needed


def _plan_dag(
    dag_id: str, queue: Sequence[BackfillSpec], policy: Policy, world: World
) -> tuple[list[Item], list[Finding], list[str]]:
    obs = world.observations.get(dag_id)
    live = [s for s in queue if not _recorded_terminal(s, world)]
    if live and (obs is None or obs.error):
        error = obs.error if obs and obs.error else "DAG not observed"
        why = f"{UNOBSERVED}: {error}"
        items = [
            _recorded(s, world) if s not in live else _item(s, Kind.BLOCKED, Phase.BLOCKED, why, error=True)
            for s in queue
        ]
        return items, [Finding(FindingKind.INCOMPLETE, dag_id, _unobserved(dag_id, error), cause=error)], []
    assert obs is not None or not live
    return _DagPlanner(dag_id, queue, policy, world, obs).run()


def _unobserved(dag_id: str, error: str) -> str:
    return f"DAG {dag_id} was not fully observed: {error}"


def _recorded_terminal(spec: BackfillSpec, world: World) -> bool:
    binding = world.bindings.get(spec.name)
    return binding is not None and binding.phase.terminal


def _recorded(spec: BackfillSpec, world: World) -> Item:
    binding = world.bindings[spec.name]
    done = len(binding.progress.chunks) if binding.progress is not None else 0
    return _item(
        spec,
        Kind.NOOP,
        binding.phase,
        binding.reason or "finished",
        binding.backfill_id,
        runs=binding.runs or RunSummary({}),
        progress=binding.progress,
        chunk=(done, done) if done else None,  # a finished chunked spec ran all its chunks
    )


def spec_facts(spec: BackfillSpec) -> dict[str, Any]:
    """What a reviewer needs to see of a spec, as JSON (plan output and PR comment)."""
    return {
        "from_date": format_utc(spec.from_date),
        "to_date": format_utc(spec.to_date),
        "reprocess_behavior": spec.reprocess_behavior.value,
        "max_active_runs": spec.max_active_runs,
        "run_backwards": spec.run_backwards,
        "approvers": list(spec.approvers),
        "ticket": spec.ticket,
        "state": spec.state.value,
        "expected_runs": spec.expected_runs,
    }


def _item(
    spec: BackfillSpec, kind: Kind, phase: Phase, reason: str = "", backfill_id: int | None = None, **extra: Any
) -> Item:
    return Item(spec.name, spec.dag_id, kind, phase, reason, backfill_id, source=spec, **extra)


class _DagPlanner:
    """Walks one DAG's queue; small methods, one decision each."""

    def __init__(
        self, dag_id: str, queue: Sequence[BackfillSpec], policy: Policy, world: World, obs: DagObservation | None
    ) -> None:
        self.dag_id, self.queue, self.policy, self.world = dag_id, queue, policy, world
        self.obs = obs or DagObservation(dag_id, None)
        # every backfill a spec owns (a chunked spec owns all its chunks), never another spec's to adopt
        self.bound = {i for b in world.bindings.values() for i in (*b.backfills, b.backfill_id) if i is not None}
        self.taken: set[int] = set(self.bound)
        self.findings: list[Finding] = []
        self.occupant: tuple[str, int] | None = None  # (who, backfill id) holding the DAG's one active slot
        self.waiting_on: str | None = None  # first spec in the queue that is not finished yet
        self.adoptions: dict[str, Backfill] = {}
        self.chunk_adoptions: dict[str, tuple[Backfill, ...]] = {}  # a chunked spec's chunks, after a lost store
        self.dry_runs_needed: list[str] = []

    def run(self) -> tuple[list[Item], list[Finding], list[str]]:
        self._claim_adoptions()
        items = [self._decide(spec) for spec in self.queue]
        self._unmanaged()
        self._dag_paused(items)
        return items, self.findings, self.dry_runs_needed

    def _claim_adoptions(self) -> None:
        for spec in self.queue:
            binding = self.world.bindings.get(spec.name)
            if binding is not None and (binding.backfill_id is not None or binding.progress is not None):
                continue  # bound; a chunked spec finds its pending chunk itself (`_pending_chunk`)
            found = adoptable(spec, self.obs.backfills, self.taken, self.world.intents.get(spec.name))
            if found is not None:
                self.adoptions[spec.name] = found
                self.taken.add(found.id)
            elif chunking(spec, self.policy, LARGE) is not None:
                chunks = adoptable_chunks(spec, self.obs.backfills, self.taken)
                if chunks:
                    self.chunk_adoptions[spec.name] = chunks
                    self.taken |= {b.id for b in chunks}
        active = [b for b in self.obs.backfills if b.active]
        owners = {b.backfill_id: b.spec_name for b in self.world.bindings.values() if b.backfill_id}
        owners.update({b.id: name for name, b in self.adoptions.items()})
        owners.update({b.id: name for name, found in self.chunk_adoptions.items() for b in found})
        if active:
            self.occupant = (owners.get(active[0].id, f"unmanaged backfill #{active[0].id}"), active[0].id)

    def _decide(self, spec: BackfillSpec) -> Item:
        binding = self.world.bindings.get(spec.name)
        if binding is not None and binding.phase.terminal:
            return _recorded(spec, self.world)
        if binding is not None and binding.progress is not None:
            item = self._chunked(spec, binding, binding.progress)
        elif binding is not None and binding.backfill_id is not None:
            item = self._bound(spec, binding)
        elif spec.name in self.adoptions:
            item = self._adopt(spec, self.adoptions[spec.name])
        elif spec.name in self.chunk_adoptions:
            item = self._adopt_chunks(spec, self.chunk_adoptions[spec.name])
        else:
            item = self._unbound(spec)
        if not item.phase.terminal and self.waiting_on is None:
            self.waiting_on = spec.name
        return item

    def _backfill(self, backfill_id: int) -> Backfill | None:
        return next((b for b in self.obs.backfills if b.id == backfill_id), None)

    def _bound(self, spec: BackfillSpec, binding: Binding) -> Item:
        backfill = self._backfill(binding.backfill_id or 0)
        if backfill is None:
            return _item(
                spec,
                Kind.BLOCKED,
                Phase.BLOCKED,
                f"backfill #{binding.backfill_id} is no longer in Airflow",
                binding.backfill_id,
                error=True,
            )
        if not backfill.active:
            return self._finished(spec, backfill, binding.applied_state)
        return self._steer(spec, backfill, binding.applied_state, binding.guard)

    # --- a chunked spec (issue 13) ---------------------------------------------------------------------

    def _chunked(self, spec: BackfillSpec, binding: Binding, progress: Progress) -> Item:
        """A chunked spec: its pending chunk, its active chunk, or what comes after a finished one."""
        pending = progress.pending
        if pending is not None:
            adopted = self._pending_chunk(spec, progress, pending)
            if adopted is not None and adopted.backfill_id is not None:
                return self._with_chunks(spec, adopted, progress, adopted.backfill_id)
            progress = replace(progress, pending=None)  # not in Airflow: planned again from a new dry run
        item = self._chunk_step(spec, binding, progress)
        if pending is not None and item.kind is not Kind.CREATE and item.progress is not None:
            # until a new create replaces it, the unanswered one stays pending: if it lands late, it is adopted
            item = replace(item, progress=replace(item.progress, pending=pending))
        return item

    def _chunk_step(self, spec: BackfillSpec, binding: Binding, progress: Progress) -> Item:
        current = self._backfill(binding.backfill_id) if binding.backfill_id is not None else None
        if current is None and binding.backfill_id is not None:
            return self._bound(spec, binding)  # its backfill is gone: blocked, as for any spec
        runs = self._chunk_runs(progress, current.id) if current is not None else RunSummary({})
        if current is not None and (current.active or runs.unfinished):
            item = self._chunk_running(spec, binding, progress, current, runs)
        else:
            if current is not None:
                progress = progress.finished(current.id, runs)
            item = self._between_chunks(spec, binding, progress, current)
        return self._with_chunks(spec, item, progress, None if current is None else current.id)

    def _with_chunks(self, spec: BackfillSpec, item: Item, progress: Progress, current: int | None) -> Item:
        """The item with the spec's progress, its runs over every chunk, and which chunk of how many it is on."""
        progress = item.progress or progress
        observed = {} if current is None or current not in self.obs.runs else {current: self.obs.runs[current]}
        count = chunk_count(spec, self.policy, progress)
        index = len(progress.chunks) + (1 if item.kind is Kind.CREATE else 0)
        index = max(index, 1)
        return replace(
            item, runs=all_runs(progress, observed), progress=progress, chunk=(index, max(count, index) if count else 0)
        )

    def _chunk_runs(self, progress: Progress, backfill_id: int) -> RunSummary:
        """A chunk's runs as observed now, or its final runs as the store keeps them (not read again)."""
        if backfill_id in self.obs.runs:
            return self.obs.runs[backfill_id]
        kept = next((c.summary for c in progress.chunks if c.backfill_id == backfill_id), None)
        return kept or RunSummary({})

    def _pending_chunk(self, spec: BackfillSpec, progress: Progress, pending: Slice) -> Item | None:
        """The chunk whose create had no answer, found in Airflow (created after the intent): adopted."""
        intent = self.world.intents.get(spec.name)
        request = request_for(spec, pending)
        found = [
            b
            for b in self.obs.backfills
            if b.id not in self.taken and matches_request(request, b) and (intent is None or b.created_at >= intent)
        ]
        if not found:
            return None
        backfill = max(found, key=lambda b: b.id)
        self.taken.add(backfill.id)
        chunk = pending.chunk(backfill.id)
        item = self._adopt(spec, backfill)
        return replace(
            item,
            progress=progress.with_chunk(chunk),
            reason=f"adopt chunk backfill #{backfill.id} "
            f"({'intent without outcome' if intent else 'created, answer lost'})",
        )

    def _chunk_running(
        self, spec: BackfillSpec, binding: Binding, progress: Progress, current: Backfill, runs: RunSummary
    ) -> Item:
        """The active chunk: steered like any backfill, and paused (Halted) when too many runs failed."""
        base: dict[str, Any] = {"backfill_id": current.id, "runs": runs}
        if spec.state is not DesiredState.ACTIVE or not current.active:
            return self._bound(spec, binding)
        everything = all_runs(progress, {current.id: runs})
        after = halt(spec, progress, everything)
        if after.halted is not None:
            kind = Kind.NOOP if current.is_paused else Kind.PAUSE
            return _item(spec, kind, Phase.HALTED, after.halted, guard=HALT, progress=after, **base)
        if progress.halted is not None:  # a new `resume` value ends the halt; a window or freeze may still hold it
            steered = self._steer(spec, current, binding.applied_state, HALT)
            if steered.kind is Kind.UNPAUSE:
                steered = replace(steered, reason=f"resumed: {spec.resume}")
            return replace(steered, progress=after)
        return replace(self._bound(spec, binding), progress=after)

    def _between_chunks(self, spec: BackfillSpec, binding: Binding, progress: Progress, last: Backfill | None) -> Item:
        """Its last chunk finished: the outcome, a halt, the canary's wait, or the next chunk."""
        everything = all_runs(progress, {})
        done = len(progress.chunks)
        if last is not None and _created_nothing(progress, last.id):
            return replace(self._empty(spec, last), progress=progress)
        if binding.applied_state is DesiredState.CANCELLED or spec.state is DesiredState.CANCELLED:
            left = "the rest" if progress.uncreated is None else f"{progress.uncreated:,} run(s)"
            why = f"cancelled after {done} chunk(s); {left} not created"
            return _item(spec, Kind.NOOP, Phase.CANCELLED, why, progress=progress)
        after = halt(spec, progress, everything, boundary=True)  # the finished chunk is judged, whatever its size
        if remaining(spec, after) is None:  # otherwise the next chunk's dry run says whether anything is left
            return self._chunks_done(spec, last, everything, binding.applied_state, after)
        return self._held(spec, after, everything) or self._next_chunk(spec, after, everything, last)

    def _held(self, spec: BackfillSpec, progress: Progress, everything: RunSummary) -> Item | None:
        """What holds the next chunk back: a halt, the canary's review, or `state: paused` (None: nothing)."""
        if progress.halted is not None:
            return _item(spec, Kind.NOOP, Phase.HALTED, progress.halted, progress=progress)
        if awaiting_promotion(spec, progress) and progress.uncreated != 0:  # a canary that ran every run waits not
            reason = (
                f"canary chunk finished ({everything.count('success')} succeeded, {everything.count('failed')} failed);"
                " check its output, then merge `promote: true` to continue"
            )
            return _item(spec, Kind.NOOP, Phase.AWAITING_PROMOTION, reason, progress=progress)
        if spec.state is DesiredState.PAUSED:
            why = f"paused after chunk {len(progress.chunks)}; set state: active to continue"
            return _item(spec, Kind.NOOP, Phase.PAUSED, why, progress=progress)
        return None

    def _chunks_done(
        self, spec: BackfillSpec, last: Backfill | None, everything: RunSummary, applied: str, progress: Progress
    ) -> Item:
        if last is None and not progress.chunks:
            return _item(spec, Kind.NOOP, Phase.SUCCEEDED, "nothing to reprocess", progress=progress)
        if last is None:  # its last chunk was not observed this pass: the outcome is its chunks' runs
            phase = Phase.COMPLETED_WITH_FAILURES if everything.count("failed") else Phase.SUCCEEDED
            return _item(
                spec, Kind.NOOP, phase, _outcome_reason(phase, everything), _last_id(progress), progress=progress
            )
        phase = terminal_phase(last, everything, applied)
        return _item(spec, Kind.NOOP, phase, _outcome_reason(phase, everything), last.id, progress=progress)

    def _next_chunk(
        self, spec: BackfillSpec, progress: Progress, everything: RunSummary, last: Backfill | None
    ) -> Item:
        """The next chunk's create, once the DAG can take it (like a queue head's) and its dry run is known."""
        blocked = _dag_problem(self.obs.info, self.dag_id, self.obs.similar)
        if blocked is not None:
            return _item(spec, Kind.BLOCKED, Phase.BLOCKED, blocked[0], error=blocked[1], progress=progress)
        if self.occupant is not None:  # another backfill holds the DAG's one active slot
            who, backfill_id = self.occupant
            why = f"queued behind {who} (backfill #{backfill_id})"
            return _item(spec, Kind.WAIT, Phase.QUEUED, why, progress=progress, behind=self._ours(who))
        dry = self.world.dry_runs.get(spec.name)
        if dry is None:
            self.dry_runs_needed.append(spec.name)
            return _item(spec, Kind.WAIT, Phase.PENDING, AWAITING_DRY_RUN, progress=progress)
        if dry.error is not None:
            why = f"Airflow refuses the next chunk: {dry.error}"
            return _item(spec, Kind.BLOCKED, Phase.BLOCKED, why, error=True, progress=progress)
        if not dry.dates:
            return self._chunks_done(spec, last, everything, DesiredState.ACTIVE.value, progress)
        return self._create_chunk(spec, progress, dry.dates)

    def _create_chunk(self, spec: BackfillSpec, progress: Progress, left: Sequence[datetime]) -> Item:
        dates = take(sorted(left), next_size(spec, self.policy, progress), backwards=spec.run_backwards)
        chunk = slice_of(dates, spec.max_active_runs)
        stop, unknown = guard_now(spec, self.policy, self.world)
        if unknown is not None:
            return _item(spec, Kind.BLOCKED, Phase.BLOCKED, f"{UNOBSERVED}: {unknown}", error=True, progress=progress)
        if stop is not None:
            return _item(spec, Kind.WAIT, Phase.QUEUED, stop.queued, guard=stop.rule, progress=progress)
        self.occupant = (spec.name, 0)
        promoting = bool(spec.execution and spec.execution.canary_runs) and not progress.promoted
        return _chunk_create(
            spec,
            chunk,
            progress,
            runs_to_create=chunk.runs,
            first_date=chunk.first,
            last_date=chunk.last,
            promoting=promoting,
        )

    def _finished(self, spec: BackfillSpec, backfill: Backfill, applied: str) -> Item:
        runs = self.obs.runs.get(backfill.id, RunSummary({}))
        if runs.unfinished and applied == DesiredState.CANCELLED:
            return self._cancel_finishing(spec, backfill, runs)
        if runs.unfinished:
            return self._completed_early(spec, backfill, runs)
        if not runs.total and not runs.reruns and self._expected_runs(spec):
            return self._empty(spec, backfill)
        phase = terminal_phase(backfill, runs, applied)
        reason = _outcome_reason(phase, runs)
        return _item(spec, Kind.NOOP, phase, reason, backfill.id, runs=runs)

    def _expected_runs(self, spec: BackfillSpec) -> bool:
        binding = self.world.bindings.get(spec.name)
        return binding is not None and binding.created is not None and bool(binding.created.runs_to_create)

    def _empty(self, spec: BackfillSpec, backfill: Backfill) -> Item:
        """Its dry run listed runs, yet it completed with none: Airflow failed half-way through the create."""
        message = (
            f"backfill #{backfill.id} completed without any DAG run although its dry run listed runs: Airflow "
            "failed half-way through creating it (a known fault on SQLite, apache/airflow#66726); cancel it, "
            "move Airflow's metadata database to PostgreSQL, and add a new spec for the range"
        )
        self.findings.append(Finding(FindingKind.ORPHAN_SUSPECTED, self.dag_id, message, spec.name, backfill.id))
        return _item(spec, Kind.BLOCKED, Phase.BLOCKED, message, backfill.id, error=True, runs=RunSummary({}))

    def _cancel_finishing(self, spec: BackfillSpec, backfill: Backfill, runs: RunSummary) -> Item:
        """Cancelled: queued runs failed at once, running ones finish; the outcome waits for them."""
        self._note_still_running(spec, backfill, runs)
        reason = f"cancelled; {runs.count('running')} running run(s) will finish"
        return _item(spec, Kind.NOOP, Phase.RUNNING, reason, backfill.id, runs=runs)

    def _note_still_running(self, spec: BackfillSpec, backfill: Backfill, runs: RunSummary) -> None:
        message = f"cancel fails only queued runs; {runs.count('running')} running run(s) will finish"
        self.findings.append(Finding(FindingKind.STILL_RUNNING, self.dag_id, message, spec.name, backfill.id))

    def _completed_early(self, spec: BackfillSpec, backfill: Backfill, runs: RunSummary) -> Item:
        """Airflow set completed_at while runs are still queued or running: never an outcome yet."""
        waiting = self._note_completed_early(spec, backfill, runs)
        return _item(
            spec,
            Kind.NOOP,
            Phase.RUNNING,
            f"backfill #{backfill.id} marked complete early; {waiting} run(s) remain",
            backfill.id,
            runs=runs,
        )

    def _note_completed_early(self, spec: BackfillSpec, backfill: Backfill, runs: RunSummary) -> str:
        waiting = f"{runs.count('queued')} queued and {runs.count('running')} running"
        self.findings.append(
            Finding(
                FindingKind.COMPLETED_EARLY,
                self.dag_id,
                f"Airflow marked backfill #{backfill.id} complete while {waiting} run(s) remain: it no longer holds "
                "the DAG's backfill slot and cannot be paused or cancelled through the backfill API; the runs go on. "
                "To stop them, pause the DAG or mark the runs failed in Airflow; backfillctl keeps counting them",
                spec.name,
                backfill.id,
            )
        )
        return waiting

    def _steer(self, spec: BackfillSpec, backfill: Backfill, applied: str, guarded: str = "") -> Item:
        runs = self.obs.runs.get(backfill.id, RunSummary({}))
        base: dict[str, Any] = {"backfill_id": backfill.id, "runs": runs}
        if spec.state is DesiredState.CANCELLED:
            if runs.count("running"):
                self._note_still_running(spec, backfill, runs)
            return _item(spec, Kind.CANCEL, Phase.CANCELLED, "spec says cancelled", **base)
        if spec.state is DesiredState.PAUSED:
            kind = Kind.NOOP if backfill.is_paused else Kind.PAUSE
            return _item(spec, kind, Phase.PAUSED, "spec says paused", **base)
        guarded_item = self._guarded(spec, backfill, applied, guarded, base)
        if guarded_item is not None:
            return guarded_item
        if not backfill.is_paused:
            settling = runs.total and not runs.unfinished
            reason = "all runs finished; Airflow marks the backfill complete within 30 s" if settling else "in sync"
            return _item(spec, Kind.NOOP, Phase.RUNNING, reason, **base)
        if applied == DesiredState.PAUSED.value:
            return _item(spec, Kind.UNPAUSE, Phase.RUNNING, "spec says active again", **base)
        return self._drift(spec, backfill, base)

    def _guarded(
        self, spec: BackfillSpec, backfill: Backfill, applied: str, guarded: str, base: dict[str, Any]
    ) -> Item | None:
        """A guard pauses a running backfill and resumes the one it paused; None: guards change nothing."""
        stop, unknown = guard_now(spec, self.policy, self.world)
        if unknown is not None and (guarded or not backfill.is_paused):  # neither pause nor resume on a guess
            phase = Phase.PAUSED if backfill.is_paused else Phase.RUNNING
            return _item(spec, Kind.NOOP, phase, f"{UNOBSERVED}: {unknown}", guard=guarded or None, **base)
        if stop is not None and not backfill.is_paused:
            return _item(spec, Kind.PAUSE, Phase.PAUSED, stop.paused, guard=stop.rule, **base)
        if stop is not None and (guarded or applied == DesiredState.PAUSED.value):
            return _item(spec, Kind.NOOP, Phase.PAUSED, stop.paused, guard=stop.rule, **base)
        if stop is None and guarded and backfill.is_paused:
            return _item(spec, Kind.UNPAUSE, Phase.RUNNING, resumed_text(guarded), guard=guarded, **base)
        if stop is not None and backfill.is_paused:  # a hand pause stays drift, but is not healed into a guard
            return self._drift(spec, backfill, base, held=stop)
        return None

    def _drift(self, spec: BackfillSpec, backfill: Backfill, base: dict[str, Any], held: Stop | None = None) -> Item:
        healing = self.policy.drift is DriftMode.HEAL and held is None
        message = f"backfill #{backfill.id} was paused outside backfillctl" + ("; healing: unpause" if healing else "")
        self.findings.append(Finding(FindingKind.DRIFT, self.dag_id, message, spec.name, backfill.id))
        if healing:
            return _item(spec, Kind.UNPAUSE, Phase.RUNNING, "drift: paused by hand; policy heals", **base)
        if held is not None:
            reason = f"drift: paused by hand; not unpaused while the {held.rule} holds it {held.detail}"
            return _item(spec, Kind.NOOP, Phase.PAUSED, reason, **base)
        return _item(spec, Kind.NOOP, Phase.PAUSED, "drift: paused by hand (policy drift: report)", **base)

    def _adopt(self, spec: BackfillSpec, backfill: Backfill) -> Item:
        runs = self.obs.runs.get(backfill.id, RunSummary({}))
        if not backfill.active and runs.unfinished:
            self._note_completed_early(spec, backfill, runs)
        if backfill.active or runs.unfinished:
            phase = Phase.PAUSED if backfill.active and backfill.is_paused else Phase.RUNNING
        else:
            phase = terminal_phase(backfill, runs, "")
        why = "intent without outcome" if spec.name in self.world.intents else "matches the spec, not bound"
        owned = self.obs.owned.get(backfill.id)
        outcome = f"; {_outcome_reason(phase, runs)}" if phase.terminal else ""  # the change record keeps it
        return _item(
            spec,
            Kind.ADOPT,
            phase,
            f"adopt backfill #{backfill.id} ({why}){outcome}",
            backfill.id,
            runs=runs,
            dates=None if owned is None else owned.dates,
            whole=None if owned is None else owned.whole,
        )

    def _adopt_chunks(self, spec: BackfillSpec, found: Sequence[Backfill]) -> Item:
        """A chunked spec's chunks found in Airflow (its store was lost): its progress rebuilt from them, in
        order, each finished one with its final runs; the next pass goes on from there (halt, next chunk)."""
        chunks = []
        for backfill in found:
            runs = self.obs.runs.get(backfill.id, RunSummary({}))
            owned = self.obs.owned.get(backfill.id)
            done = not backfill.active and not runs.unfinished
            count = runs.total if owned is None else sum(r.count for r in owned.dates)
            dates = None if owned is None else owned.dates
            chunks.append(
                Chunk(backfill.id, backfill.from_date, backfill.to_date, count, backfill.max_active_runs, None, dates)
            )
            if done:
                chunks[-1] = replace(chunks[-1], summary=runs)
        progress = Progress(None, tuple(chunks), promoted=len(chunks) > 1)
        last = found[-1]
        phase = Phase.PAUSED if last.active and last.is_paused else Phase.RUNNING
        ids = ", ".join(f"#{b.id}" for b in found)
        observed = {last.id: self.obs.runs[last.id]} if last.id in self.obs.runs else {}
        return _item(
            spec,
            Kind.ADOPT,
            phase,
            f"adopt chunk backfill(s) {ids} (the spec's chunks, not bound)",
            last.id,
            runs=all_runs(progress, observed),
            progress=progress,
            chunk=(len(chunks), 0),
        )

    def _unbound(self, spec: BackfillSpec) -> Item:
        if spec.state is DesiredState.CANCELLED:
            return _item(spec, Kind.NOOP, Phase.CANCELLED, "cancelled before it was created")
        if spec.state is DesiredState.PAUSED:  # creating it would let runs start before a pause could land
            return _item(spec, Kind.NOOP, Phase.PAUSED, "paused before it was created; set state: active to create it")
        future = None if self.world.now is None else future_partitions(spec, self.obs.info, self.policy, self.world.now)
        if future is not None:  # refused at once, even behind others in the queue (as validate refuses it)
            return _item(spec, Kind.BLOCKED, Phase.BLOCKED, f"{future}; {FUTURE_HINT}", error=True)
        if self.occupant is not None:
            who, backfill_id = self.occupant
            where = f" (backfill #{backfill_id})" if backfill_id else ""
            return _item(spec, Kind.WAIT, Phase.QUEUED, f"queued behind {who}{where}", behind=self._ours(who))
        if self.waiting_on is not None:
            return _item(spec, Kind.WAIT, Phase.QUEUED, f"queued behind {self.waiting_on}", behind=self.waiting_on)
        return self._head(spec)

    def _ours(self, who: str) -> str | None:
        """`who` when it is a spec of this queue (not an unmanaged backfill, nor a deleted spec's)."""
        return who if any(s.name == who for s in self.queue) else None

    def _head(self, spec: BackfillSpec) -> Item:
        info, dry = self.obs.info, self.world.dry_runs.get(spec.name)
        blocked = _dag_problem(info, self.dag_id, self.obs.similar)
        if blocked is not None:
            return _item(spec, Kind.BLOCKED, Phase.BLOCKED, blocked[0], error=blocked[1])
        if dry is None:
            self.dry_runs_needed.append(spec.name)
            return _item(spec, Kind.WAIT, Phase.PENDING, AWAITING_DRY_RUN)
        if dry.error is not None:
            return _item(spec, Kind.BLOCKED, Phase.BLOCKED, f"Airflow refuses it: {dry.error}", error=True)
        return self._create_or_refuse(spec, dry)

    def _create_or_refuse(self, spec: BackfillSpec, dry: DryRun) -> Item:
        count = len(dry.dates)
        dates: dict[str, Any] = {
            "runs_to_create": count,
            "runs_in_range": dry.in_range,
            "first_date": min(dry.dates, default=None),
            "last_date": max(dry.dates, default=None),
            "dates": compact(dry.dates),
        }
        if dry.partitions is not None:
            dates["partitions"] = dry.partitions
        if count == 0:
            return _item(spec, Kind.NOOP, Phase.SUCCEEDED, "nothing to reprocess", **dates)
        limit = _limit(spec, self.policy, count)
        if limit is not None:
            return _item(spec, Kind.REFUSE, Phase.BLOCKED, limit, **dates)
        stop, unknown = guard_now(spec, self.policy, self.world)
        if unknown is not None:
            return _item(spec, Kind.BLOCKED, Phase.BLOCKED, f"{UNOBSERVED}: {unknown}", error=True, **dates)
        if stop is not None:  # nothing new starts outside a window, in a freeze or with a sick scheduler
            return _item(spec, Kind.WAIT, Phase.QUEUED, stop.queued, guard=stop.rule, **dates)
        self.occupant = (spec.name, 0)
        plan = chunking(spec, self.policy, count)
        if plan is not None:
            return self._first_chunk(spec, dry, plan, dates)
        return _item(spec, Kind.CREATE, Phase.PENDING, "", request=BackfillRequest.from_spec(spec), **dates)

    def _first_chunk(self, spec: BackfillSpec, dry: DryRun, plan: Chunking, dates: dict[str, Any]) -> Item:
        """A chunked spec's first backfill: the canary, or the first `chunk_runs` runs in its direction (a
        partitioned DAG's: partitions, by partition date)."""
        chunk = slice_of(take(sorted(dry.dates), plan.first(), backwards=spec.run_backwards), spec.max_active_runs)
        total = len(dry.dates)
        return _chunk_create(spec, chunk, Progress(total), chunk=(1, plan.count(total)), chunking=plan, **dates)

    def _unmanaged(self) -> None:
        for backfill in self.obs.backfills:
            if backfill.active and backfill.id not in self.taken:
                self.findings.append(
                    Finding(
                        FindingKind.UNMANAGED,
                        self.dag_id,
                        f"unmanaged active backfill #{backfill.id} "
                        "blocks this DAG's queue; backfillctl never touches it",
                        None,
                        backfill.id,
                    )
                )

    def _dag_paused(self, items: list[Item]) -> None:
        if self.obs.info is not None and self.obs.info.is_paused and any(not i.phase.terminal for i in items):
            self.findings.append(
                Finding(
                    FindingKind.DAG_PAUSED,
                    self.dag_id,
                    f"DAG {self.dag_id} is paused: its backfill runs stay queued until it is unpaused",
                )
            )


# --- guards ---------------------------------------------------------------------------------------------


def guard_now(spec: BackfillSpec, policy: Policy, world: World) -> tuple[Stop | None, str | None]:
    """The guard holding the spec back now, and why that cannot be known (scheduler health unread)."""
    if world.now is None:
        return None, None
    windows = policy.windows if spec.windows is None else spec.windows
    problem, unknown = None, None
    if policy.scheduler_guard.pause_when_unhealthy:
        health = world.scheduler
        if health is None or health.error is not None:
            unknown = f"scheduler health: {health.error if health else 'not observed'}"
        else:
            problem = scheduler_problem(health, policy.scheduler_guard, world.now)
    stop = guard_stop(windows, policy.freezes, world.now, problem)
    if stop is not None and stop.rule.startswith("freeze"):
        return stop, None  # a freeze holds, whatever the scheduler says
    return (None, unknown) if unknown is not None else (stop, None)


def _scheduler_findings(policy: Policy, world: World) -> list[Finding]:
    health = world.scheduler
    if world.now is None or not policy.scheduler_guard.pause_when_unhealthy:
        return []
    if health is None or health.error is not None:
        cause = health.error if health and health.error else "not observed"
        message = f"scheduler health was not observed: {cause}; nothing is created, paused or resumed by the guards"
        return [Finding(FindingKind.INCOMPLETE, "", message, cause=cause)]
    return []


def _holds_budget(item: Item) -> bool:
    """An active managed backfill holds its share, paused or not (a guard's pause ends by itself)."""
    if item.backfill_id is None or item.source is None:
        return False
    return item.kind is Kind.CANCEL or item.phase in (Phase.RUNNING, Phase.PAUSED)


def _load(item: Item, world: World) -> Item:
    """The item with its load: the concurrent task ceiling and, for a spec still to be created, its in-flight runs."""
    spec, obs = item.source, world.observations.get(item.dag_id)
    if spec is None or item.phase.terminal:
        return item
    tasks = obs.info.max_active_tasks if obs is not None and obs.info is not None else None
    dry = world.dry_runs.get(item.spec) if item.backfill_id is None else None
    return replace(
        item,
        task_ceiling=None if tasks is None else spec.max_active_runs * tasks,
        in_flight=dry.in_flight if dry is not None and dry.error is None else (),
        in_flight_more=dry.in_flight_more if dry is not None and dry.error is None else 0,
    )


def run_label(run: DagRun) -> str:
    """A run as the in-flight line names it: its logical date, or its partition key."""
    if run.logical_date is not None:
        return run.logical_date.date().isoformat()
    return run.partition_key or run.run_id


def in_flight_text(item: Item) -> str | None:
    """`in flight: 2025-01-03 (running), … — these dates will be skipped` for a spec still to be created."""
    if item.in_flight is None:
        return "in flight: not known (the query for queued and running runs failed)"
    if not item.in_flight:
        return None
    runs = ", ".join(f"{d} ({s})" for d, s in item.in_flight)
    more = f" and {item.in_flight_more} more" if item.in_flight_more else ""
    return f"in flight: {runs}{more} — these dates will be skipped"


def budget_loads(specs: Sequence[BackfillSpec], items: Sequence[Item], policy: Policy) -> tuple[BudgetLoad, ...]:
    """Per budgeted system, the unfinished specs that list it and their max_active_runs."""
    live = {i.spec: i for i in items if not i.phase.terminal or i.kind is Kind.CANCEL}  # a cancel still holds runs
    return tuple(
        BudgetLoad(
            b.name,
            b.max_active_runs,
            tuple(
                (s.name, running_concurrency(live[s.name], s))
                for s in specs
                if s.name in live and b.name in s.downstream
            ),
        )
        for b in policy.downstream
    )


def running_concurrency(item: Item, spec: BackfillSpec) -> int:
    """The max_active_runs its running backfill was created with: a chunked spec's new value applies from
    its next chunk, so its running chunk keeps (and holds a budget with) the one it had."""
    chunks = item.progress.chunks if item.progress is not None else ()
    if chunks and chunks[-1].backfill_id == item.backfill_id and chunks[-1].summary is None:
        return chunks[-1].max_active_runs
    return spec.max_active_runs


def _would_create(item: Item) -> bool:
    """A create, or a head that becomes one after its dry run (so a pass's re-observation agrees)."""
    return item.kind is Kind.CREATE or (item.kind is Kind.WAIT and item.reason == AWAITING_DRY_RUN)


def _admit(items: list[Item], specs: Sequence[BackfillSpec], policy: Policy) -> list[Item]:
    """Creates that do not fit a downstream budget wait, in queue order (the specs' order)."""
    budgets = policy.budgets
    if not budgets:
        return items
    by_name = {i.spec: i for i in items}
    by_spec = {s.name: s for s in specs}
    claim = {s.name: Claim(s.name, s.downstream, s.max_active_runs) for s in specs}
    holding = [
        replace(claim[i.spec], max_active_runs=running_concurrency(i, by_spec[i.spec]))
        for i in items
        if i.spec in claim and _holds_budget(i)
    ]
    asking = [claim[s.name] for s in specs if s.name in by_name and _would_create(by_name[s.name])]
    result = admit(budgets, holding, asking)
    waiting = {name: a for name, a in result.items() if not a.admitted}
    return [
        replace(
            i,
            kind=Kind.WAIT,
            phase=Phase.QUEUED,
            reason=waiting[i.spec].reason,
            request=None,
            guard=f"budget {waiting[i.spec].budget}",
            progress=_waiting(i.progress),
        )
        if i.spec in waiting
        else i
        for i in items
    ]


def _chunk_create(spec: BackfillSpec, piece: Slice, progress: Progress, **facts: Any) -> Item:
    """The create of the spec's next chunk; it stays pending in the progress until Airflow answers."""
    why = f"chunk {len(progress.chunks) + 1}: {piece.runs:,} run(s)"
    pending = replace(progress, pending=piece)
    facts["dates"] = piece.dates  # the chunk's own dates, not the whole spec's
    return _item(spec, Kind.CREATE, Phase.PENDING, why, request=request_for(spec, piece), progress=pending, **facts)


def _last_id(progress: Progress) -> int | None:
    return progress.chunks[-1].backfill_id if progress.chunks else None


def _created_nothing(progress: Progress, backfill_id: int) -> bool:
    """The chunk's dry run listed runs, yet its backfill finished without any (apache/airflow#66726)."""
    chunk = next((c for c in progress.chunks if c.backfill_id == backfill_id), None)
    return chunk is not None and chunk.runs > 0 and chunk.summary is not None and chunk.summary.total == 0


def _waiting(progress: Progress | None) -> Progress | None:
    """A chunked spec's progress while its next chunk waits: nothing asked for; a spec with no chunk yet
    stays new (its first chunk is planned from a fresh dry run when it fits)."""
    if progress is None or not progress.chunks:
        return None
    return replace(progress, pending=None)


def _dag_problem(info: DagInfo | None, dag_id: str, similar: Sequence[str] = ()) -> tuple[str, bool] | None:
    if info is None:
        guess = f"; did you mean {' or '.join(similar)}?" if similar else ""
        return f"DAG {dag_id} does not exist in Airflow{guess}", True
    if info.is_stale or info.has_import_errors:
        return f"DAG {dag_id} is {'stale' if info.is_stale else 'failing to import'}: its runs cannot start", True
    refusal = unbackfillable(info)
    if refusal is not None:
        return refusal, True
    if info.is_paused:
        return f"DAG {dag_id} is paused: a backfill's runs would wait forever; unpause the DAG first", False
    return None


def _limit(spec: BackfillSpec, policy: Policy, count: int) -> str | None:
    if spec.expected_runs is not None and count > spec.expected_runs:
        return f"the dry run counts {count} runs; expected_runs is {spec.expected_runs}"
    rule = policy.rule_for(spec.dag_id)
    if rule is not None and rule.max_runs is not None and count > rule.max_runs:
        return f"the dry run counts {count} runs; the policy allows at most {rule.max_runs} for {', '.join(rule.dags)}"
    return None


def terminal_phase(backfill: Backfill, runs: RunSummary, applied: str) -> Phase:
    """Cancelled, else CompletedWithFailures when a run of its own failed or its outcome is not known for some
    dates (re-run by others before it was recorded: never reported as success), else Succeeded."""
    if applied == DesiredState.CANCELLED.value or (backfill.is_paused and runs.never_started):
        return Phase.CANCELLED
    return Phase.COMPLETED_WITH_FAILURES if runs.count("failed") or runs.unknown else Phase.SUCCEEDED


def _outcome_reason(phase: Phase, runs: RunSummary) -> str:
    return _own_outcome(phase, runs) + unknown_text(runs)


def unknown_text(runs: RunSummary) -> str:
    """`; outcome unknown for 3 date(s) re-run before backfillctl recorded them: 2025-01-01 re-run by …`."""
    lost = [r for r in runs.reruns if r.own is None]
    if not lost:
        return ""
    more = f" and {len(lost) - 1} more" if len(lost) > 1 else ""
    return f"; outcome unknown for {len(lost)} date(s) re-run before backfillctl recorded them: {lost[0].text()}{more}"


def _own_outcome(phase: Phase, runs: RunSummary) -> str:
    if phase is Phase.COMPLETED_WITH_FAILURES and not runs.count("failed"):
        return f"{runs.count('success')} run(s) succeeded"
    if phase is Phase.COMPLETED_WITH_FAILURES and runs.failed_partitions:
        return failed_partitions_text(runs.failed_partitions)
    if phase is Phase.COMPLETED_WITH_FAILURES:
        listed = ", ".join(d.date().isoformat() for d in runs.failed_dates)
        more = runs.failed_unlisted
        if more and not listed:
            return f"failed: {more} run(s)"
        return "failed: " + listed + (f" and {more} more" if more else "")
    if phase is Phase.CANCELLED:
        return f"cancelled; {runs.never_started} queued run(s) never started"
    return f"{runs.count('success')} run(s) succeeded"


def _orphans(spec_names: set[str], world: World) -> tuple[list[Item], list[Finding], list[Item]]:
    """Deleted specs: an orphaned backfill (a finding), or a finished one whose outcome is to be recorded."""
    items, findings, settled = [], [], []
    for name, binding in sorted(world.bindings.items()):
        if name in spec_names or binding.phase.terminal:
            continue
        obs = world.observations.get(binding.dag_id)
        backfill = next((b for b in (obs.backfills if obs else ()) if b.id == binding.backfill_id), None)
        outcome = None if obs is None or backfill is None else _settled(name, binding, backfill, obs)
        if outcome is not None:
            settled.append(outcome)
            continue
        if backfill is not None and backfill.active:
            message = f"spec {name} was deleted; backfill #{backfill.id} keeps running (a deleted spec cancels nothing)"
        elif binding.progress is not None and binding.progress.uncreated != 0:
            left = binding.progress.uncreated
            message = (
                f"spec {name} was deleted after {len(binding.progress.chunks)} chunk(s); "
                f"{'its other' if left is None else f'{left:,}'} run(s) will not be created (restore the spec to go on)"
            )
        else:
            continue
        findings.append(Finding(FindingKind.ORPHANED, binding.dag_id, message, name, binding.backfill_id))
        items.append(Item(name, binding.dag_id, Kind.NOOP, Phase.ORPHANED, message, binding.backfill_id))
    return items, findings, settled


def _settled(name: str, binding: Binding, backfill: Backfill, obs: DagObservation) -> Item | None:
    """A deleted spec's finished backfill: its outcome now, before a later backfill can re-run its dates."""
    runs = obs.runs.get(backfill.id)
    if binding.progress is not None or backfill.active or runs is None or runs.unfinished:
        return None
    phase = terminal_phase(backfill, runs, binding.applied_state)
    return Item(name, binding.dag_id, Kind.NOOP, phase, _outcome_reason(phase, runs), backfill.id, runs=runs)


def stuck(plan: Plan) -> dict[str, Item]:
    """Specs queued behind one that cannot move without a human (blocked, refused, paused, halted, …): spec → that
    one, found through a chain of queued specs. They are as stuck as it is."""
    by_name = {i.spec: i for i in plan.items}
    heads = {item.spec: _queue_head(item, by_name) for item in plan.items}
    return {spec: head for spec, head in heads.items() if head.spec != spec and not head.moving}


def _queue_head(item: Item, by_name: Mapping[str, Item]) -> Item:
    """The spec at the front of the chain `item` is queued behind (itself when it waits on nothing of ours)."""
    head, seen = item, {item.spec}
    while head.phase is Phase.QUEUED and head.behind is not None and head.behind in by_name:
        if head.behind in seen:  # never loop, whatever the items say
            return head
        seen.add(head.behind)
        head = by_name[head.behind]
    return head


def refusals(plan: Plan, only: Collection[str] | None = None) -> tuple[Item, ...]:
    """The creates reconcile refuses (exit 5), or will refuse once a queued spec reaches its queue's head: of every
    spec, or only of the specs named in `only`."""
    return tuple(
        i
        for i in plan.items
        if (i.kind is Kind.REFUSE or i.refused_at_head is not None) and (only is None or i.spec in only)
    )


def run_limit(spec: BackfillSpec, policy: Policy, count: int) -> str | None:
    """Why a create of `count` runs is refused (more than expected_runs or the rule's max_runs), or None."""
    return _limit(spec, policy, count)


def iter_changes(plan: Plan) -> Iterator[Item]:
    """Changes in plan order (creates after everything else on the same DAG is settled)."""
    yield from (i for i in plan.items if i.kind.change and i.kind is not Kind.CREATE)
    yield from (i for i in plan.items if i.kind is Kind.CREATE)
