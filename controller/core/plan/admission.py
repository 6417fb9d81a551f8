"""Whether a create may start, and what it loads (pure): the DAG can take it, its run count is within the limits,
no guard holds it (a freeze, the scheduler, a run window, a downstream system's analysis), and its downstream
budgets have room, in queue order."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from controller.core.model.airflow import DagInfo
from controller.core.model.binding import Phase
from controller.core.model.chunks import Progress
from controller.core.model.guards import Guard, GuardKind
from controller.core.model.policy import Policy
from controller.core.model.spec import BackfillSpec
from controller.core.plan.values import UNOBSERVED, Finding, FindingKind, Item, Kind
from controller.core.plan.world import World
from controller.core.rules.analysis import LoadAction, Verdict
from controller.core.rules.guards import BudgetLoad, Claim, Stop, admit, guard_stop, scheduler_problem
from controller.core.rules.schedules import unbackfillable


def dag_problem(info: DagInfo | None, dag_id: str, similar: Sequence[str] = ()) -> tuple[str, bool] | None:
    """Why the DAG cannot take a backfill now, and whether that is an error (None: it can)."""
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


def run_limit(spec: BackfillSpec, policy: Policy, count: int) -> str | None:
    """Why a create of `count` runs is refused: over the spec's expected_runs or the policy's max_runs."""
    if spec.expected_runs is not None and count > spec.expected_runs:
        return f"the dry run counts {count} runs; expected_runs is {spec.expected_runs}"
    rule = policy.rule_for(spec.dag_id)
    if rule is not None and rule.max_runs is not None and count > rule.max_runs:
        return f"the dry run counts {count} runs; the policy allows at most {rule.max_runs} for {', '.join(rule.dags)}"
    return None


# --- guards ---------------------------------------------------------------------------------------------


def guard_now(spec: BackfillSpec, policy: Policy, world: World) -> tuple[Stop | None, str | None]:
    """The guard holding the spec back now, and why that cannot be known (scheduler health unread)."""
    windows = policy.windows if spec.windows is None else spec.windows
    problem, unknown = None, None
    if policy.scheduler_guard.pause_when_unhealthy:
        health = world.scheduler
        if health is None or health.error is not None:
            unknown = f"scheduler health: {health.error if health else 'not observed'}"
        else:
            problem = scheduler_problem(health, policy.scheduler_guard, world.now)
    stop = guard_stop(windows, policy.freezes, world.now, problem)
    if stop is not None and stop.rule.kind is GuardKind.FREEZE:
        return stop, None  # a freeze holds, whatever the scheduler says
    held = analysis_stop(spec, world)
    if stop is None and held is not None and held.pauses:
        return held, None  # a system over its limit pauses, whatever the scheduler says
    if unknown is not None:
        return None, unknown
    return (stop or held), None  # a pausing guard before an analysis that only holds


# --- analysis -------------------------------------------------------------------------------------------

_STRICTNESS = {
    LoadAction.FAIL_CLOSED: 0,
    LoadAction.PAUSE: 1,
    LoadAction.INCONCLUSIVE: 2,
    LoadAction.HOLD: 3,
    LoadAction.THROTTLE: 4,
    LoadAction.RESUME: 5,
}


def strictest(spec: BackfillSpec, world: World) -> Verdict | None:
    """The strictest verdict of the systems the spec lists (None: none of them was evaluated)."""
    verdicts = [world.analysis[s] for s in spec.downstream if world.analysis and s in world.analysis]
    return min(verdicts, key=lambda v: (_STRICTNESS[v.action], v.system), default=None)


def analysis_stop(spec: BackfillSpec, world: World) -> Stop | None:
    """The analysis that holds the spec back: a pause (PAUSE, FAIL_CLOSED) or a hold (HOLD, INCONCLUSIVE)."""
    verdict = strictest(spec, world)
    if verdict is None or verdict.action.creates:
        return None
    return Stop(Guard(GuardKind.ANALYSIS, verdict.system), verdict.reason, pauses=verdict.action.pauses)


def analysis_runs(spec: BackfillSpec, world: World) -> tuple[int, str | None]:
    """The max_active_runs of a chunked spec's next chunk: lower while a system it lists throttles, and why."""
    throttled = [
        world.analysis[s]
        for s in spec.downstream
        if world.analysis and s in world.analysis and world.analysis[s].action is LoadAction.THROTTLE
    ]
    limits = [int(v.thresholds["throttle_max_active_runs"]) for v in throttled]
    if not limits or min(limits) >= spec.max_active_runs:
        return spec.max_active_runs, None
    return min(limits), min(throttled, key=lambda v: (v.thresholds["throttle_max_active_runs"], v.system)).reason


