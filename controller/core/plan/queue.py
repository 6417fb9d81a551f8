"""The plan: desired specs vs observed Airflow → one action per spec, plus findings (pure).

`make_plan` is a function of the specs (in queue order), the policy, what was observed, the store's
bindings, dry-run results and unfinished create intents. It never does I/O and never reads a clock.
Run it once without dry runs: head-of-queue creates come back as `awaiting_dry_run`, the caller dry-runs
exactly those, then plans again.

Airflow allows one active backfill per DAG, so a DAG's specs form a queue, walked here in order: each spec's
step (`lifecycle`, `chunked`, or the head's create below) reads a frozen `Context`, and `next_context` hands
on what the step changed: the backfill it adopted, the slot its create takes, the spec the others wait on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from controller.core.model.airflow import Backfill, BackfillRequest, RunSummary
from controller.core.model.binding import Binding, Phase
from controller.core.model.capabilities import rerun_code
from controller.core.model.policy import Policy
from controller.core.model.ranges import compact
from controller.core.model.spec import BackfillSpec, DesiredState, InvalidSpec
from controller.core.plan.admission import (
    admit_creates,
    analysis_runs,
    budget_loads,
    dag_problem,
    held_now,
    run_limit,
    scheduler_findings,
    with_load,
)
from controller.core.plan.chunked import adopt_chunks, chunked, first_chunk
from controller.core.plan.identity import elsewhere
from controller.core.plan.invalid import invalid_items
from controller.core.plan.lifecycle import adopt, bound
from controller.core.plan.matching import LARGE, adoptable, adoptable_chunks, by_range, of_range
from controller.core.plan.outcome import outcome_reason, terminal_phase
from controller.core.plan.selecting import selected_item
from controller.core.plan.stages import rehearsal_gate, verified
from controller.core.plan.stops import STOP, stop_of
from controller.core.plan.strangers import not_adopted, stranger, unmanaged
from controller.core.plan.values import AWAITING_DRY_RUN, UNOBSERVED, Finding, FindingKind, Item, Kind, Plan, Step
from controller.core.plan.world import Context, DagObservation, DryRun, World
from controller.core.rules.chunks import chunking
from controller.core.rules.schedules import FUTURE_HINT, future_partitions
from controller.core.rules.scope import HINT as SCOPE_HINT
from controller.core.rules.scope import outside


def make_plan(
    specs: Sequence[BackfillSpec], policy: Policy, world: World, *, invalid: Sequence[InvalidSpec] = ()
) -> Plan:
    """Specs must be in queue order (first merged first); the result is sorted by DAG then queue. Each `invalid`
    spec file is one Blocked item: never planned, never orphaned, its backfill left as it is."""
    items: list[Item] = []
    findings: list[Finding] = []
    needed: list[str] = []
    by_dag = _queues(specs)
    bound = _Bound.of(world)
    for dag_id in sorted(by_dag):
        dag_items, dag_findings = _plan_dag(dag_id, by_dag[dag_id], policy, world, bound)
        items += dag_items
        findings += dag_findings
        needed += [i.spec for i in dag_items if i.awaiting_dry_run]
    names = {s.name for s in specs}
    orphan_items, orphan_findings, settled = _orphans(names | {s.name for s in invalid}, world)
    findings += orphan_findings
    blocked, blocked_findings = invalid_items(invalid, world, names)
    findings += blocked_findings
    findings += [
        Finding(FindingKind.INCOMPLETE, dag_id, _unobserved(dag_id, obs.error), cause=obs.error)
        for dag_id, obs in sorted(world.observations.items())
        if obs.error and dag_id not in by_dag
    ]
    items += orphan_items + blocked
    items = [_verified(i, world) for i in items]
    items = [_code(with_load(i, world), world) for i in admit_creates(items, specs, policy)]
    findings += scheduler_findings(policy, world)
    ordered = tuple(sorted(findings, key=Finding.sort_key))
    return Plan(tuple(items), ordered, tuple(needed), budget_loads(specs, items, policy), tuple(settled))


def dry_runs_needed(specs: Sequence[BackfillSpec], policy: Policy, world: World) -> tuple[str, ...]:
    """The queue heads a create would start, whose run counts must come from Airflow's dry run first: the DAG
    walks alone, as `make_plan` finds them (what it does after the walks never asks for a dry run)."""
    by_dag, bound = _queues(specs), _Bound.of(world)
    live = sorted(dag for dag, queue in by_dag.items() if not all(_recorded_terminal(s, world) for s in queue))
    walked = (_plan_dag(dag_id, by_dag[dag_id], policy, world, bound)[0] for dag_id in live)  # finished: no dry run
    return tuple(i.spec for items in walked for i in items if i.awaiting_dry_run)


def _queues(specs: Sequence[BackfillSpec]) -> dict[str, list[BackfillSpec]]:
    """Each DAG's specs, in queue order."""
    by_dag: dict[str, list[BackfillSpec]] = {}
    for spec in specs:
        by_dag.setdefault(spec.dag_id, []).append(spec)
    return by_dag


