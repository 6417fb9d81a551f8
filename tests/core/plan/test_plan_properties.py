"""Hypothesis: the plan is deterministic and idempotent, and never acts on what it does not own (R17)."""

from __future__ import annotations

from collections import Counter
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import event, given, settings
from hypothesis import strategies as st

from controller.core.model.airflow import Backfill, DagInfo, RunSummary
from controller.core.model.binding import Binding, Phase
from controller.core.model.policy import DriftMode, Policy, Rule
from controller.core.model.spec import BackfillSpec, DesiredState, ReprocessBehavior
from controller.core.plan.queue import dry_runs_needed, make_plan
from controller.core.plan.values import Kind, Plan
from controller.core.plan.world import DagObservation, DryRun, World

DAGS = ("d1", "d2", "d3")
T0 = datetime(2026, 11, 1, tzinfo=UTC)
NOW = T0 + timedelta(days=30)  # after every dry run's dates


@st.composite
def specs(draw: st.DrawFn) -> list[BackfillSpec]:
    count = draw(st.integers(0, 6))
    out = []
    for n in range(count):
        start = datetime(2025, draw(st.integers(1, 12)), 1, tzinfo=UTC)
        out.append(
            BackfillSpec(
                name=f"s{n}",
                dag_id=draw(st.sampled_from(DAGS)),
                from_date=start,
                to_date=start + timedelta(days=draw(st.integers(0, 9))),
                reprocess_behavior=draw(st.sampled_from(list(ReprocessBehavior))),
                max_active_runs=draw(st.integers(1, 3)),
                ticket="CHG-1",
                reason="property test",
                requested_by="a",
                approvers=("b",),
                path=f"specs/s{n}.yaml",
                digest=f"d{n}",
                state=draw(st.sampled_from([DesiredState.ACTIVE, *DesiredState])),
                expected_runs=draw(st.none() | st.integers(1, 6)),
            )
        )
    return out


FOREIGN = datetime(2026, 6, 1, tzinfo=UTC)  # no spec starts here: a backfill nobody's spec matches


def backfill_like(draw: st.DrawFn, id_: int, spec: BackfillSpec, active: bool) -> Backfill:
    return Backfill(
        id_,
        spec.dag_id,
        spec.from_date,
        spec.to_date,
        spec.reprocess_behavior.value,
        spec.max_active_runs,
        draw(st.booleans()),
        None,
        T0 + timedelta(hours=id_),
        None if active else T0 + timedelta(days=1),
    )


def near_misses(b: Backfill) -> list[Backfill]:
    other = "completed" if b.reprocess_behavior != "completed" else "failed"
    return [
        replace(b, from_date=b.from_date - timedelta(days=1)),
        replace(b, to_date=b.to_date + timedelta(days=1)),
        replace(b, reprocess_behavior=other),
        replace(b, max_active_runs=b.max_active_runs + 1),
        replace(b, dag_run_conf={"full_refresh": True}),
    ]


def same_request(spec: BackfillSpec, b: Backfill) -> bool:
    """Independent of plan.matches: the fields a create sends, compared one by one."""
    return (b.dag_id, b.from_date, b.to_date, b.reprocess_behavior, b.max_active_runs) == (
        spec.dag_id,
        spec.from_date,
        spec.to_date,
        spec.reprocess_behavior.value,
        spec.max_active_runs,
    ) and dict(b.dag_run_conf or {}) == dict(spec.dag_run_conf or {})


def summaries(draw: st.DrawFn, backfill: Backfill) -> RunSummary:
    states = ("success", "failed", "running", "queued")
    counts = {
        state: draw(st.integers(0, 2))
        for state in states
        if not (backfill.completed_at and state in ("running", "queued"))
    }
    never = draw(st.integers(0, counts.get("failed", 0)))
    return RunSummary({k: v for k, v in counts.items() if v}, never_started=never)


