"""A chunked spec's state machine (pure): consecutive backfills, each a slice of the runs its dry run lists, in the
spec's direction; the canary and its promotion, the halt on failures and its resume, the pending create whose
answer was lost, and the chunks of a spec whose store was lost.

Each step reads the DAG's `Context` and returns the spec's item with what it found on the way (`Step`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from controller.core.model.airflow import Backfill, RunSummary
from controller.core.model.binding import Binding, Phase
from controller.core.model.chunks import Chunk, Progress, Slice
from controller.core.model.guards import Guard, GuardKind
from controller.core.model.spec import BackfillSpec, DesiredState
from controller.core.model.stages import Stage, StageState
from controller.core.plan.admission import analysis_runs, dag_problem, guard_now
from controller.core.plan.lifecycle import Observed, adopt, bound, empty, steer
from controller.core.plan.matching import adoptable_request
from controller.core.plan.outcome import outcome_reason, terminal_phase
from controller.core.plan.stages import StageRecords, canary_gate
from controller.core.plan.stops import STOP, stop_of
from controller.core.plan.values import AWAITING_DRY_RUN, UNOBSERVED, Finding, FindingKind, Item, Kind, Step
from controller.core.plan.world import Context, DryRun
from controller.core.rules.chunks import (
    Chunking,
    all_runs,
    awaiting_promotion,
    chunk_count,
    halt,
    next_size,
    remaining,
    request_for,
    slice_of,
    take,
)
from controller.core.rules.selection import Selection, code_moved, rederived

HALT = Guard(GuardKind.HALT)  # a halt's pause: never `state: paused`, never drift
CODE_CHANGED = Guard(GuardKind.CODE_CHANGED)  # a `select` spec's pause while its DAG's code is not the target
LOST_SELECTION = (
    "select: the spec's selection is not in the store (it was lost), and it cannot be read again from Airflow now"
)
REDERIVED = "select: its selection read again from Airflow after a lost store"


def _chunk_item(
    spec: BackfillSpec,
    kind: Kind,
    phase: Phase,
    reason: str,
    progress: Progress,
    *,
    backfill_id: int | None = None,
    error: bool = False,
    guard: Guard | None = None,
    behind: str | None = None,
    awaiting_dry_run: bool = False,
    unobserved: bool = False,
) -> Item:
    """The chunked spec's item between or before its backfills, with its progress."""
    return Item(
        spec.name,
        spec.dag_id,
        kind,
        phase,
        reason,
        backfill_id,
        error=error,
        guard=guard,
        progress=progress,
        behind=behind,
        awaiting_dry_run=awaiting_dry_run,
        unobserved=unobserved,
        source=spec,
    )


def chunked(ctx: Context, spec: BackfillSpec, binding: Binding, progress: Progress) -> Step:
    """A chunked spec: its pending chunk, its active chunk, or what comes after a finished one."""
    pending = progress.pending
    if pending is not None:
        adopted = _pending_chunk(ctx, spec, progress, pending)
        if adopted is not None:
            item, found = adopted
            return _with_chunks(ctx, spec, item, progress, item.backfill_id), found
        progress = replace(progress, pending=None)  # not in Airflow: planned again from a new dry run
    item, found = _chunk_step(ctx, spec, binding, progress)
    if pending is not None and item.kind is not Kind.CREATE and item.progress is not None:
        # until a new create replaces it, the unanswered one stays pending: if it lands late, it is adopted
        item = replace(item, progress=replace(item.progress, pending=pending))
    return item, found


def _chunk_step(ctx: Context, spec: BackfillSpec, binding: Binding, progress: Progress) -> Step:
    current = ctx.backfill(binding.backfill_id)
    if current is None and binding.backfill_id is not None:
        return bound(ctx, spec, binding)  # its backfill is gone: blocked, as for any spec
    runs = _chunk_runs(ctx, progress, current.id) if current is not None else RunSummary({})
    if current is not None and (current.active or runs.unfinished):
        item, found = _chunk_running(ctx, binding, progress, Observed(spec, current, runs))
    else:
        if current is not None:
            progress = progress.finished(current.id, runs)
        item, found = _between_chunks(ctx, spec, binding, progress, current)
    return _with_chunks(ctx, spec, item, progress, None if current is None else current.id), found