def _verified(item: Item, world: World) -> Item:
    """A spec with `verify` is Succeeded only after its final verification (one recorded finished already was)."""
    binding = world.bindings.get(item.spec)
    return item if binding is not None and binding.phase.terminal else verified(item, world.stages)


def _code(item: Item, world: World) -> Item:
    """A create says which Airflow release and which DAG code its runs will use (where the API tells it)."""
    if item.kind is not Kind.CREATE or world.airflow is None or item.source is None:
        return item
    obs = world.observations.get(item.dag_id)
    info = obs.info if obs is not None else None
    where = f"Airflow {world.airflow.version}"
    if info is not None and info.dag_version is not None:
        where += f", DAG version {info.dag_version}"
    asked = True if item.source.select is not None else item.source.run_on_latest_version  # select: always the latest
    dag_default = info.rerun_with_latest_version if info else None
    request = item.request  # the DAG's own choice is sent explicitly, as Airflow 3.3 would fall back to it
    if request is not None and asked is None and dag_default is not None and world.airflow.rerun_with_latest_version:
        request = replace(request, run_on_latest_version=dag_default)
    return replace(item, request=request, code=f"{where}: {rerun_code(world.airflow, asked, dag_default)}")


def _plan_dag(
    dag_id: str, queue: Sequence[BackfillSpec], policy: Policy, world: World, bound: _Bound
) -> tuple[list[Item], list[Finding]]:
    obs = world.observations.get(dag_id)
    live = [s for s in queue if not _recorded_terminal(s, world)]
    if not live and obs is None:  # history only, and not observed: no backfill to adopt, nothing to find
        return [_recorded(s, world) for s in queue], []
    if live and (obs is None or obs.error):
        error = obs.error if obs and obs.error else "DAG not observed"
        why = f"{UNOBSERVED}: {error}"
        items = [
            _recorded(s, world)
            if s not in live
            else Item(s.name, s.dag_id, Kind.BLOCKED, Phase.BLOCKED, why, error=True, source=s, unobserved=True)
            for s in queue
        ]
        return items, [Finding(FindingKind.INCOMPLETE, dag_id, _unobserved(dag_id, error), cause=error)]
    return _walk(queue, policy, world, obs or DagObservation(dag_id, None), bound)


def _unobserved(dag_id: str, error: str) -> str:
    return f"DAG {dag_id} was not fully observed: {error}"


def _recorded_terminal(spec: BackfillSpec, world: World) -> bool:
    binding = world.bindings.get(spec.name)
    return binding is not None and binding.phase.terminal


def _recorded(spec: BackfillSpec, world: World) -> Item:
    """A spec the store records as finished: its recorded outcome, without looking at Airflow."""
    binding = world.bindings[spec.name]
    done = len(binding.progress.chunks) if binding.progress is not None else 0
    return Item(
        spec.name,
        spec.dag_id,
        Kind.NOOP,
        binding.phase,
        binding.reason or "finished",
        binding.backfill_id,
        source=spec,
        runs=binding.runs or RunSummary({}),
        progress=binding.progress,
        chunk=(done, done) if done else None,  # a finished chunked spec ran all its chunks
    )


