"""The plan as a value: one Item per spec, the Findings, and the Plan with its checksum (pure).

A Plan is immutable and sorted; what the JSON of `plan --format json` holds is `Plan.as_json` (format_version 1).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeAlias

from controller.core.model.airflow import BackfillRequest, RunSummary
from controller.core.model.binding import Phase
from controller.core.model.chunks import Progress
from controller.core.model.drain import DrainHold
from controller.core.model.guards import Guard
from controller.core.model.load import DagLoad, load_json
from controller.core.model.notify_policy import Alert
from controller.core.model.ranges import DateRange
from controller.core.model.spec import BackfillSpec, canonical_json, format_utc
from controller.core.model.stages import Stage
from controller.core.rules.chunks import Chunking
from controller.core.rules.code_history import CodeInRange
from controller.core.rules.guards import BudgetLoad
from controller.core.rules.selection import Selection

PLAN_FORMAT_VERSION = 1
AWAITING_DRY_RUN = "awaiting dry run"  # the reason of a queue head that waits for its run count (`awaiting_dry_run`)
UNOBSERVED = "observation incomplete"  # how the reason of an item decided without an observation begins
LIFTED = "the stop that paused it was lifted; resuming"  # the reason of the unpause an owner's lift brings


class FindingKind(StrEnum):
    DRIFT = "drift"  # a managed backfill paused by hand
    ORPHANED = "orphaned"  # a deleted spec's backfill runs on
    UNMANAGED = "unmanaged"  # a backfill backfillctl does not own blocks a DAG's queue
    DAG_PAUSED = "dag-paused"
    INCOMPLETE = "observation-incomplete"
    STILL_RUNNING = "still-running"  # cancelled: running runs finish
    COMPLETED_EARLY = "completed-early"  # Airflow set completed_at while runs are queued or running
    ORPHAN_SUSPECTED = "orphan-suspected"  # a backfill of ours completed with none of the runs its dry run listed
    ASSET_CONSUMERS = "asset-consumers"  # a create's runs trigger DAGs its downstream does not name (policy rule)
    INVALID_SPEC = Alert.INVALID_SPEC.value  # a spec file with errors: Blocked alone, every other spec planned
    INVALID_POLICY = Alert.INVALID_POLICY.value  # the policy has errors: creates and resumes held, no reduction
    EDITED_IN_PLACE = Alert.EDITED_IN_PLACE.value  # an applied spec's create-time fields changed in its file
    APPROVAL_GATE = "approval-gate"  # a start of a spec with backfills refused or held by the gate (provenance)
    HISTORY_REWRITTEN = "history-rewritten"  # HEAD does not descend from the last reconciled commit: reductions only
    UNREVIEWED_CHANGE = "unreviewed-change"  # a file pushed without a pull request, applied (none was required)
    CODE_CHANGED = "code-changed"  # a `select` spec's DAG moved past its reviewed target: its backfill paused


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
        return self in MUTATING

    @property
    def change(self) -> bool:
        return self in CHANGES


MUTATING = frozenset({Kind.CREATE, Kind.PAUSE, Kind.UNPAUSE, Kind.CANCEL})  # a set: a pass asks per item
CHANGES = MUTATING | {Kind.ADOPT}


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
    guard: Guard | None = None  # the guard behind this item (a window, a freeze, a budget, a stop, …)
    task_ceiling: int | None = None  # max_active_runs × the DAG's max_active_tasks (None: not known)
    in_flight: tuple[tuple[str, str], ...] | None = ()  # queued or running runs in range that Airflow skips
    in_flight_more: int = 0  # in flight beyond those listed
    code_in_range: CodeInRange | None = None  # a create: which code made the runs it re-runs (`plan` shows it)
    selection: Selection | None = None  # a `select` spec: the intervals it re-runs (`plan` shows it)
    chunk: tuple[int, int] | None = None  # a chunked spec: (k, n), its k-th chunk of about n
    chunking: Chunking | None = None  # a chunked spec's chunk sizes (the plan line says them)
    progress: Progress | None = field(default=None, repr=False, compare=False)  # a chunked spec's progress to keep
    promoting: bool = False  # this create is the first chunk after the canary: `promote: true` was merged
    behind: str | None = None  # queued behind this spec of ours: it moves when that one does
    code: str | None = None  # a create: the Airflow release and the DAG code its runs will use
    dates: tuple[DateRange, ...] | None = field(default=None, repr=False)  # the dates a create (re)runs, or
    # an adopted backfill's own dates recovered from its runs
    whole: bool | None = None  # an adopted backfill's own dates are every backfill run of its range
    awaiting_dry_run: bool = False  # a create once Airflow's dry run has counted its runs (a queue head, a chunk)
    unobserved: bool = False  # decided without an observation (its DAG, the scheduler): never recorded as seen
    refused_at_head: str | None = None  # a queued spec's dry run exceeds its limit (lookahead.py)
    load: DagLoad | None = None  # `plan` only, a create: what its runs set off beyond themselves (never checksummed)
    drain: DrainHold | None = None  # `plan` only, a `drain_dag` create: what it holds back (never checksummed)
    stage: Stage | None = None  # a verification this item waits on, or whose failure it is (`core.plan.stages`)
    stage_failed: bool = False  # a rehearsal or verification failed: settled, and unsuccessful for --fail-on-failures
    approval_refused: bool = False  # refused by the approval gate at reconcile (`core.plan.provenance`)
    edited: str | None = None  # its file was edited in place: what changed (`core.plan.edits`)
    held: Item | None = field(default=None, repr=False, compare=False)  # shown Blocked (an edit, a held start):
    # the item as planned before (its phase is the backfill's; the pass records its outcome from it)

    @property
    def true_phase(self) -> Phase:
        """The phase its backfill is in, whatever holds it (a held change's is the phase shown)."""
        return self.phase if self.held is None or self.held.kind.mutating else self.held.true_phase

    @property
    def held_by_guard(self) -> bool:
        """Paused by a guard: it moves on by itself when the guard lifts (never settled)."""
        return self.guard is not None and self.phase is Phase.PAUSED

    @property
    def moving(self) -> bool:
        """It goes on without a human (for now): pending, queued, running, or paused by a guard."""
        waiting = self.phase in (Phase.AWAITING_REHEARSAL, Phase.AWAITING_PROMOTION) and self.stage is not None
        return (
            self.phase in (Phase.PENDING, Phase.QUEUED, Phase.RUNNING)
            or self.held_by_guard
            or (waiting and not self.stage_failed)
        )

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
        code = (("code_in_range", self.code_in_range), ("selection", self.selection))
        facts |= {key: value.as_json() for key, value in code if value is not None}
        if self.chunk is not None:
            facts["chunk"] = {"index": self.chunk[0], "count": self.chunk[1]}
        if self.chunking is not None:
            facts["chunking"] = {"chunk_runs": self.chunking.size, "canary_runs": self.chunking.canary}
        if self.progress is not None:
            facts["backfills"] = list(self.progress.ids)
        if self.code is not None:
            facts["code"] = self.code
        return facts | self._effects()

    def _effects(self) -> dict[str, Any]:
        """What a create sets off beyond its runs (`plan` only): its load, and what its drain holds back."""
        found: dict[str, Any] = {}
        if self.load is not None and self.runs_to_create is not None:
            found["load"] = load_json(self.load, self.runs_to_create)
        if self.drain is not None:
            found["drain"] = self.drain.as_json()
        return found

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
            "guard": None if self.guard is None else str(self.guard),
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

    def sort_key(self) -> tuple[str, str, str, int]:
        """The plan's order of findings."""
        return (self.dag_id, self.kind, self.spec or "", self.backfill_id or 0)

    def as_json(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "dag_id": self.dag_id,
            "spec": self.spec,
            "backfill_id": self.backfill_id,
            "message": self.message,
        }


Step: TypeAlias = tuple[Item, tuple[Finding, ...]]  # one spec's decision and what it found on the way


@dataclass(frozen=True, slots=True)
class AtRest:
    """The finished specs a pass carries as counts, not items (`core.plan.rest`): how many per phase, and their
    names (what is never an orphan, never planned again)."""

    phases: tuple[tuple[Phase, int], ...] = ()  # most first, then by name
    names: frozenset[str] = frozenset()
    walked: frozenset[str] = frozenset()  # of them, those on DAGs the pass walks: their claims are read (`Claim`)

    @property
    def count(self) -> int:
        return len(self.names)


@dataclass(frozen=True, slots=True)
class Plan:
    items: tuple[Item, ...]
    findings: tuple[Finding, ...] = ()
    dry_runs_needed: tuple[str, ...] = ()  # queue heads whose create waits for a dry run (never in an applied plan)
    budgets: tuple[BudgetLoad, ...] = ()  # per budgeted system, the specs that list it (the plan's load lines)
    settled: tuple[Item, ...] = ()  # deleted specs whose backfill finished: their outcome, to record (not shown)
    at_rest: AtRest = field(default_factory=AtRest)  # finished specs owed nothing (`rest`): counted, never items
    unmetered: str | None = None  # the checksum of this plan made without the analysis verdicts and the
    # asset-consumer refusals (`checksum`)

    def checksum(self) -> str:
        """Over the decisions only, not progress, so a reviewed plan stays valid while runs advance; and never
        over what a metric or Airflow's asset consumers decided (such a plan carries the checksum of the one
        without)."""
        if self.unmetered is not None:
            return self.unmetered
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
        "in_sync": plan.count(Kind.NOOP) + plan.at_rest.count,
    }


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


def in_flight_text(item: Item) -> str | None:
    """`in flight: 2025-01-03 (running), … — these dates will be skipped` for a spec still to be created."""
    if item.in_flight is None:
        return "in flight: not known (the query for queued and running runs failed)"
    if not item.in_flight:
        return None
    runs = ", ".join(f"{d} ({s})" for d, s in item.in_flight)
    more = f" and {item.in_flight_more} more" if item.in_flight_more else ""
    return f"in flight: {runs}{more} — these dates will be skipped"


def _iso(value: datetime | None) -> str | None:
    return None if value is None else format_utc(value)


# --- what a plan says -----------------------------------------------------------------------------------


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


def iter_changes(plan: Plan) -> Iterator[Item]:
    """Changes in plan order (creates after everything else on the same DAG is settled)."""
    yield from (i for i in plan.items if i.kind.change and i.kind is not Kind.CREATE)
    yield from (i for i in plan.items if i.kind is Kind.CREATE)
