"""One bound backfill's lifecycle (pure): adopted, steered to the spec's state (pause, unpause, cancel), paused
and resumed by the guards, drift reported or healed, and its outcome once it finished.

Each step reads the DAG's `Context` and returns the spec's item with what it found on the way (`Step`).
"""

from __future__ import annotations

from dataclasses import dataclass

from controller.core.model.airflow import Backfill, RunSummary
from controller.core.model.binding import Binding, Phase
from controller.core.model.chunks import Progress
from controller.core.model.guards import Guard
from controller.core.model.spec import BackfillSpec, DesiredState, format_utc
from controller.core.model.stops import NOT_RECORDED
from controller.core.plan.admission import guard_now
from controller.core.plan.outcome import outcome_reason, terminal_phase
from controller.core.plan.stops import STOP, resumed_from, stop_of
from controller.core.plan.values import LIFTED, UNOBSERVED, Finding, FindingKind, Item, Kind, Step
from controller.core.plan.world import Context
from controller.core.rules.guards import Stop, resumed_text


@dataclass(frozen=True, slots=True)
class Observed:
    """A spec's backfill as observed now, with its runs: what every item about it carries."""

    spec: BackfillSpec
    backfill: Backfill
    runs: RunSummary

    def item(
        self,
        kind: Kind,
        phase: Phase,
        reason: str,
        *,
        error: bool = False,
        guard: Guard | None = None,
        progress: Progress | None = None,
        unobserved: bool = False,
    ) -> Item:
        spec = self.spec
        return Item(
            spec.name,
            spec.dag_id,
            kind,
            phase,
            reason,
            self.backfill.id,
            error=error,
            runs=self.runs,
            guard=guard,
            progress=progress,
            unobserved=unobserved,
            source=spec,
        )


def bound(ctx: Context, spec: BackfillSpec, binding: Binding) -> Step:
    """A spec bound to a backfill: gone from Airflow (blocked), finished (its outcome), or steered."""
    backfill = ctx.backfill(binding.backfill_id)
    if backfill is None:
        why = f"backfill #{binding.backfill_id} is no longer in Airflow"
        gone = Item(
            spec.name, spec.dag_id, Kind.BLOCKED, Phase.BLOCKED, why, binding.backfill_id, error=True, source=spec
        )
        return gone, ()
    if not backfill.active:
        return finished(ctx, spec, backfill, binding.applied_state)
    return steer(ctx, spec, backfill, binding.applied_state, binding.guard)


def finished(ctx: Context, spec: BackfillSpec, backfill: Backfill, applied: DesiredState) -> Step:
    """Airflow set completed_at: the outcome its runs say, once none of them is queued or running any more."""
    seen = Observed(spec, backfill, ctx.runs(backfill.id))
    runs = seen.runs
    if runs.unfinished and applied is DesiredState.CANCELLED:  # queued runs failed at once, running ones finish
        reason = f"cancelled; {runs.count('running')} running run(s) will finish"
        return seen.item(Kind.NOOP, Phase.RUNNING, reason), (_still_running(ctx, seen),)
    if runs.unfinished:  # never an outcome yet
        reason = f"backfill #{backfill.id} marked complete early; {_waiting(runs)} run(s) remain"
        return seen.item(Kind.NOOP, Phase.RUNNING, reason), (_completed_early(ctx, seen),)
    if not runs.total and not runs.reruns and _listed_runs(ctx, spec):
        return empty(ctx, spec, backfill)
    phase = terminal_phase(backfill, runs, applied)
    return seen.item(Kind.NOOP, phase, outcome_reason(phase, runs)), ()


def _listed_runs(ctx: Context, spec: BackfillSpec) -> bool:
    """The dry run made before its create listed runs."""
    binding = ctx.world.bindings.get(spec.name)
    return binding is not None and binding.created is not None and bool(binding.created.runs_to_create)