# --- the walk over one DAG's queue ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Bound:
    """The backfills the store binds to specs, worked out once a plan: each DAG's walk reads them (per DAG it
    would cost a pass O(DAGs × bindings), which history makes large)."""

    taken: frozenset[int]  # every backfill a binding names (a chunked spec's chunks included)
    owners: Mapping[int, str]  # a binding's current backfill → its spec

    @classmethod
    def of(cls, world: World) -> _Bound:
        bindings, claims = world.bindings.values(), world.claims.values()
        taken = {i for b in bindings for i in (*b.backfills, b.backfill_id) if i is not None}
        owners = {c.backfill_id: c.spec_name for c in claims if c.backfill_id}
        owners |= {b.backfill_id: b.spec_name for b in bindings if b.backfill_id}
        return cls(frozenset(taken.union(*(c.owned for c in claims))), owners)


@dataclass(frozen=True, slots=True)
class _Claims:
    """The backfills the queue's unbound specs adopt, claimed in queue order before the walk."""

    adoptions: Mapping[str, Backfill]
    chunk_adoptions: Mapping[str, tuple[Backfill, ...]]  # a chunked spec's chunks, after a lost store
    taken: frozenset[int]  # every backfill a spec owns (a chunked spec owns all its chunks) or adopts
    occupant: tuple[str, int] | None  # (who, backfill id) holding the DAG's one active slot


def _claim(queue: Sequence[BackfillSpec], obs: DagObservation, policy: Policy, world: World, bound: _Bound) -> _Claims:
    taken = set(bound.taken)
    adoptions: dict[str, Backfill] = {}
    chunk_adoptions: dict[str, tuple[Backfill, ...]] = {}
    mine = [b for b in obs.backfills if elsewhere(b, world.identity) is None]  # another login's is never adopted
    ranges = by_range(mine)
    for spec in queue:
        binding = world.bindings.get(spec.name)
        if binding is not None and (binding.backfill_id is not None or binding.progress is not None):
            continue  # bound; a chunked spec finds its pending chunk itself (`chunked._pending_chunk`)
        found = adoptable(spec, of_range(ranges, spec), taken, world.intents.get(spec.name))
        if found is not None:
            adoptions[spec.name] = found
            taken.add(found.id)
        elif spec.select is not None or chunking(spec, policy, LARGE) is not None:  # select: a backfill a sub-range
            chunks = adoptable_chunks(spec, mine, taken)
            if chunks:
                chunk_adoptions[spec.name] = chunks
                taken |= {b.id for b in chunks}
    active = [b for b in obs.backfills if b.active]
    owners = dict(bound.owners)
    owners.update({b.id: name for name, b in adoptions.items()})
    owners.update({b.id: name for name, found in chunk_adoptions.items() for b in found})
    occupant = (owners.get(active[0].id) or stranger(active[0], world.identity), active[0].id) if active else None
    return _Claims(adoptions, chunk_adoptions, frozenset(taken), occupant)


def _walk(
    queue: Sequence[BackfillSpec], policy: Policy, world: World, obs: DagObservation, bound: _Bound
) -> tuple[list[Item], list[Finding]]:
    claims = _claim(queue, obs, policy, world, bound)
    ctx = Context(obs, policy, world, tuple(s.name for s in queue), claims.taken, claims.occupant)
    items: list[Item] = []
    findings: list[Finding] = []
    for spec in queue:
        item, found = _decide(ctx, claims, spec)
        items.append(item)
        findings += found
        ctx = next_context(ctx, spec, item)
    return items, [*findings, *unmanaged(ctx), *not_adopted(ctx, queue), *_dag_paused(ctx, items)]