@st.composite
def worlds(draw: st.DrawFn, desired: list[BackfillSpec]) -> World:
    """Airflow as the plan may find it: backfills that match a spec (bound, unbound, active, paused,
    finished), unmanaged ones, paused / stale / missing DAGs, missing or failed dry runs, pending intents."""
    backfills: list[Backfill] = []
    for dag in DAGS:
        on_dag = [s for s in desired if s.dag_id == dag]
        for _ in range(draw(st.integers(0, 3))):
            active = draw(st.booleans()) and not any(b.active for b in backfills if b.dag_id == dag)
            kind = draw(st.sampled_from(["matching", "near-miss", "foreign"] if on_dag else ["foreign"]))
            if kind == "matching":
                backfills.append(backfill_like(draw, len(backfills) + 1, draw(st.sampled_from(on_dag)), active))
                continue
            if kind == "near-miss":  # like a spec's backfill but one field differs: never adoptable
                like = backfill_like(draw, len(backfills) + 1, draw(st.sampled_from(on_dag)), active)
                backfills.append(draw(st.sampled_from(near_misses(like))))
                continue
            backfills.append(
                Backfill(
                    len(backfills) + 1,
                    dag,
                    FOREIGN,
                    FOREIGN,
                    "none",
                    1,
                    draw(st.booleans()),
                    None,
                    T0,
                    None if active else T0,
                )
            )
    bindings: dict[str, Binding] = {}
    for spec in desired:
        how = draw(st.sampled_from(["none", "none", "bound", "gone", "terminal"]))
        taken = {x.backfill_id for x in bindings.values()}
        candidates = [b for b in backfills if b.dag_id == spec.dag_id and b.id not in taken]
        if how == "bound" and candidates:
            chosen = draw(st.sampled_from([b for b in candidates if b.active] or candidates))
            applied = draw(st.sampled_from(list(DesiredState)))
            bindings[spec.name] = Binding(spec.name, spec.dag_id, chosen.id, Phase.RUNNING, applied)
        elif how == "gone":
            bindings[spec.name] = Binding(spec.name, spec.dag_id, 900 + len(bindings), Phase.RUNNING)
        elif how == "terminal" and candidates:
            chosen = draw(st.sampled_from(candidates))
            bindings[spec.name] = Binding(
                spec.name, spec.dag_id, chosen.id, Phase.SUCCEEDED, reason="3 run(s) succeeded"
            )
    if draw(st.booleans()):  # a spec that was deleted while its backfill runs
        active = [b for b in backfills if b.active and b.id not in {x.backfill_id for x in bindings.values()}]
        if active:
            gone = draw(st.sampled_from(active))
            bindings["deleted"] = Binding("deleted", gone.dag_id, gone.id, Phase.RUNNING)
    observations = {}
    for dag in DAGS:
        health = draw(st.sampled_from(["ok", "ok", "ok", "paused", "stale", "unbackfillable", "missing", "error"]))
        info = DagInfo(dag, health == "paused", health == "stale", False, health != "unbackfillable", False)
        on_dag = tuple(b for b in backfills if b.dag_id == dag)
        runs = {b.id: summaries(draw, b) for b in on_dag}
        if health == "error":
            observations[dag] = DagObservation(dag, None, error="503 Service Unavailable")
        else:
            observations[dag] = DagObservation(dag, None if health == "missing" else info, on_dag, runs)
    dry: dict[str, DryRun] = {}
    for spec in desired:
        outcome = draw(st.sampled_from(["dates", "dates", "missing", "error"]))
        if outcome == "dates":
            dry[spec.name] = DryRun(tuple(T0 + timedelta(days=i) for i in range(draw(st.integers(0, 8)))), 8)
        elif outcome == "error":
            dry[spec.name] = DryRun(error="depends_on_past DAGs cannot run backwards")
    intents = {s.name: T0 for s in desired if s.name not in bindings and draw(st.integers(0, 4)) == 0}
    return World(observations, bindings, dry, intents, now=NOW)


