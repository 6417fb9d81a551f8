"""The plan, decision by decision (pure, table-driven): queueing, adoption, refusal, steering, findings."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

import pytest

from controller.core.model.airflow import Backfill, DagInfo, RunSummary
from controller.core.model.binding import Binding, Phase
from controller.core.model.policy import DriftMode, Policy, Rule
from controller.core.model.spec import BackfillSpec, DesiredState, ReprocessBehavior
from controller.core.model.stops import HandPause
from controller.core.plan.matching import adoptable, matches
from controller.core.plan.outcome import terminal_phase
from controller.core.plan.queue import dry_runs_needed, make_plan
from controller.core.plan.values import Finding, Item, Kind, Plan, iter_changes, stuck, summary_counts
from controller.core.plan.world import DagObservation, DryRun, Holds, World

T0 = datetime(2026, 11, 1, tzinfo=UTC)
NOW = T0 + timedelta(days=1)  # every World says when it is: after every date the specs here name
JAN1 = datetime(2025, 1, 1, tzinfo=UTC)
OK = DagInfo("d", False, False, False, True, False)


def spec(name: str = "s", dag: str = "d", **extra: Any) -> BackfillSpec:
    fields: dict[str, Any] = {
        "name": name,
        "dag_id": dag,
        "from_date": JAN1,
        "to_date": JAN1 + timedelta(days=6),
        "reprocess_behavior": ReprocessBehavior.NONE,
        "max_active_runs": 2,
        "ticket": "CHG-1",
        "reason": "unit test",
        "requested_by": "a",
        "approvers": ("b",),
        "path": f"specs/{name}.yaml",
        "digest": f"sha256:{name}",
    }
    fields.update(extra)
    return BackfillSpec(**fields)


def backfill(id_: int, of: BackfillSpec | None = None, *, active: bool = True, paused: bool = False) -> Backfill:
    s = of or spec()
    conf = None if s.dag_run_conf is None else dict(s.dag_run_conf)
    return Backfill(
        id_,
        s.dag_id,
        s.from_date,
        s.to_date,
        s.reprocess_behavior.value,
        s.max_active_runs,
        paused,
        conf,
        T0 + timedelta(hours=id_),
        None if active else T0 + timedelta(days=1),
    )


HAND_PAUSED = (
    "paused in Airflow (who: not recorded); a stop: never unpaused by backfillctl "
    "(lift: unpause it in Airflow, or a reviewed `resume` naming its stop)"
)


def world(
    *backfills: Backfill,
    bindings: dict[str, Binding] | None = None,
    dry: dict[str, DryRun] | None = None,
    runs: dict[int, RunSummary] | None = None,
    info: DagInfo | None = OK,
    intents: dict[str, datetime] | None = None,
    dag: str = "d",
) -> World:
    obs = DagObservation(dag, info, backfills, runs or {})
    return World({dag: obs}, bindings or {}, dry or {}, intents or {}, now=NOW)


def dates(n: int) -> DryRun:
    return DryRun(tuple(JAN1 + timedelta(days=i) for i in range(n)), 7)


def decided(plan: Plan) -> list[tuple[str, str, str, str, int | None]]:
    return [(i.spec, i.kind.value, i.phase.value, i.reason, i.backfill_id) for i in plan.items]


def bound(name: str, backfill_id: int | None, applied: str = "active", phase: Phase = Phase.RUNNING) -> Binding:
    return Binding(name, "d", backfill_id, phase, DesiredState(applied))


# --- a fresh spec at the head of its queue --------------------------------------------------------------


def test_head_without_a_dry_run_asks_for_one_then_creates() -> None:
    s = spec()
    first = make_plan([s], Policy(), world())
    assert decided(first) == [("s", "wait", "Pending", "awaiting dry run", None)]
    assert first.dry_runs_needed == ("s",)
    assert dry_runs_needed([s], Policy(), world()) == ("s",)
    plan = make_plan([s], Policy(), world(dry={"s": dates(7)}))
    (item,) = plan.items
    assert (item.kind, item.phase, item.reason, item.runs_to_create, item.runs_in_range) == (
        Kind.CREATE,
        Phase.PENDING,
        "",
        7,
        7,
    )
    assert (item.first_date, item.last_date) == (JAN1, JAN1 + timedelta(days=6))
    assert item.facts["request"] == {
        "dag_id": "d",
        "from_date": "2025-01-01T00:00:00Z",
        "to_date": "2025-01-07T00:00:00Z",
        "reprocess_behavior": "none",
        "max_active_runs": 2,
    }
    assert item.facts["approvers"] == ["b"]
    assert plan.dry_runs_needed == ()
    assert plan.findings == ()


def test_the_dry_runs_a_pass_needs_are_found_without_walking_the_dags_whose_specs_all_finished(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from controller.core.plan import queue  # noqa: PLC0415 - the walk is counted where it is called

    walked: list[str] = []
    walk = queue._plan_dag
    monkeypatch.setattr(queue, "_plan_dag", lambda dag_id, *rest: walked.append(dag_id) or walk(dag_id, *rest))
    done = [spec(f"done-{n}", dag=f"old-{n % 3}") for n in range(9)]
    finished = {s.name: bound(s.name, 100 + n, phase=Phase.SUCCEEDED) for n, s in enumerate(done)}
    live = [spec("new", dag="old-1"), spec("other", dag="fresh")]
    seen = World({}, finished, {}, {}, now=NOW)
    assert dry_runs_needed([*done, *live], Policy(), seen) == ()  # not observed: blocked, not awaiting
    assert walked == ["fresh", "old-1"]
    walked.clear()
    observed = world(bindings=finished, dag="fresh")
    assert dry_runs_needed([*done, *live], Policy(), observed) == ("other",)
    assert walked == ["fresh", "old-1"]
    assert make_plan([*done, *live], Policy(), observed).dry_runs_needed == ("other",)  # what the plan asks too


def test_a_lost_stores_plan_matches_each_spec_against_the_backfills_of_its_dates_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A lost store adopts a DAG's whole history: a scan of every backfill per spec made a pass O(specs²)."""
    from controller.core.plan import matching  # noqa: PLC0415 - the comparisons are counted where they are made

    compared: list[int] = []
    match = matching.matches_request
    monkeypatch.setattr(matching, "matches_request", lambda r, b: compared.append(b.id) or match(r, b))
    history = [
        spec(f"s{n:03d}", from_date=JAN1 + timedelta(days=n), to_date=JAN1 + timedelta(days=n)) for n in range(300)
    ]
    backfills = [backfill(1000 + n, s, active=False) for n, s in enumerate(history)]
    backfills.append(backfill(2000, history[7], active=False))  # re-run by hand later: the newest is adopted
    plan = make_plan(history, Policy(), world(*backfills, runs={b.id: RunSummary({"success": 1}) for b in backfills}))
    assert [(i.kind, i.backfill_id) for i in plan.items[6:9]] == [
        (Kind.ADOPT, 1006),
        (Kind.ADOPT, 2000),
        (Kind.ADOPT, 1008),
    ]
    assert len(compared) == 301  # each spec against the backfills of its own dates


