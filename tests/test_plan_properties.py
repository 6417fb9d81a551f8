"""Hypothesis: the plan is deterministic and idempotent, and never acts on what it does not own (R17)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.model import Backfill, DagInfo, Phase, RunSummary
from controller.core.plan import Binding, DagObservation, DryRun, Kind, Plan, World, make_plan, matches
from controller.core.policy import Policy
from controller.core.spec import BackfillSpec, DesiredState, ReprocessBehavior

DAGS = ("d1", "d2", "d3")
T0 = datetime(2026, 11, 1, tzinfo=UTC)


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
                state=draw(st.sampled_from(list(DesiredState))),
                expected_runs=draw(st.none() | st.integers(1, 12)),
            )
        )
    return out


@st.composite
def worlds(draw: st.DrawFn, desired: list[BackfillSpec]) -> World:
    backfills: list[Backfill] = []
    for dag in DAGS:
        for i in range(draw(st.integers(0, 2))):
            active = i == 0 and draw(st.booleans())
            backfills.append(
                Backfill(
                    len(backfills) + 1, dag, T0, T0, "none", 1, draw(st.booleans()), None, T0, None if active else T0
                )
            )
    bindings = {}
    for spec in desired:
        if draw(st.booleans()):
            candidates = [
                b
                for b in backfills
                if b.dag_id == spec.dag_id and b.id not in {x.backfill_id for x in bindings.values()}
            ]
            if candidates:
                chosen = draw(st.sampled_from(candidates))
                bindings[spec.name] = Binding(
                    spec.name, spec.dag_id, chosen.id, Phase.RUNNING, draw(st.sampled_from(["active", "paused"]))
                )
    info = {dag: DagInfo(dag, False, False, False, True, False) for dag in DAGS}
    observations = {
        dag: DagObservation(
            dag,
            info[dag],
            tuple(b for b in backfills if b.dag_id == dag),
            {b.id: RunSummary({"success": 1}) for b in backfills if b.dag_id == dag},
        )
        for dag in DAGS
    }
    dry = {s.name: DryRun(tuple(T0 + timedelta(days=i) for i in range(draw(st.integers(0, 8)))), 8) for s in desired}
    return World(observations, bindings, dry, {})


@st.composite
def scenario(draw: st.DrawFn) -> tuple[list[BackfillSpec], World]:
    desired = draw(specs())
    return desired, draw(worlds(desired))


@settings(max_examples=150, deadline=None)
@given(scenario())
def test_plan_is_deterministic_and_order_insensitive(case: tuple[list[BackfillSpec], World]) -> None:
    desired, world = case
    first = make_plan(desired, Policy(), world)
    assert make_plan(desired, Policy(), world) == first
    shuffled = World(
        {dag: replace(obs, backfills=tuple(reversed(obs.backfills))) for dag, obs in world.observations.items()},
        dict(reversed(list(world.bindings.items()))),
        world.dry_runs,
        world.intents,
    )
    assert make_plan(desired, Policy(), shuffled).checksum() == first.checksum()


@settings(max_examples=150, deadline=None)
@given(scenario())
def test_plan_never_touches_unowned_and_never_doubles_up(case: tuple[list[BackfillSpec], World]) -> None:
    desired, world = case
    plan = make_plan(desired, Policy(), world)
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
            applied = {Kind.PAUSE: "paused", Kind.UNPAUSE: "active", Kind.CANCEL: "cancelled"}[item.kind]
            bindings[spec.name] = Binding(spec.name, spec.dag_id, item.backfill_id, item.phase, applied)
        elif item.kind is Kind.ADOPT or item.phase.terminal:
            bindings[spec.name] = Binding(spec.name, spec.dag_id, item.backfill_id, item.phase)
    return World(observations, bindings, world.dry_runs, {})


@settings(max_examples=150, deadline=None)
@given(scenario())
def test_applying_the_plan_then_replanning_changes_nothing(case: tuple[list[BackfillSpec], World]) -> None:
    desired, world = case
    plan = make_plan(desired, Policy(), world)
    after = apply(plan, desired, world)
    again = make_plan(desired, Policy(), after)
    assert [i for i in again.items if i.kind.change and i.kind is not Kind.CREATE] == []
    for item in again.items:
        if item.kind is Kind.CREATE:  # only a queue head that was waiting for the DAG to free up
            assert all(not b.active for b in after.observations[item.dag_id].backfills)
            assert not any(
                matches(s, b) for s in desired if s.name == item.spec for b in after.observations[item.dag_id].backfills
            )