def empty(ctx: Context, spec: BackfillSpec, backfill: Backfill) -> Step:
    """Its dry run listed runs, yet it completed with none: Airflow failed half-way through the create."""
    message = (
        f"backfill #{backfill.id} completed without any DAG run although its dry run listed runs: Airflow "
        "failed half-way through creating it (a known fault on SQLite, apache/airflow#66726); cancel it, "
        "move Airflow's metadata database to PostgreSQL, and add a new spec for the range"
    )
    found = Finding(FindingKind.ORPHAN_SUSPECTED, ctx.dag_id, message, spec.name, backfill.id)
    return Observed(spec, backfill, RunSummary({})).item(Kind.BLOCKED, Phase.BLOCKED, message, error=True), (found,)


def _still_running(ctx: Context, seen: Observed) -> Finding:
    message = f"cancel fails only queued runs; {seen.runs.count('running')} running run(s) will finish"
    return Finding(FindingKind.STILL_RUNNING, ctx.dag_id, message, seen.spec.name, seen.backfill.id)


def _waiting(runs: RunSummary) -> str:
    return f"{runs.count('queued')} queued and {runs.count('running')} running"


def _completed_early(ctx: Context, seen: Observed) -> Finding:
    message = (
        f"Airflow marked backfill #{seen.backfill.id} complete while {_waiting(seen.runs)} run(s) remain: it no "
        "longer holds the DAG's backfill slot and cannot be paused or cancelled through the backfill API; the runs go "
        "on. To stop them, pause the DAG or mark the runs failed in Airflow; backfillctl keeps counting them"
    )
    return Finding(FindingKind.COMPLETED_EARLY, ctx.dag_id, message, seen.spec.name, seen.backfill.id)


def steer(  # noqa: PLR0911 - one return per state the spec and its backfill can be in
    ctx: Context, spec: BackfillSpec, backfill: Backfill, applied: DesiredState, guarded: Guard | None
) -> Step:
    """An active backfill to the spec's state: cancel, pause, the guards' pause and resume, unpause, or drift.
    `guarded` is the guard whose pause holds it now (None when no guard paused it)."""
    seen = Observed(spec, backfill, ctx.runs(backfill.id))
    if spec.state is DesiredState.CANCELLED:
        found = (_still_running(ctx, seen),) if seen.runs.count("running") else ()
        return seen.item(Kind.CANCEL, Phase.CANCELLED, "spec says cancelled"), found
    if spec.state is DesiredState.PAUSED:
        kind = Kind.NOOP if backfill.is_paused else Kind.PAUSE
        return seen.item(kind, Phase.PAUSED, "spec says paused"), ()
    stop = stop_of(spec, ctx.world.holds.stops, ctx.world.now)
    if stop is not None:  # an emergency stop: paused at once, and nothing unpauses it while it holds
        return seen.item(Kind.NOOP if backfill.is_paused else Kind.PAUSE, Phase.PAUSED, stop.held, guard=STOP), ()
    held = _guarded(ctx, seen, applied, guarded)
    if held is not None:
        return held
    if not backfill.is_paused:
        settling = seen.runs.total and not seen.runs.unfinished
        reason = "all runs finished; Airflow marks the backfill complete within 30 s" if settling else "in sync"
        return seen.item(Kind.NOOP, Phase.RUNNING, reason), ()
    if applied is DesiredState.PAUSED:
        return seen.item(Kind.UNPAUSE, Phase.RUNNING, "spec says active again"), ()
    return _drift(ctx, seen)


def _guarded(ctx: Context, seen: Observed, applied: DesiredState, guarded: Guard | None) -> Step | None:
    """A guard pauses a running backfill and resumes the one it paused; None: guards change nothing."""
    stop, unknown = guard_now(seen.spec, ctx.policy, ctx.world)
    paused = seen.backfill.is_paused
    if unknown is not None and (guarded is not None or not paused):  # neither pause nor resume on a guess
        phase = Phase.PAUSED if paused else Phase.RUNNING
        why = f"{UNOBSERVED}: {unknown}"
        return seen.item(Kind.NOOP, phase, why, guard=guarded, unobserved=True), ()
    if stop is not None and not paused:  # an analysis that only holds pauses nothing (yet)
        pause = seen.item(Kind.PAUSE, Phase.PAUSED, stop.paused, guard=stop.rule) if stop.pauses else None
        return pause or seen.item(Kind.NOOP, Phase.RUNNING, f"running; {stop.detail}"), ()
    if stop is not None and (guarded is not None or applied is DesiredState.PAUSED):
        return seen.item(Kind.NOOP, Phase.PAUSED, stop.paused, guard=stop.rule), ()
    if (
        stop is None and guarded is not None and paused
    ):  # a stop's pause ends with its lift (said so, never `resumed: stop …`)
        why = LIFTED if guarded == STOP else resumed_text(guarded)
        return seen.item(Kind.UNPAUSE, Phase.RUNNING, why, guard=guarded), ()
    if stop is not None and paused:  # a hand pause stays drift, but is not healed into a guard
        return _drift(ctx, seen, held=stop)
    return None