def test_item_facts_and_json() -> None:
    s = spec(run_backwards=True, expected_runs=9, state=DesiredState.ACTIVE)
    (item,) = make_plan([s], Policy(), world(dry={"s": dates(2)})).items
    assert item.as_json() == {
        "spec": "s",
        "dag_id": "d",
        "action": "create",
        "phase": "Pending",
        "reason": "",
        "backfill_id": None,
        "runs_to_create": 2,
        "runs_in_range": 7,
        "first_date": "2025-01-01T00:00:00Z",
        "last_date": "2025-01-02T00:00:00Z",
        "error": False,
        "guard": None,
        "facts": {
            "from_date": "2025-01-01T00:00:00Z",
            "to_date": "2025-01-07T00:00:00Z",
            "reprocess_behavior": "none",
            "max_active_runs": 2,
            "run_backwards": True,
            "approvers": ["b"],
            "ticket": "CHG-1",
            "state": "active",
            "expected_runs": 9,
            "request": {
                "dag_id": "d",
                "from_date": "2025-01-01T00:00:00Z",
                "to_date": "2025-01-07T00:00:00Z",
                "reprocess_behavior": "none",
                "max_active_runs": 2,
                "run_backwards": True,
            },
        },
    }


def test_nothing_to_reprocess_is_succeeded_without_a_backfill() -> None:
    plan = make_plan([spec()], Policy(), world(dry={"s": DryRun((), 7)}))
    assert decided(plan) == [("s", "noop", "Succeeded", "nothing to reprocess", None)]
    assert (plan.items[0].runs_to_create, plan.items[0].runs_in_range, plan.items[0].first_date) == (0, 7, None)


@pytest.mark.parametrize(
    ("expected", "rule", "count", "reason"),
    [
        (5, None, 6, "the dry run counts 6 runs; expected_runs is 5"),
        (6, None, 6, None),
        (None, Rule(("d", "e*"), max_runs=4), 5, "the dry run counts 5 runs; the policy allows at most 4 for d, e*"),
        (None, Rule(("d",), max_runs=5), 5, None),
        (10, Rule(("d",), max_runs=3), 4, "the dry run counts 4 runs; the policy allows at most 3 for d"),
        (None, Rule(("other",), max_runs=1), 5, None),
        (None, Rule(("d",)), 5, None),
    ],
)
def test_run_limits_refuse_the_create(expected: int | None, rule: Rule | None, count: int, reason: str | None) -> None:
    policy = Policy(rules=(rule,) if rule else ())
    plan = make_plan([spec(expected_runs=expected)], policy, world(dry={"s": dates(count)}))
    if reason is None:
        assert [i.kind for i in plan.items] == [Kind.CREATE]
    else:
        assert decided(plan) == [("s", "refuse", "Blocked", reason, None)]
        assert plan.items[0].runs_to_create == count


@pytest.mark.parametrize(
    ("info", "reason", "error"),
    [
        (None, "DAG d does not exist in Airflow", True),
        (replace(OK, is_stale=True), "DAG d is stale: its runs cannot start", True),
        (replace(OK, has_import_errors=True), "DAG d is failing to import: its runs cannot start", True),
        (replace(OK, is_backfillable=False), "DAG d has no periodic schedule, so it cannot be backfilled", True),
        (
            replace(OK, is_paused=True),
            "DAG d is paused: a backfill's runs would wait forever; unpause the DAG first",
            False,
        ),
    ],
)
def test_a_dag_that_cannot_run_blocks_the_head(info: DagInfo | None, reason: str, error: bool) -> None:
    plan = make_plan([spec()], Policy(), world(dry={"s": dates(3)}, info=info))
    assert decided(plan) == [("s", "blocked", "Blocked", reason, None)]
    assert plan.items[0].error is error