POLICIES = (
    Policy(),
    Policy(drift=DriftMode.HEAL),
    Policy(rules=(Rule(("d2",), max_runs=3),)),
)
Case = tuple[list[BackfillSpec], World, Policy]


@st.composite
def scenario(draw: st.DrawFn) -> Case:
    desired = draw(specs())
    return desired, draw(worlds(desired)), draw(st.sampled_from(POLICIES))


@settings(max_examples=150, deadline=None)
@given(scenario())
def test_plan_is_deterministic_and_order_insensitive(case: Case) -> None:
    desired, world, policy = case
    first = make_plan(desired, policy, world)
    assert make_plan(desired, policy, world) == first
    assert dry_runs_needed(desired, policy, world) == first.dry_runs_needed  # the walks alone find the same heads
    shuffled = World(
        {dag: replace(obs, backfills=tuple(reversed(obs.backfills))) for dag, obs in world.observations.items()},
        dict(reversed(list(world.bindings.items()))),
        world.dry_runs,
        world.intents,
        now=world.now,
    )
    assert make_plan(desired, policy, shuffled).checksum() == first.checksum()


@settings(max_examples=150, deadline=None)
@given(scenario())
def test_plan_never_touches_unowned_and_never_doubles_up(case: Case) -> None:
    desired, world, policy = case
    plan = make_plan(desired, policy, world)
    owned = {b.backfill_id for b in world.bindings.values()}
    for item in plan.items:
        if item.kind in (Kind.PAUSE, Kind.UNPAUSE, Kind.CANCEL):
            assert item.backfill_id in owned
    for dag, obs in world.observations.items():
        creates = [i for i in plan.items if i.dag_id == dag and i.kind is Kind.CREATE]
        assert len(creates) <= 1
        if any(b.active for b in obs.backfills):
            assert creates == []


def apply(plan: Plan, desired: list[BackfillSpec], world: World) -> World:
    """A pure model of Airflow + store: what the reconciler's calls would leave behind."""
    by_name = {s.name: s for s in desired}
    observations = {
        dag: DagObservation(dag, obs.info, obs.backfills, dict(obs.runs)) for dag, obs in world.observations.items()
    }
    bindings = dict(world.bindings)
    next_id = 1 + max((b.id for obs in observations.values() for b in obs.backfills), default=0)
    for item in plan.items:
        spec = by_name.get(item.spec)
        obs = observations.get(item.dag_id)
        if spec is None or obs is None:
            continue
        if item.kind is Kind.CREATE:
            created = Backfill(
                next_id,
                spec.dag_id,
                spec.from_date,
                spec.to_date,
                spec.reprocess_behavior.value,
                spec.max_active_runs,
                False,
                None,
                T0,
                None,
            )
            next_id += 1
            observations[spec.dag_id] = replace(
                obs, backfills=(*obs.backfills, created), runs={**obs.runs, created.id: RunSummary({"queued": 1})}
            )
            bindings[spec.name] = Binding(spec.name, spec.dag_id, created.id, Phase.RUNNING)
        elif item.kind in (Kind.PAUSE, Kind.UNPAUSE, Kind.CANCEL):

            def change(b: Backfill, kind: Kind = item.kind, target: int | None = item.backfill_id) -> Backfill:
                if b.id != target:
                    return b
                return replace(b, is_paused=kind is not Kind.UNPAUSE, completed_at=T0 if kind is Kind.CANCEL else None)

            observations[spec.dag_id] = replace(obs, backfills=tuple(change(b) for b in obs.backfills))
            applied = {
                Kind.PAUSE: DesiredState.PAUSED,
                Kind.UNPAUSE: DesiredState.ACTIVE,
                Kind.CANCEL: DesiredState.CANCELLED,
            }[item.kind]
            bindings[spec.name] = Binding(spec.name, spec.dag_id, item.backfill_id, item.phase, applied)
        elif item.kind is Kind.ADOPT or item.phase.terminal:
            bindings[spec.name] = Binding(spec.name, spec.dag_id, item.backfill_id, item.phase)
    return World(observations, bindings, world.dry_runs, {}, now=NOW)