def _with_chunks(ctx: Context, spec: BackfillSpec, item: Item, progress: Progress, current: int | None) -> Item:
    """The item with the spec's progress, its runs over every chunk, and which chunk of how many it is on."""
    progress = item.progress or progress
    observed = {} if current is None or current not in ctx.obs.runs else {current: ctx.obs.runs[current]}
    count = chunk_count(spec, ctx.policy, progress)
    index = len(progress.chunks) + (1 if item.kind is Kind.CREATE else 0)
    index = max(index, 1)
    return replace(
        item, runs=all_runs(progress, observed), progress=progress, chunk=(index, max(count, index) if count else 0)
    )


def _chunk_runs(ctx: Context, progress: Progress, backfill_id: int) -> RunSummary:
    """A chunk's runs as observed now, or its final runs as the store keeps them (not read again)."""
    if backfill_id in ctx.obs.runs:
        return ctx.obs.runs[backfill_id]
    kept = next((c.summary for c in progress.chunks if c.backfill_id == backfill_id), None)
    return kept or RunSummary({})


def _pending_chunk(ctx: Context, spec: BackfillSpec, progress: Progress, pending: Slice) -> Step | None:
    """The chunk whose create had no answer, found in Airflow (created after the intent): adopted (the walk
    takes its backfill from the item)."""
    intent = ctx.world.intents.get(spec.name)
    backfill = adoptable_request(request_for(spec, pending), ctx.obs.backfills, ctx.taken, intent)
    if backfill is None:
        return None
    item, found = adopt(ctx, spec, backfill)
    why = "intent without outcome" if intent else "created, answer lost"
    reason = f"adopt chunk backfill #{backfill.id} ({why})"
    return replace(item, progress=progress.with_chunk(pending.chunk(backfill.id)), reason=reason), found


def _chunk_running(ctx: Context, binding: Binding, progress: Progress, current: Observed) -> Step:
    """The active chunk: steered like any backfill, and paused (Halted) when too many runs failed."""
    spec, backfill = current.spec, current.backfill
    if spec.state is not DesiredState.ACTIVE or not backfill.active:
        return bound(ctx, spec, binding)
    moved = moved_code(ctx, spec)
    if moved is not None:  # runs never silently use code nobody reviewed for this backfill
        kind = Kind.NOOP if backfill.is_paused else Kind.PAUSE
        changed = Finding(FindingKind.CODE_CHANGED, spec.dag_id, f"spec {spec.name}: {moved}", spec.name, backfill.id)
        return current.item(kind, Phase.PAUSED, moved, guard=CODE_CHANGED, progress=progress), (changed,)
    after = halt(spec, progress, all_runs(progress, {backfill.id: current.runs}))
    if after.halted is not None:
        kind = Kind.NOOP if backfill.is_paused else Kind.PAUSE
        return current.item(kind, Phase.HALTED, after.halted, guard=HALT, progress=after), ()
    if progress.halted is not None:  # a new `resume` value ends the halt; a window or freeze may still hold it
        steered, found = steer(ctx, spec, backfill, binding.applied_state, HALT)
        if steered.kind is Kind.UNPAUSE:
            steered = replace(steered, reason=f"resumed: {spec.resume}")
        return replace(steered, progress=after), found
    item, found = bound(ctx, spec, binding)
    return replace(item, progress=after), found