def test_a_dry_run_refused_by_airflow_blocks_with_its_message() -> None:
    plan = make_plan([spec()], Policy(), world(dry={"s": DryRun(error="DAG d depends on past")}))
    assert decided(plan) == [("s", "blocked", "Blocked", "Airflow refuses it: DAG d depends on past", None)]
    assert plan.items[0].error is True


@pytest.mark.parametrize(
    ("obs", "cause"),
    [
        (None, "DAG not observed"),
        (DagObservation("d", OK, error="503 Service Unavailable"), "503 Service Unavailable"),
    ],
)
def test_incomplete_observation_blocks_live_specs_and_keeps_finished_ones(
    obs: DagObservation | None, cause: str
) -> None:
    why = f"observation incomplete: {cause}"
    done = Binding("done", "d", 4, Phase.SUCCEEDED, reason="3 run(s) succeeded", runs=RunSummary({"success": 3}))
    w = World({"d": obs} if obs else {}, {"done": done}, {}, {}, now=NOW)
    plan = make_plan([spec("done"), spec("live")], Policy(), w)
    assert decided(plan) == [
        ("done", "noop", "Succeeded", "3 run(s) succeeded", 4),
        ("live", "blocked", "Blocked", why, None),
    ]
    assert [i.error for i in plan.items] == [False, True]
    assert plan.items[0].facts["runs"] == RunSummary({"success": 3}).as_json()
    assert plan.findings == (
        Finding("observation-incomplete", "d", f"DAG d was not fully observed: {cause}", cause=cause),
    )
    assert not plan.complete


def test_only_finished_specs_need_no_observation() -> None:
    done = Binding("done", "d", 4, Phase.CANCELLED)
    plan = make_plan([spec("done")], Policy(), World({}, {"done": done}, {}, {}, now=NOW))
    assert decided(plan) == [("done", "noop", "Cancelled", "finished", 4)]
    assert plan.findings == ()


# --- queueing -------------------------------------------------------------------------------------------


def test_queue_behind_the_head_being_created_then_behind_its_backfill() -> None:
    a, b = spec("a"), spec("b", from_date=JAN1 + timedelta(days=40), to_date=JAN1 + timedelta(days=41))
    first = make_plan([a, b], Policy(), world(dry={"a": dates(7), "b": dates(2)}))
    assert decided(first) == [("a", "create", "Pending", "", None), ("b", "wait", "Queued", "queued behind a", None)]
    running = world(backfill(3, a), bindings={"a": bound("a", 3)}, dry={"b": dates(2)})
    assert decided(make_plan([a, b], Policy(), running)) == [
        ("a", "noop", "Running", "in sync", 3),
        ("b", "wait", "Queued", "queued behind a (backfill #3)", None),
    ]


def test_queue_order_is_the_given_order_not_the_names() -> None:
    z, a = spec("z"), spec("a", from_date=JAN1 + timedelta(days=40), to_date=JAN1 + timedelta(days=41))
    plan = make_plan([z, a], Policy(), world(dry={"z": dates(7), "a": dates(2)}))
    assert decided(plan) == [("z", "create", "Pending", "", None), ("a", "wait", "Queued", "queued behind z", None)]


def test_queue_behind_a_refused_or_blocked_head() -> None:
    a, b = spec("a", expected_runs=1), spec("b", from_date=JAN1 + timedelta(days=40))
    plan = make_plan([a, b], Policy(), world(dry={"a": dates(7), "b": dates(2)}))
    assert decided(plan) == [
        ("a", "refuse", "Blocked", "the dry run counts 7 runs; expected_runs is 1", None),
        ("b", "wait", "Queued", "queued behind a", None),
    ]
    blocked = make_plan([a, b], Policy(), world(dry={"a": DryRun(error="no"), "b": dates(2)}))
    assert [i.reason for i in blocked.items] == ["Airflow refuses it: no", "queued behind a"]


def test_specs_queued_behind_a_head_that_needs_a_human_are_stuck_with_it() -> None:
    a = spec("a", expected_runs=1)
    b, c = spec("b", from_date=JAN1 + timedelta(days=40)), spec("c", from_date=JAN1 + timedelta(days=50))
    refused = make_plan([a, b, c], Policy(), world(dry={"a": dates(7)}))
    assert {name: head.spec for name, head in stuck(refused).items()} == {"b": "a", "c": "a"}
    paused = make_plan([spec("a", state=DesiredState.PAUSED), b], Policy(), world())
    assert {name: (head.phase.value, head.reason) for name, head in stuck(paused).items()} == {
        "b": ("Paused", "paused before it was created; set state: active to create it")
    }
    running = make_plan([a, b], Policy(), world(backfill(3, a), bindings={"a": bound("a", 3)}))
    assert [i.reason for i in running.items] == ["in sync", "queued behind a (backfill #3)"]
    assert stuck(running) == {}  # a's backfill runs: b moves when it ends
    unmanaged = make_plan([b], Policy(), world(backfill(9, spec("other", from_date=JAN1 - timedelta(days=9)))))
    assert [i.reason for i in unmanaged.items] == ["queued behind unmanaged backfill #9 (backfill #9)"]
    assert stuck(unmanaged) == {}  # Airflow finishes the unmanaged backfill by itself