def next_context(ctx: Context, spec: BackfillSpec, item: Item) -> Context:
    """What the spec's step hands on to the next spec: the backfill it adopted is taken, its create takes the
    DAG's one active slot, and the first spec not finished is the one the specs behind it wait on."""
    adopted = item.backfill_id if item.kind is Kind.ADOPT else None
    return replace(
        ctx,
        taken=ctx.taken if adopted is None or adopted in ctx.taken else ctx.taken | {adopted},  # no copy per spec
        occupant=(spec.name, 0) if item.kind is Kind.CREATE else ctx.occupant,
        waiting_on=spec.name if ctx.waiting_on is None and not item.phase.terminal else ctx.waiting_on,
    )


def _decide(ctx: Context, claims: _Claims, spec: BackfillSpec) -> Step:
    binding = ctx.world.bindings.get(spec.name)
    if binding is not None and binding.phase.terminal:
        return _recorded(spec, ctx.world), ()
    if binding is not None and binding.progress is not None:
        return chunked(ctx, spec, binding, binding.progress)
    if binding is not None and binding.backfill_id is not None:
        return bound(ctx, spec, binding)
    if spec.name in claims.adoptions:
        return adopt(ctx, spec, claims.adoptions[spec.name])
    if spec.name in claims.chunk_adoptions:
        return adopt_chunks(ctx, spec, claims.chunk_adoptions[spec.name]), ()
    return _unbound(ctx, spec), ()


def _unbound(ctx: Context, spec: BackfillSpec) -> Item:  # noqa: PLR0911 - one return per reason it waits
    """A spec with no backfill yet: not created (cancelled, paused, refused), queued, or the queue's head."""

    def new(kind: Kind, phase: Phase, reason: str, *, error: bool = False, behind: str | None = None) -> Item:
        return Item(spec.name, spec.dag_id, kind, phase, reason, error=error, behind=behind, source=spec)

    if spec.state is DesiredState.CANCELLED:
        return new(Kind.NOOP, Phase.CANCELLED, "cancelled before it was created")
    if spec.state is DesiredState.PAUSED:  # creating it would let runs start before a pause could land
        return new(Kind.NOOP, Phase.PAUSED, "paused before it was created; set state: active to create it")
    stop = stop_of(spec, ctx.world.holds.stops, ctx.world.now)
    if stop is not None:  # an emergency stop: never created while it holds
        return Item(spec.name, spec.dag_id, Kind.NOOP, Phase.PAUSED, stop.held, guard=STOP, source=spec)
    future = future_partitions(spec, ctx.obs.info, ctx.policy, ctx.world.now)
    if future is not None:  # refused at once, even behind others in the queue (as validate refuses it)
        return new(Kind.BLOCKED, Phase.BLOCKED, f"{future}; {FUTURE_HINT}", error=True)
    info = ctx.obs.info
    scoped = outside(spec.dag_id, None if info is None else info.tags, ctx.policy)
    if scoped is not None:  # another team's DAG (by its tags, which validate could not read offline)
        return new(Kind.BLOCKED, Phase.BLOCKED, f"{scoped}; {SCOPE_HINT}", error=True)
    rehearsing = rehearsal_gate(spec, ctx.policy, ctx.world.stages)
    if rehearsing is not None:  # production waits for its rehearsal, wherever it stands in the queue
        return rehearsing
    if ctx.occupant is not None:
        who, backfill_id = ctx.occupant
        where = f" (backfill #{backfill_id})" if backfill_id else ""
        return new(Kind.WAIT, Phase.QUEUED, f"queued behind {who}{where}", behind=ctx.ours(who))
    if ctx.waiting_on is not None:
        return new(Kind.WAIT, Phase.QUEUED, f"queued behind {ctx.waiting_on}", behind=ctx.waiting_on)
    return _head(ctx, spec)