def _between_chunks(
    ctx: Context, spec: BackfillSpec, binding: Binding, progress: Progress, last: Backfill | None
) -> Step:
    """Its last chunk finished: the outcome, a halt, the canary's wait, or the next chunk."""
    everything = all_runs(progress, {})
    if last is not None and _created_nothing(progress, last.id):
        item, found = empty(ctx, spec, last)
        return replace(item, progress=progress), found
    if binding.applied_state is DesiredState.CANCELLED or spec.state is DesiredState.CANCELLED:
        left = "the rest" if progress.uncreated is None else f"{progress.uncreated:,} run(s)"
        why = f"cancelled after {len(progress.chunks)} chunk(s); {left} not created"
        return _chunk_item(spec, Kind.NOOP, Phase.CANCELLED, why, progress), ()
    after = halt(spec, progress, everything, boundary=True)  # the finished chunk is judged, whatever its size
    if remaining(spec, after) is None:  # otherwise the next chunk's dry run says whether anything is left
        return _chunks_done(spec, last, everything, binding.applied_state, after), ()
    if spec.select is not None and after.sub_ranges is None:  # adopted after a lost store: its selection is not known
        return _rederive(ctx, spec, after), ()
    stop = stop_of(spec, ctx.world.holds.stops, ctx.world.now)
    if stop is not None:  # an emergency stop: no next chunk while it holds
        return _held(spec, after, everything, ctx.world.stages) or _chunk_item(
            spec, Kind.NOOP, Phase.PAUSED, stop.held, after, guard=STOP
        ), ()
    return _held(spec, after, everything, ctx.world.stages) or _next_chunk(ctx, spec, after, everything, last), ()


def _rederive(ctx: Context, spec: BackfillSpec, progress: Progress) -> Item:
    """A `select` spec adopted after a lost store: its sub-ranges re-derived from its chunks and the selection its
    dry run reads now (`rederived`), kept in its progress; the next pass creates the next one."""
    dry = ctx.world.dry_runs.get(spec.name)
    if dry is None:
        return _chunk_item(spec, Kind.WAIT, Phase.PENDING, AWAITING_DRY_RUN, progress, awaiting_dry_run=True)
    if dry.error is not None or dry.selection is None:
        why = f"{LOST_SELECTION}: {dry.error or 'its runs were not read whole (narrow the range)'}"
        return _chunk_item(spec, Kind.BLOCKED, Phase.BLOCKED, why, progress, error=dry.error is not None)
    chunks = [(c.first, c.last) for c in progress.chunks]
    ranges = rederived(dry.selection, chunks, backwards=spec.run_backwards)
    why = f"{REDERIVED}: {len(chunks)} sub-range(s) run, {len(ranges) - len(chunks)} left"
    return _chunk_item(spec, Kind.WAIT, Phase.PENDING, why, replace(progress, sub_ranges=ranges))


def _held(spec: BackfillSpec, progress: Progress, everything: RunSummary, stages: StageRecords) -> Item | None:
    """What holds the next chunk back: a halt, the canary's review, or `state: paused` (None: nothing)."""
    if progress.halted is not None:
        return _chunk_item(spec, Kind.NOOP, Phase.HALTED, progress.halted, progress)
    if awaiting_promotion(spec, progress) and progress.uncreated != 0:  # a canary that ran every run waits not
        done = f"canary chunk finished ({everything.count('success')} succeeded, {everything.count('failed')} failed)"
        state, said = canary_gate(spec, stages)
        if said is None:
            reason = f"{done}; check its output, then merge `promote: true` to continue"
            return _chunk_item(spec, Kind.NOOP, Phase.AWAITING_PROMOTION, reason, progress)
        if state is StageState.FAILED:
            why = f"the canary's verification failed: {said}; fix the cause, then merge `promote: true` to continue"
            return replace(_chunk_item(spec, Kind.NOOP, Phase.HALTED, why, progress), stage=Stage.CANARY)
        if state is not StageState.PASSED:
            item = _chunk_item(spec, Kind.NOOP, Phase.AWAITING_PROMOTION, f"{done}; {said}", progress)
            return replace(item, stage=Stage.CANARY)
    if spec.state is DesiredState.PAUSED:
        why = f"paused after chunk {len(progress.chunks)}; set state: active to continue"
        return _chunk_item(spec, Kind.NOOP, Phase.PAUSED, why, progress)
    return None