def test_a_finished_head_lets_the_next_spec_create() -> None:
    a, b = spec("a"), spec("b", from_date=JAN1 + timedelta(days=40))
    w = world(backfill(3, a, active=False), bindings={"a": bound("a", 3)}, dry={"b": dates(2)})
    w = replace(w, observations={"d": replace(w.observations["d"], runs={3: RunSummary({"success": 7})})})
    plan = make_plan([a, b], Policy(), w)
    assert decided(plan) == [
        ("a", "noop", "Succeeded", "7 run(s) succeeded", 3),
        ("b", "create", "Pending", "", None),
    ]


def test_specs_on_other_dags_do_not_queue_and_items_sort_by_dag() -> None:
    x, y = spec("x", dag="zeta"), spec("y", dag="alpha")
    obs = {
        "zeta": DagObservation("zeta", replace(OK, dag_id="zeta")),
        "alpha": DagObservation("alpha", replace(OK, dag_id="alpha")),
    }
    plan = make_plan([x, y], Policy(), World(obs, {}, {"x": dates(1), "y": dates(1)}, {}, now=NOW))
    assert [(i.spec, i.kind.value) for i in plan.items] == [("y", "create"), ("x", "create")]


def test_unmanaged_active_backfill_blocks_the_queue_and_is_reported() -> None:
    foreign = replace(backfill(9, spec(from_date=T0, to_date=T0)), max_active_runs=1)
    plan = make_plan([spec()], Policy(), world(foreign, dry={"s": dates(7)}))
    assert decided(plan) == [("s", "wait", "Queued", "queued behind unmanaged backfill #9 (backfill #9)", None)]
    assert plan.findings == (
        Finding(
            "unmanaged",
            "d",
            "unmanaged active backfill #9 blocks this DAG's queue; backfillctl never touches it",
            None,
            9,
        ),
    )


def test_finished_unmanaged_backfills_are_not_reported() -> None:
    foreign = backfill(9, spec(from_date=T0, to_date=T0), active=False)
    plan = make_plan([spec()], Policy(), world(foreign, dry={"s": dates(7)}))
    assert [i.kind for i in plan.items] == [Kind.CREATE]
    assert plan.findings == ()


def test_unbound_spec_states_create_nothing() -> None:
    plan = make_plan(
        [spec("c", state=DesiredState.CANCELLED), spec("p", state=DesiredState.PAUSED), spec("go")],
        Policy(),
        world(dry={"c": dates(1), "p": dates(1), "go": dates(7)}),
    )
    assert decided(plan) == [
        ("c", "noop", "Cancelled", "cancelled before it was created", None),
        ("p", "noop", "Paused", "paused before it was created; set state: active to create it", None),
        ("go", "wait", "Queued", "queued behind p", None),  # a paused spec keeps its place in the queue
    ]
    without_paused = make_plan(
        [spec("c", state=DesiredState.CANCELLED), spec("go")], Policy(), world(dry={"go": dates(7)})
    )
    assert [i.kind for i in without_paused.items] == [Kind.NOOP, Kind.CREATE]  # a cancelled one does not


# --- adoption -------------------------------------------------------------------------------------------


def test_an_unbound_matching_backfill_is_adopted_not_created_again() -> None:
    s = spec()
    plan = make_plan([s], Policy(), world(backfill(5, s), dry={"s": dates(7)}))
    assert decided(plan) == [("s", "adopt", "Running", "adopt backfill #5 (matches the spec, not bound)", 5)]
    paused = make_plan([s], Policy(), world(backfill(5, s, paused=True)))
    assert decided(paused) == [("s", "adopt", "Paused", "adopt backfill #5 (matches the spec, not bound)", 5)]
    assert paused.findings == ()


def test_adopting_a_finished_backfill_takes_its_outcome_from_the_runs() -> None:
    s = spec()
    runs = {5: RunSummary({"success": 5, "failed": 2}, failed_dates=(JAN1, JAN1 + timedelta(days=3)))}
    plan = make_plan([s], Policy(), world(backfill(5, s, active=False), runs=runs))
    assert decided(plan) == [
        (
            "s",
            "adopt",
            "CompletedWithFailures",
            "adopt backfill #5 (matches the spec, not bound); failed: 2025-01-01, 2025-01-04",
            5,
        )
    ]
    assert plan.items[0].facts["runs"]["counts"] == {"failed": 2, "success": 5}


def test_adoption_after_an_intent_only_takes_backfills_created_after_it() -> None:
    s = spec()
    before, after = backfill(1, s, active=False), backfill(2, s)
    intent = T0 + timedelta(minutes=90)  # backfill 1 was created at T0+1h, backfill 2 at T0+2h
    plan = make_plan([s], Policy(), world(before, after, intents={"s": intent}))
    assert decided(plan) == [("s", "adopt", "Running", "adopt backfill #2 (intent without outcome)", 2)]
    exactly = make_plan([s], Policy(), world(before, after, intents={"s": T0 + timedelta(hours=2)}))
    assert [i.backfill_id for i in exactly.items] == [2]
    too_late = make_plan([s], Policy(), world(before, intents={"s": intent}, dry={"s": dates(7)}))
    assert [i.kind for i in too_late.items] == [Kind.CREATE]