def _head(ctx: Context, spec: BackfillSpec) -> Item:
    """The queue's head: created once the DAG can take it and its dry run is known."""
    blocked = dag_problem(ctx.obs.info, ctx.dag_id, ctx.obs.similar)
    if blocked is not None:
        why = drained_pause(ctx.world, ctx.dag_id) if ctx.obs.info is not None and ctx.obs.info.is_paused else None
        message = blocked[0] if why is None else why
        return Item(spec.name, spec.dag_id, Kind.BLOCKED, Phase.BLOCKED, message, error=blocked[1], source=spec)
    dry = ctx.world.dry_runs.get(spec.name)
    if dry is None:
        return Item(
            spec.name, spec.dag_id, Kind.WAIT, Phase.PENDING, AWAITING_DRY_RUN, awaiting_dry_run=True, source=spec
        )
    if dry.error is not None:
        why = f"Airflow refuses it: {dry.error}"
        return Item(spec.name, spec.dag_id, Kind.BLOCKED, Phase.BLOCKED, why, error=True, source=spec)
    if spec.select is not None and dry.dates:
        return selected_item(ctx, spec, _counted(spec, dry), dry)
    return _create_or_refuse(ctx, spec, dry)


def drained_pause(world: World, dag_id: str) -> str | None:
    """Why the paused DAG is paused when a finished spec drained it (`drain_dag`: Airflow paused it when the
    drain ended): backfillctl never unpauses a DAG, so specs queued on it wait for a person."""
    finished = {n: b.claim() for n, b in world.bindings.items() if b.dag_id == dag_id and b.phase.terminal}
    drained = sorted(n for n, c in (finished | dict(world.claims)).items() if c.dag_id == dag_id and c.drained)
    if not drained:
        return None
    return (
        f"DAG {dag_id} is paused by drain (spec {drained[-1]} set drain_dag; not a stop): backfillctl never "
        "unpauses a DAG; specs queued on it wait until a person unpauses it"
    )


def _counted(spec: BackfillSpec, dry: DryRun) -> Item:
    """The head's create with its dry run's counts."""
    return Item(
        spec.name,
        spec.dag_id,
        Kind.CREATE,
        Phase.PENDING,
        runs_to_create=len(dry.dates),
        runs_in_range=dry.in_range,
        first_date=min(dry.dates, default=None),
        last_date=max(dry.dates, default=None),
        source=spec,
        partitions=dry.partitions,
        dates=compact(dry.dates),
    )


def _create_or_refuse(ctx: Context, spec: BackfillSpec, dry: DryRun) -> Item:
    """The head's create with its dry run's counts, or why it does not start: nothing to do, over a limit, a guard
    (a `select` spec's: its selection, `selected_item`)."""
    count, counted = len(dry.dates), _counted(spec, dry)
    if count == 0:
        return replace(counted, kind=Kind.NOOP, phase=Phase.SUCCEEDED, reason="nothing to reprocess")
    limit = run_limit(spec, ctx.policy, count)
    if limit is not None:
        return replace(counted, kind=Kind.REFUSE, phase=Phase.BLOCKED, reason=limit)
    held = held_now(spec, ctx.policy, ctx.world, counted)
    if held is not None:
        return held
    plan = chunking(spec, ctx.policy, count)
    if plan is not None:
        return first_chunk(spec, counted, dry, plan, analysis_runs(spec, ctx.world))
    return replace(counted, request=BackfillRequest.from_spec(spec))


def _dag_paused(ctx: Context, items: Sequence[Item]) -> list[Finding]:
    info = ctx.obs.info
    if info is None or not info.is_paused or all(i.phase.terminal for i in items):
        return []
    default = f"DAG {ctx.dag_id} is paused: its backfill runs stay queued until it is unpaused"
    message = drained_pause(ctx.world, ctx.dag_id) or default
    return [Finding(FindingKind.DAG_PAUSED, ctx.dag_id, message)]


# --- deleted specs --------------------------------------------------------------------------------------


def _orphans(spec_names: set[str], world: World) -> tuple[list[Item], list[Finding], list[Item]]:
    """Deleted specs: an orphaned backfill (a finding), or a finished one whose outcome is to be recorded."""
    items, findings, settled = [], [], []
    candidates = ((n, b) for n, b in world.bindings.items() if n not in spec_names and not b.phase.terminal)
    for name, binding in sorted(candidates):  # filtered first: history is mostly finished specs, sorted for nothing
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
    return Item(name, binding.dag_id, Kind.NOOP, phase, outcome_reason(phase, runs), backfill.id, runs=runs)