def _chunks_done(
    spec: BackfillSpec, last: Backfill | None, everything: RunSummary, applied: DesiredState, progress: Progress
) -> Item:
    if last is None and not progress.chunks:
        return _chunk_item(spec, Kind.NOOP, Phase.SUCCEEDED, "nothing to reprocess", progress)
    if last is None:  # its last chunk was not observed this pass: the outcome is its chunks' runs
        phase = Phase.COMPLETED_WITH_FAILURES if everything.count("failed") else Phase.SUCCEEDED
        last_id = progress.chunks[-1].backfill_id
        return _chunk_item(spec, Kind.NOOP, phase, outcome_reason(phase, everything), progress, backfill_id=last_id)
    phase = terminal_phase(last, everything, applied)
    return _chunk_item(spec, Kind.NOOP, phase, outcome_reason(phase, everything), progress, backfill_id=last.id)


def _next_chunk(
    ctx: Context, spec: BackfillSpec, progress: Progress, everything: RunSummary, last: Backfill | None
) -> Item:
    """The next chunk's create, once the DAG can take it (like a queue head's) and its dry run is known."""
    blocked = dag_problem(ctx.obs.info, ctx.dag_id, ctx.obs.similar)
    if blocked is not None:
        return _chunk_item(spec, Kind.BLOCKED, Phase.BLOCKED, blocked[0], progress, error=blocked[1])
    if ctx.occupant is not None:  # another backfill holds the DAG's one active slot
        who, backfill_id = ctx.occupant
        why = f"queued behind {who} (backfill #{backfill_id})"
        return _chunk_item(spec, Kind.WAIT, Phase.QUEUED, why, progress, behind=ctx.ours(who))
    dry = ctx.world.dry_runs.get(spec.name)
    if dry is None:
        return _chunk_item(spec, Kind.WAIT, Phase.PENDING, AWAITING_DRY_RUN, progress, awaiting_dry_run=True)
    if dry.error is not None:
        why = f"Airflow refuses the next chunk: {dry.error}"
        return _chunk_item(spec, Kind.BLOCKED, Phase.BLOCKED, why, progress, error=True)
    if not dry.dates:
        return _chunks_done(spec, last, everything, DesiredState.ACTIVE, progress)
    return _create_chunk(ctx, spec, progress, dry.dates)


def _create_chunk(ctx: Context, spec: BackfillSpec, progress: Progress, left: Sequence[datetime]) -> Item:
    dates = take(sorted(left), next_size(spec, ctx.policy, progress), backwards=spec.run_backwards)
    moved = moved_code(ctx, spec)
    if moved is not None:
        return _chunk_item(spec, Kind.WAIT, Phase.PAUSED, moved, progress, guard=CODE_CHANGED)
    stop, unknown = guard_now(spec, ctx.policy, ctx.world)
    if unknown is not None:
        why = f"{UNOBSERVED}: {unknown}"
        return _chunk_item(spec, Kind.BLOCKED, Phase.BLOCKED, why, progress, error=True, unobserved=True)
    if stop is not None:
        return _chunk_item(spec, Kind.WAIT, Phase.QUEUED, stop.queued, progress, guard=stop.rule)
    promoting = bool(spec.execution and spec.execution.canary_runs) and not progress.promoted
    runs, throttled = analysis_runs(spec, ctx.world)
    item = replace(_chunk_create(spec, slice_of(dates, runs), progress), promoting=promoting)
    return item if throttled is None else replace(item, reason=f"{item.reason}; {throttled}")


def first_chunk(
    spec: BackfillSpec, counted: Item, dry: DryRun, plan: Chunking, throttle: tuple[int, str | None] | None = None
) -> Item:
    """A chunked spec's first backfill: the canary, or the first `chunk_runs` runs in its direction (a
    partitioned DAG's: partitions, by partition date). `counted` is the create of the whole spec: its counts
    stay the item's. `throttle`: the max_active_runs an analysis allows now, and why (`analysis_runs`)."""
    runs, throttled = throttle or (spec.max_active_runs, None)
    piece = slice_of(take(sorted(dry.dates), plan.first(), backwards=spec.run_backwards), runs)
    total = len(dry.dates)
    created = _first(_chunk_create(spec, piece, Progress(total)), counted, throttled)
    return replace(created, chunk=(1, plan.count(total)), chunking=plan)