def test_adoptable_prefers_active_then_newest_and_skips_taken() -> None:
    s = spec()
    old, newer, active = backfill(1, s, active=False), backfill(2, s, active=False), backfill(3, s)
    assert adoptable(s, [old, newer, active], set(), None) == active
    assert adoptable(s, [old, newer], set(), None) == newer
    assert adoptable(s, [old, newer], {2}, None) == old
    assert adoptable(s, [old], {1}, None) is None
    assert adoptable(s, [replace(newer, created_at=old.created_at)], set(), None) == replace(
        newer, created_at=old.created_at
    )
    same_time = [replace(old, id=7), replace(old, id=8)]
    assert adoptable(s, same_time, set(), None) == same_time[1]


@pytest.mark.parametrize(
    "change",
    [
        {"dag_id": "other"},
        {"from_date": JAN1 - timedelta(days=1)},
        {"to_date": JAN1},
        {"reprocess_behavior": "failed"},
        {"max_active_runs": 3},
        {"dag_run_conf": {"x": 1}},
    ],
)
def test_a_backfill_that_differs_in_one_field_does_not_match(change: dict[str, Any]) -> None:
    s = spec()
    assert matches(s, backfill(1, s))
    assert not matches(s, replace(backfill(1, s), **change))


def test_conf_matching_ignores_key_order_and_treats_empty_as_unset() -> None:
    s = spec(dag_run_conf=MappingProxyType({"b": 1, "a": {"y": 2, "x": 1}}))
    b = replace(backfill(1, s), dag_run_conf={"a": {"x": 1, "y": 2}, "b": 1})
    assert matches(s, b)
    assert matches(spec(dag_run_conf=MappingProxyType({})), replace(b, dag_run_conf=None))
    assert matches(spec(), replace(b, dag_run_conf={}))


def test_a_backfill_bound_to_another_spec_is_never_adopted() -> None:
    a, b = spec("a"), spec("b")  # same request: b's would-be backfill is a's
    w = world(backfill(5, a), bindings={"a": bound("a", 5)}, dry={"b": dates(7)})
    assert decided(make_plan([a, b], Policy(), w)) == [
        ("a", "noop", "Running", "in sync", 5),
        ("b", "wait", "Queued", "queued behind a (backfill #5)", None),
    ]


def test_an_adopted_backfill_is_the_queue_occupant() -> None:
    a, b = spec("a"), spec("b", from_date=JAN1 + timedelta(days=40))
    plan = make_plan([a, b], Policy(), world(backfill(5, a), dry={"b": dates(2)}))
    assert decided(plan)[1] == ("b", "wait", "Queued", "queued behind a (backfill #5)", None)
    assert plan.findings == ()


def test_binding_without_backfill_id_can_still_adopt() -> None:
    s = spec()
    w = world(backfill(5, s), bindings={"s": Binding("s", "d", None, Phase.PENDING)})
    assert [i.kind for i in make_plan([s], Policy(), w).items] == [Kind.ADOPT]


# --- steering a bound backfill ----------------------------------------------------------------------------


def test_bound_backfill_missing_from_airflow_is_blocked() -> None:
    plan = make_plan([spec()], Policy(), world(bindings={"s": bound("s", 8)}))
    assert decided(plan) == [("s", "blocked", "Blocked", "backfill #8 is no longer in Airflow", 8)]
    assert plan.items[0].error is True


@pytest.mark.parametrize(
    ("state", "paused", "applied", "expected"),
    [
        (DesiredState.ACTIVE, False, "active", ("noop", "Running", "in sync")),
        (DesiredState.PAUSED, False, "active", ("pause", "Paused", "spec says paused")),
        (DesiredState.PAUSED, True, "paused", ("noop", "Paused", "spec says paused")),
        (DesiredState.ACTIVE, True, "paused", ("unpause", "Running", "spec says active again")),
        (DesiredState.CANCELLED, False, "active", ("cancel", "Cancelled", "spec says cancelled")),
        (DesiredState.CANCELLED, True, "paused", ("cancel", "Cancelled", "spec says cancelled")),
        (DesiredState.ACTIVE, True, "active", ("noop", "Paused", HAND_PAUSED)),
    ],
)
def test_steering(state: DesiredState, paused: bool, applied: str, expected: tuple[str, str, str]) -> None:
    s = spec(state=state)
    plan = make_plan([s], Policy(), world(backfill(4, s, paused=paused), bindings={"s": bound("s", 4, applied)}))
    assert [(i.kind.value, i.phase.value, i.reason, i.backfill_id) for i in plan.items] == [(*expected, 4)]


def test_a_hand_pause_is_a_stop_reported_and_never_healed() -> None:
    s = spec()
    w = world(backfill(4, s, paused=True), bindings={"s": bound("s", 4)})
    report = make_plan([s], Policy(), w)
    assert report.findings == (Finding("drift", "d", "backfill #4 was paused in Airflow (who: not recorded)", "s", 4),)
    heal = make_plan([s], Policy(drift=DriftMode.HEAL), w)
    assert decided(heal) == [("s", "noop", "Paused", HAND_PAUSED, 4)]
    assert heal.findings == report.findings