@settings(max_examples=150, deadline=None)
@given(scenario())
def test_applying_the_plan_converges_without_flapping(case: Case) -> None:
    """Adopting can take one more pass to steer (adopt, then pause); after that, nothing changes."""
    desired, world, policy = case
    seen: set[tuple[str, Kind, int | None]] = set()
    world = apply(make_plan(desired, policy, world), desired, world)
    for _ in range(3):
        plan = make_plan(desired, policy, world)
        steering = [i for i in plan.items if i.kind.change and i.kind is not Kind.CREATE]
        if not steering:
            break
        for item in steering:
            assert (item.spec, item.kind, item.backfill_id) not in seen, f"{item.kind} {item.spec} again"
            seen.add((item.spec, item.kind, item.backfill_id))
        world = apply(plan, desired, world)
    else:
        raise AssertionError(f"still steering after 3 more passes: {steering}")
    event(f"extra steering passes: {len(seen)}")
    owned = {b.backfill_id for b in world.bindings.values()}
    for item in plan.items:
        if item.kind is Kind.CREATE:  # only a queue head that was waiting for the DAG to free up
            on_dag = world.observations[item.dag_id].backfills
            assert all(not b.active for b in on_dag)
            spec = next(s for s in desired if s.name == item.spec)
            assert not any(same_request(spec, b) for b in on_dag if b.id not in owned)  # it would adopt it


@settings(max_examples=200, deadline=None)
@given(scenario())
def test_adoption_takes_only_matching_unowned_backfills(case: Case) -> None:
    desired, world, policy = case
    plan = make_plan(desired, policy, world)
    by_name = {s.name: s for s in desired}
    backfills = {b.id: b for obs in world.observations.values() for b in obs.backfills}
    owned = {b.backfill_id for b in world.bindings.values()}
    adopted = [i for i in plan.items if i.kind is Kind.ADOPT]
    for item in adopted:
        event("adopts")
        spec, backfill = by_name[item.spec], backfills[item.backfill_id or 0]
        assert same_request(spec, backfill)
        assert item.backfill_id not in owned
        binding = world.bindings.get(item.spec)
        assert binding is None or binding.backfill_id is None
        intent = world.intents.get(item.spec)
        assert intent is None or backfill.created_at >= intent
    assert len({i.backfill_id for i in adopted}) == len(adopted)  # a backfill is adopted once
    unmanaged = set(backfills) - owned - {i.backfill_id for i in adopted}
    for item in plan.items:
        assert item.backfill_id not in unmanaged, f"{item.kind} touches unmanaged backfill #{item.backfill_id}"
    for finding in plan.findings:
        if finding.kind == "unmanaged":
            event("unmanaged backfill found")
            assert finding.backfill_id in unmanaged


ALL_KINDS = set(Kind)
ALL_FINDINGS = {"drift", "orphaned", "unmanaged", "dag-paused", "observation-incomplete", "still-running"}


def test_the_generator_reaches_every_kind_of_item_and_finding() -> None:
    """Guards the properties above against a generator that never produces a whole branch."""
    kinds: Counter[Kind] = Counter()
    findings: Counter[str] = Counter()

    @settings(max_examples=400, deadline=None, derandomize=True, database=None)
    @given(scenario())
    def explore(case: Case) -> None:
        desired, world, policy = case
        plan = make_plan(desired, policy, world)
        kinds.update(i.kind for i in plan.items)
        findings.update(f.kind for f in plan.findings)

    explore()
    assert set(kinds) == ALL_KINDS, f"never generated: {ALL_KINDS - set(kinds)}"
    assert set(findings) == ALL_FINDINGS, f"never generated: {ALL_FINDINGS - set(findings)}"