def _drift(ctx: Context, seen: Observed, held: Stop | None = None) -> Step:
    """Paused outside this pass: what a lifted stop paused, or a stop a reviewed `resume` names, is resumed; a pause
    made in Airflow is a person's stop, reported and never unpaused, whatever `drift` says."""
    holds, backfill_id = ctx.world.holds, seen.backfill.id
    resumed = resumed_from(seen.spec, holds.stops) if held is None else None
    if resumed is not None:
        return seen.item(Kind.UNPAUSE, Phase.RUNNING, f"resumed: {seen.spec.resume} (lifts stop #{resumed.id})"), ()
    if held is None and backfill_id in holds.stop_paused:
        return seen.item(Kind.UNPAUSE, Phase.RUNNING, LIFTED), ()
    hand = holds.hand_pauses.get(backfill_id)
    by = "" if hand is None or hand.who == NOT_RECORDED else f" by {hand.who}"
    when = "" if hand is None or hand.when is None else f" at {format_utc(hand.when)}"
    said = f"paused by hand in Airflow{by}{when}" if by else f"paused in Airflow (who: {NOT_RECORDED}){when}"
    found = (
        Finding(FindingKind.DRIFT, ctx.dag_id, f"backfill #{backfill_id} was {said}", seen.spec.name, backfill_id),
    )
    if held is not None:
        reason = f"{said}; not unpaused while the {held.rule} holds it {held.detail}"
        return seen.item(Kind.NOOP, Phase.PAUSED, reason), found
    lift = "lift: unpause it in Airflow, or a reviewed `resume` naming its stop"
    return seen.item(Kind.NOOP, Phase.PAUSED, f"{said}; a stop: never unpaused by backfillctl ({lift})"), found


def adopt(ctx: Context, spec: BackfillSpec, backfill: Backfill) -> Step:
    """A backfill we may have created for the spec, bound to it now: its phase, or its outcome when it finished,
    from its runs, always (a finished backfill whose runs were not read is not adopted this pass: never an outcome
    from `completed_at` alone)."""
    if not backfill.active and backfill.id not in ctx.obs.runs:
        why = f"{UNOBSERVED}: the runs of finished backfill #{backfill.id}, which it would adopt, were not read"
        item = Item(spec.name, spec.dag_id, Kind.BLOCKED, Phase.BLOCKED, why, error=True, source=spec, unobserved=True)
        return item, (Finding(FindingKind.INCOMPLETE, ctx.dag_id, f"{spec.name}: {why}", spec.name, backfill.id),)
    runs = ctx.runs(backfill.id)
    found = (_completed_early(ctx, Observed(spec, backfill, runs)),) if not backfill.active and runs.unfinished else ()
    if backfill.active or runs.unfinished:
        phase = Phase.PAUSED if backfill.active and backfill.is_paused else Phase.RUNNING
    else:
        phase = terminal_phase(backfill, runs, None)
    why = "intent without outcome" if spec.name in ctx.world.intents else "matches the spec, not bound"
    owned = ctx.obs.owned.get(backfill.id)
    outcome = f"; {outcome_reason(phase, runs)}" if phase.terminal else ""  # the change record keeps it
    adopted = Item(
        spec.name,
        spec.dag_id,
        Kind.ADOPT,
        phase,
        f"adopt backfill #{backfill.id} ({why}){outcome}",
        backfill.id,
        runs=runs,
        dates=None if owned is None else owned.dates,
        whole=None if owned is None else owned.whole,
        source=spec,
    )
    return adopted, found