def test_heal_never_unpauses_a_pause_the_event_log_names_a_user_for() -> None:
    s = spec()
    hand = HandPause("warehouse-oncall", T0)
    w = replace(world(backfill(4, s, paused=True), bindings={"s": bound("s", 4)}), holds=Holds(hand_pauses={4: hand}))
    heal = make_plan([s], Policy(drift=DriftMode.HEAL), w)
    said = "paused by hand in Airflow by warehouse-oncall at 2026-11-01T00:00:00Z"
    lift = "lift: unpause it in Airflow, or a reviewed `resume` naming its stop"
    assert decided(heal) == [("s", "noop", "Paused", f"{said}; a stop: never unpaused by backfillctl ({lift})", 4)]
    assert heal.findings == (Finding("drift", "d", f"backfill #4 was {said}", "s", 4),)


def test_cancel_with_running_runs_says_they_will_finish() -> None:
    s = spec(state=DesiredState.CANCELLED)
    w = world(
        backfill(4, s), bindings={"s": bound("s", 4)}, runs={4: RunSummary({"running": 2, "queued": 3, "success": 1})}
    )
    plan = make_plan([s], Policy(), w)
    assert plan.findings == (
        Finding("still-running", "d", "cancel fails only queued runs; 2 running run(s) will finish", "s", 4),
    )
    assert plan.items[0].facts["runs"]["counts"] == {"queued": 3, "running": 2, "success": 1}
    quiet = world(backfill(4, s), bindings={"s": bound("s", 4)}, runs={4: RunSummary({"queued": 3})})
    assert make_plan([s], Policy(), quiet).findings == ()


def test_all_runs_finished_but_not_yet_completed_says_so() -> None:
    s = spec()
    w = world(backfill(4, s), bindings={"s": bound("s", 4)}, runs={4: RunSummary({"success": 7})})
    assert decided(make_plan([s], Policy(), w)) == [
        ("s", "noop", "Running", "all runs finished; Airflow marks the backfill complete within 30 s", 4)
    ]
    partly = world(backfill(4, s), bindings={"s": bound("s", 4)}, runs={4: RunSummary({"success": 6, "queued": 1})})
    assert [i.reason for i in make_plan([s], Policy(), partly).items] == ["in sync"]


@pytest.mark.parametrize(
    ("runs", "applied", "paused", "phase", "reason"),
    [
        (RunSummary({"success": 7}), "active", False, "Succeeded", "7 run(s) succeeded"),
        (
            RunSummary({"success": 5, "failed": 2}, failed_dates=(JAN1, JAN1 + timedelta(days=2))),
            "active",
            False,
            "CompletedWithFailures",
            "failed: 2025-01-01, 2025-01-03",
        ),
        (
            RunSummary({"success": 1, "failed": 6}, never_started=6),
            "cancelled",
            True,
            "Cancelled",
            "cancelled; 6 queued run(s) never started",
        ),
        (
            RunSummary({"failed": 6}, never_started=6),
            "active",
            True,
            "Cancelled",
            "cancelled; 6 queued run(s) never started",
        ),
        (
            RunSummary({"failed": 1}, failed_dates=(JAN1,)),
            "active",
            True,
            "CompletedWithFailures",
            "failed: 2025-01-01",
        ),
        (  # a large backfill lists its first failures and counts the rest
            RunSummary({"success": 1, "failed": 9}, failed_dates=(JAN1, JAN1 + timedelta(days=1)), never_started=3),
            "active",
            False,
            "CompletedWithFailures",
            "failed: 2025-01-01, 2025-01-02 and 4 more",
        ),
        (RunSummary({"success": 2}), "cancelled", False, "Cancelled", "cancelled; 0 queued run(s) never started"),
        (RunSummary({}), "active", False, "Succeeded", "0 run(s) succeeded"),
    ],
)
def test_a_finished_backfill_takes_its_phase_from_the_runs(
    runs: RunSummary, applied: str, paused: bool, phase: str, reason: str
) -> None:
    s = spec()
    w = world(backfill(4, s, active=False, paused=paused), bindings={"s": bound("s", 4, applied)}, runs={4: runs})
    plan = make_plan([s], Policy(), w)
    assert decided(plan) == [("s", "noop", phase, reason, 4)]
    assert plan.items[0].facts["runs"] == runs.as_json()


def test_terminal_phase() -> None:
    b = backfill(1)
    assert terminal_phase(b, RunSummary({"success": 1}), DesiredState.CANCELLED) is Phase.CANCELLED
    assert (
        terminal_phase(replace(b, is_paused=True), RunSummary({"failed": 1}, never_started=1), None) is Phase.CANCELLED
    )
    assert terminal_phase(replace(b, is_paused=True), RunSummary({"success": 1}), None) is Phase.SUCCEEDED
    assert (
        terminal_phase(b, RunSummary({"failed": 1}, never_started=1), DesiredState.ACTIVE)
        is Phase.COMPLETED_WITH_FAILURES
    )
    assert terminal_phase(b, RunSummary({"failed": 1}), DesiredState.PAUSED) is Phase.COMPLETED_WITH_FAILURES