def first_sub_range(
    spec: BackfillSpec, counted: Item, selection: Selection, throttle: tuple[int, str | None] | None = None
) -> Item:
    """A `select` spec's first backfill: its first sub-range in its direction, over the intervals selected there;
    the progress records every sub-range (the next chunks), `counted` keeps the whole selection's counts."""
    runs, throttled = throttle or (spec.max_active_runs, None)
    first, last = selection.sub_ranges[-1 if spec.run_backwards else 0]
    piece = slice_of([d for d in selection.selected if first <= d <= last], runs)
    created = _chunk_create(spec, piece, Progress(len(selection.selected), sub_ranges=selection.sub_ranges))
    return replace(_first(created, counted, throttled), chunk=(1, len(selection.sub_ranges)), selection=selection)


def _first(created: Item, counted: Item, throttled: str | None) -> Item:
    """A spec's first chunk create with the whole spec's counts (`counted`) and the throttle's reason, if any."""
    return replace(
        created if throttled is None else replace(created, reason=f"{created.reason}; {throttled}"),
        runs_to_create=counted.runs_to_create,
        runs_in_range=counted.runs_in_range,
        first_date=counted.first_date,
        last_date=counted.last_date,
        partitions=counted.partitions,
    )


def _chunk_create(spec: BackfillSpec, piece: Slice, progress: Progress) -> Item:
    """The create of the spec's next chunk; it stays pending in the progress until Airflow answers."""
    return Item(
        spec.name,
        spec.dag_id,
        Kind.CREATE,
        Phase.PENDING,
        f"chunk {len(progress.chunks) + 1}: {piece.runs:,} run(s)",
        runs_to_create=piece.runs,
        first_date=piece.first,
        last_date=piece.last,
        source=spec,
        request=request_for(spec, piece),
        progress=replace(progress, pending=piece),
        dates=piece.dates,  # the chunk's own dates, not the whole spec's
    )


def moved_code(ctx: Context, spec: BackfillSpec) -> str | None:
    """A `select` spec's DAG whose latest code is not its target, said as the reason it holds (None: it is, or the
    spec selects nothing, or the DAG's latest version is not known)."""
    if spec.select is None or ctx.obs.info is None:
        return None
    return code_moved(spec.select, ctx.obs.info.latest_version)


def _created_nothing(progress: Progress, backfill_id: int) -> bool:
    """The chunk's dry run listed runs, yet its backfill finished without any (apache/airflow#66726)."""
    chunk = next((c for c in progress.chunks if c.backfill_id == backfill_id), None)
    return chunk is not None and chunk.runs > 0 and chunk.summary is not None and chunk.summary.total == 0


def adopt_chunks(ctx: Context, spec: BackfillSpec, found: Sequence[Backfill]) -> Item:
    """A chunked spec's chunks found in Airflow (its store was lost): its progress rebuilt from them, in
    order, each finished one with its final runs; the next pass goes on from there (halt, next chunk)."""
    chunks = []
    for b in found:
        runs, owned = ctx.runs(b.id), ctx.obs.owned.get(b.id)
        count = runs.total if owned is None else sum(r.count for r in owned.dates)
        summary = None if b.active or runs.unfinished else runs  # a finished chunk keeps its final runs
        dates = None if owned is None else owned.dates
        chunks.append(Chunk(b.id, b.from_date, b.to_date, count, b.max_active_runs, summary, dates))
    progress = Progress(None, tuple(chunks), promoted=len(chunks) > 1)
    last = found[-1]
    phase = Phase.PAUSED if last.active and last.is_paused else Phase.RUNNING
    ids = ", ".join(f"#{b.id}" for b in found)
    observed = {last.id: ctx.obs.runs[last.id]} if last.id in ctx.obs.runs else {}
    return Item(
        spec.name,
        spec.dag_id,
        Kind.ADOPT,
        phase,
        f"adopt chunk backfill(s) {ids} (the spec's chunks, not bound)",
        last.id,
        runs=all_runs(progress, observed),
        progress=progress,
        chunk=(len(chunks), 0),
        source=spec,
    )