def scheduler_findings(policy: Policy, world: World) -> list[Finding]:
    """The scheduler guard is on and the scheduler's health was not read: the plan is incomplete."""
    health = world.scheduler
    if not policy.scheduler_guard.pause_when_unhealthy:
        return []
    if health is None or health.error is not None:
        cause = health.error if health and health.error else "not observed"
        message = f"scheduler health was not observed: {cause}; nothing is created, paused or resumed by the guards"
        return [Finding(FindingKind.INCOMPLETE, "", message, cause=cause)]
    return []


# --- budgets --------------------------------------------------------------------------------------------


def admit_creates(items: list[Item], specs: Sequence[BackfillSpec], policy: Policy) -> list[Item]:
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
            guard=Guard(GuardKind.BUDGET, waiting[i.spec].budget),
            progress=_waiting(i.progress),
            awaiting_dry_run=False,
        )
        if i.spec in waiting
        else i
        for i in items
    ]


def _holds_budget(item: Item) -> bool:
    """An active backfill of a spec holds its share, paused or not (a guard's pause ends by itself)."""
    if item.backfill_id is None:
        return False
    return item.kind is Kind.CANCEL or item.phase in (Phase.RUNNING, Phase.PAUSED)


def _would_create(item: Item) -> bool:
    """A create, or a head that becomes one after its dry run (so a pass's re-observation agrees)."""
    return item.kind is Kind.CREATE or item.awaiting_dry_run


def _waiting(progress: Progress | None) -> Progress | None:
    """A chunked spec's progress while its next chunk waits: nothing asked for; a spec with no chunk yet
    stays new (its first chunk is planned from a fresh dry run when it fits)."""
    if progress is None or not progress.chunks:
        return None
    return replace(progress, pending=None)


def running_concurrency(item: Item, spec: BackfillSpec) -> int:
    """The max_active_runs its running backfill was created with: a chunked spec's new value applies from
    its next chunk, so its running chunk keeps (and holds a budget with) the one it had."""
    chunks = item.progress.chunks if item.progress is not None else ()
    if chunks and chunks[-1].backfill_id == item.backfill_id and chunks[-1].summary is None:
        return chunks[-1].max_active_runs
    return spec.max_active_runs


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


def with_load(item: Item, world: World) -> Item:
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
        code_in_range=dry.code if dry is not None and dry.error is None else None,
    )


def held_now(spec: BackfillSpec, policy: Policy, world: World, counted: Item) -> Item | None:
    """A create that does not start now: a guard holds it (queued), or what a guard reads is not known (blocked)."""
    stop, unknown = guard_now(spec, policy, world)
    if unknown is not None:
        why = f"{UNOBSERVED}: {unknown}"
        return replace(counted, kind=Kind.BLOCKED, phase=Phase.BLOCKED, reason=why, error=True, unobserved=True)
    if stop is not None:  # nothing new starts outside a window, in a freeze or with a sick scheduler
        return replace(counted, kind=Kind.WAIT, phase=Phase.QUEUED, reason=stop.queued, guard=stop.rule)
    return None