def test_a_recorded_terminal_phase_is_kept_without_looking_at_airflow() -> None:
    done = Binding(
        "s",
        "d",
        4,
        Phase.COMPLETED_WITH_FAILURES,
        reason="failed: 2025-01-02",
        runs=RunSummary({"success": 6, "failed": 1}),
    )
    plan = make_plan([spec()], Policy(), world(bindings={"s": done}))
    assert decided(plan) == [("s", "noop", "CompletedWithFailures", "failed: 2025-01-02", 4)]
    assert plan.items[0].facts["runs"]["total"] == 7
    empty = Binding("s", "d", None, Phase.SUCCEEDED)
    assert make_plan([spec()], Policy(), world(bindings={"s": empty})).items[0].runs == RunSummary({})


# --- findings about the DAG and deleted specs --------------------------------------------------------------


def test_a_paused_dag_is_reported_while_work_is_left() -> None:
    s = spec()
    paused = replace(OK, is_paused=True)
    w = world(backfill(4, s), bindings={"s": bound("s", 4)}, info=paused)
    assert make_plan([s], Policy(), w).findings == (
        Finding("dag-paused", "d", "DAG d is paused: its backfill runs stay queued until it is unpaused"),
    )
    finished = world(bindings={"s": bound("s", 4, phase=Phase.SUCCEEDED)}, info=paused)
    assert make_plan([s], Policy(), finished).findings == ()


def test_a_deleted_spec_with_a_running_backfill_is_orphaned_and_nothing_is_cancelled() -> None:
    gone = spec("gone")
    w = world(backfill(6, gone), bindings={"gone": bound("gone", 6)})
    plan = make_plan([], Policy(), w)
    message = "spec gone was deleted; backfill #6 keeps running (a deleted spec cancels nothing)"
    assert plan.items == (Item("gone", "d", Kind.NOOP, Phase.ORPHANED, message, 6),)
    assert plan.findings == (Finding("orphaned", "d", message, "gone", 6),)
    assert plan.changes == ()


@pytest.mark.parametrize(
    "case",
    ["finished backfill", "terminal binding", "backfill gone", "dag not observed"],
)
def test_deleted_specs_that_are_not_orphans(case: str) -> None:
    gone = spec("gone")
    w = {
        "finished backfill": world(backfill(6, gone, active=False), bindings={"gone": bound("gone", 6)}),
        "terminal binding": world(backfill(6, gone), bindings={"gone": bound("gone", 6, phase=Phase.CANCELLED)}),
        "backfill gone": world(bindings={"gone": bound("gone", 6)}),
        "dag not observed": World({}, {"gone": bound("gone", 6)}, {}, {}, now=NOW),
    }[case]
    plan = make_plan([], Policy(), w)
    assert (plan.items, [f for f in plan.findings if f.kind == "orphaned"]) == ((), [])


def test_findings_are_sorted_by_dag_kind_spec_and_backfill() -> None:
    a, b = spec("a", dag="b-dag"), spec("b", dag="a-dag")
    obs = {
        "a-dag": DagObservation("a-dag", replace(OK, dag_id="a-dag", is_paused=True), (backfill(2, b, paused=True),)),
        "b-dag": DagObservation("b-dag", replace(OK, dag_id="b-dag"), (backfill(1, a, paused=True),)),
    }
    w = World(
        obs,
        {"a": Binding("a", "b-dag", 1, Phase.RUNNING), "b": Binding("b", "a-dag", 2, Phase.RUNNING)},
        {},
        {},
        now=NOW,
    )
    plan = make_plan([a, b], Policy(), w)
    assert [(f.dag_id, f.kind) for f in plan.findings] == [
        ("a-dag", "dag-paused"),
        ("a-dag", "drift"),
        ("b-dag", "drift"),
    ]


# --- the plan as a value ----------------------------------------------------------------------------------


def test_summary_counts_changes_and_order_of_changes() -> None:
    a, p = spec("a"), spec("p", dag="e", state=DesiredState.PAUSED)
    obs = {
        "d": DagObservation("d", OK),
        "e": DagObservation("e", replace(OK, dag_id="e"), (backfill(3, p),)),
    }
    w = World(obs, {"p": Binding("p", "e", 3, Phase.RUNNING)}, {"a": dates(7)}, {}, now=NOW)
    plan = make_plan([a, p, spec("q", from_date=T0)], Policy(), w)
    assert [(i.spec, i.kind.value) for i in plan.items] == [("a", "create"), ("q", "wait"), ("p", "pause")]
    assert [i.spec for i in iter_changes(plan)] == ["p", "a"]
    assert [i.spec for i in plan.changes] == ["a", "p"]
    assert summary_counts(plan) == {
        "create": 1,
        "pause": 1,
        "unpause": 0,
        "cancel": 0,
        "adopt": 0,
        "queued": 1,
        "blocked": 0,
        "refused": 0,
        "in_sync": 0,
    }
    document = plan.as_json()
    assert list(document) == ["format_version", "checksum", "complete", "items", "findings", "summary", "budgets"]
    assert (document["format_version"], document["checksum"]) == (1, plan.checksum())
    assert [i["spec"] for i in document["items"]] == ["a", "q", "p"]
    assert json.loads(json.dumps(document)) == document


def test_blocked_and_refused_both_count_as_blocked() -> None:
    refuse = make_plan([spec(expected_runs=1)], Policy(), world(dry={"s": dates(2)}))
    blocked = make_plan([spec()], Policy(), world(info=None))
    assert (summary_counts(refuse)["blocked"], summary_counts(refuse)["refused"]) == (1, 1)
    assert (summary_counts(blocked)["blocked"], summary_counts(blocked)["refused"]) == (1, 0)
    assert summary_counts(make_plan([spec()], Policy(), world(dry={"s": DryRun((), 7)})))["in_sync"] == 1
    adopt = make_plan([spec()], Policy(), world(backfill(1)))
    assert (summary_counts(adopt)["adopt"], [i.spec for i in adopt.changes]) == (1, ["s"])


def test_checksum_covers_decisions_not_progress() -> None:
    s = spec()
    base = world(backfill(4, s), bindings={"s": bound("s", 4)}, runs={4: RunSummary({"queued": 7})})
    later = world(backfill(4, s), bindings={"s": bound("s", 4)}, runs={4: RunSummary({"queued": 2, "success": 5})})
    assert make_plan([s], Policy(), base).checksum() == make_plan([s], Policy(), later).checksum()
    create = make_plan([s], Policy(), world(dry={"s": dates(7)}))
    fewer = make_plan([s], Policy(), world(dry={"s": dates(6)}))
    refused = make_plan([spec(expected_runs=1)], Policy(), world(dry={"s": dates(7)}))
    other_conf = make_plan([spec(dag_run_conf=MappingProxyType({"a": 1}))], Policy(), world(dry={"s": dates(7)}))
    checksums = {p.checksum() for p in (create, fewer, refused, other_conf, make_plan([s], Policy(), base))}
    assert len(checksums) == 5
    assert len(create.checksum()) == 16
    blocked = make_plan([s], Policy(), world(info=None))
    assert blocked.checksum() != make_plan([], Policy(), world()).checksum()
    pending = make_plan([s], Policy(), world())
    assert pending.checksum() == make_plan([], Policy(), world()).checksum()  # a dry-run request decides nothing


# --- edges found by mutation testing ---------------------------------------------------------------------


def test_a_bound_spec_first_in_the_queue_does_not_stop_adoption_for_the_next() -> None:
    a, b = spec("a"), spec("b", from_date=JAN1 + timedelta(days=40))
    w = world(backfill(3, a, active=False), backfill(4, b), bindings={"a": bound("a", 3)})
    assert [(i.spec, i.kind.value, i.backfill_id) for i in make_plan([a, b], Policy(), w).items] == [
        ("a", "noop", 3),
        ("b", "adopt", 4),
    ]


def test_every_orphan_is_found_not_only_those_before_a_live_spec() -> None:
    live, gone = spec("a-live"), spec("z-gone", dag="e")
    obs = {
        "d": DagObservation("d", OK, (backfill(1, live),)),
        "e": DagObservation("e", replace(OK, dag_id="e"), (backfill(2, gone),)),
    }
    w = World(obs, {"a-live": bound("a-live", 1), "z-gone": Binding("z-gone", "e", 2, Phase.RUNNING)}, {}, {}, now=NOW)
    plan = make_plan([live], Policy(), w)
    assert [(i.spec, i.phase.value) for i in plan.items] == [("a-live", "Running"), ("z-gone", "Orphaned")]


def test_a_finished_backfill_without_observed_runs_counts_nothing() -> None:
    s = spec()
    plan = make_plan([s], Policy(), world(backfill(4, s, active=False), bindings={"s": bound("s", 4)}))
    assert decided(plan) == [("s", "noop", "Succeeded", "0 run(s) succeeded", 4)]
    assert plan.items[0].facts["runs"]["total"] == 0


def test_findings_of_one_kind_on_one_dag_sort_by_backfill() -> None:
    """Airflow allows one active backfill per DAG; should two ever show up, the order is still stable."""
    foreign = spec(from_date=T0, to_date=T0)
    plan = make_plan([spec()], Policy(), world(backfill(9, foreign), backfill(8, foreign), dry={"s": dates(1)}))
    assert [(f.kind, f.backfill_id) for f in plan.findings] == [("unmanaged", 8), ("unmanaged", 9)]


def test_summary_counts_every_kind() -> None:
    u, c = spec("u"), spec("c", dag="e", state=DesiredState.CANCELLED)
    obs = {
        "d": DagObservation("d", OK, (backfill(1, u, paused=True),)),
        "e": DagObservation("e", replace(OK, dag_id="e"), (backfill(2, c),)),
    }
    bindings = {"u": bound("u", 1, "paused"), "c": Binding("c", "e", 2, Phase.RUNNING)}
    plan = make_plan([u, c], Policy(), World(obs, bindings, {}, {}, now=NOW))
    assert [(i.spec, i.kind.value) for i in plan.items] == [("u", "unpause"), ("c", "cancel")]
    counts = summary_counts(plan)
    assert (counts["unpause"], counts["cancel"], counts["pause"], counts["create"]) == (1, 1, 0, 0)


def test_finding_json() -> None:
    finding = Finding("drift", "d", "backfill #4 was paused in Airflow (who: not recorded)", "s", 4)
    assert finding.as_json() == {
        "kind": "drift",
        "dag_id": "d",
        "spec": "s",
        "backfill_id": 4,
        "message": "backfill #4 was paused in Airflow (who: not recorded)",
    }
    document = make_plan([spec()], Policy(), world(backfill(4, spec(), paused=True), bindings={"s": bound("s", 4)}))
    assert document.as_json()["findings"] == [finding.as_json()]
