"""Guards in the planner (pure): windows, freezes and the scheduler pause and resume; budgets queue creates."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from controller.commands.reconcile.reconciler import PassResult
from controller.core.model.airflow import DagInfo, DagRun
from controller.core.model.binding import Binding, Phase
from controller.core.model.guards import Budget, Freeze, Guard, GuardKind, SchedulerGuard, SchedulerHealth, Window
from controller.core.model.policy import DriftMode, Policy
from controller.core.model.spec import DesiredState
from controller.core.plan.queue import make_plan
from controller.core.plan.values import FindingKind, Kind, Plan
from controller.core.plan.world import DagObservation, World, run_label
from controller.core.render.plan import plan_markdown, plan_text
from controller.core.render.status import status_rows
from tests.core.plan.test_plan import backfill, dates, spec

CLOSED = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)  # a Tuesday, 13:00 in Berlin
OPEN = datetime(2026, 12, 1, 20, 0, tzinfo=UTC)  # 21:00 in Berlin
NIGHTS = Window(("mon", "tue", "wed", "thu", "fri"), "20:00", "06:00", "Europe/Berlin")
WINDOWED = Policy(windows=(NIGHTS,))
FROZEN = Freeze(datetime(2026, 11, 30, tzinfo=UTC), datetime(2026, 12, 2, tzinfo=UTC), "year-end close")
OK = DagInfo("d", False, False, False, True, False)


def world_at(now: datetime, *backfills: object, dag: str = "d", **kw: object) -> World:
    obs = DagObservation(dag, OK, tuple(backfills))  # type: ignore[arg-type]
    return World({dag: obs}, now=now, **kw)  # type: ignore[arg-type]


def rows(plan: Plan) -> list[tuple[str, str, str, str, str | None]]:
    return [
        (i.spec, i.kind.value, i.phase.value, i.reason, i.as_json()["guard"]) for i in plan.items
    ]  # as the plan says


def bound(name: str = "s", bf: int = 7, guard: Guard | None = None, applied: str = "active") -> dict[str, Binding]:
    return {name: Binding(name, "d", bf, Phase.RUNNING, DesiredState(applied), guard=guard)}


def test_no_create_outside_a_window() -> None:
    plan = make_plan([spec()], WINDOWED, world_at(CLOSED, dry_runs={"s": dates(7)}))
    assert rows(plan) == [("s", "wait", "Queued", "queued by window until 20:00 Europe/Berlin", "window")]
    assert plan.items[0].runs_to_create == 7  # the load is still shown before anyone approves


def test_create_inside_a_window_and_always_overrides_the_policy() -> None:
    assert make_plan([spec()], WINDOWED, world_at(OPEN, dry_runs={"s": dates(7)})).items[0].kind is Kind.CREATE
    always = spec(windows=())
    assert make_plan([always], WINDOWED, world_at(CLOSED, dry_runs={"s": dates(7)})).items[0].kind is Kind.CREATE


def test_a_window_closing_pauses_and_opening_resumes() -> None:
    s, running = spec(), backfill(7)
    paused = backfill(7, paused=True)
    plan = make_plan([s], WINDOWED, world_at(CLOSED, running, bindings=bound()))
    assert rows(plan) == [("s", "pause", "Paused", "paused by window until 20:00 Europe/Berlin", "window")]
    held = make_plan([s], WINDOWED, world_at(CLOSED, paused, bindings=bound(guard=Guard(GuardKind.WINDOW))))
    assert rows(held) == [("s", "noop", "Paused", "paused by window until 20:00 Europe/Berlin", "window")]
    assert held.findings == ()  # a guard's pause is not drift
    resumed = make_plan([s], WINDOWED, world_at(OPEN, paused, bindings=bound(guard=Guard(GuardKind.WINDOW))))
    assert rows(resumed) == [("s", "unpause", "Running", "resumed: window no longer applies", "window")]


HAND_PAUSED = (
    "paused in Airflow (who: not recorded); a stop: never unpaused by backfillctl "
    "(lift: unpause it in Airflow, or a reviewed `resume` naming its stop)"
)


def test_a_hand_pause_stays_drift_and_state_paused_wins() -> None:
    paused = backfill(7, paused=True)
    plan = make_plan([spec()], WINDOWED, world_at(OPEN, paused, bindings=bound()))
    assert rows(plan) == [
        (
            "s",
            "noop",
            "Paused",
            HAND_PAUSED,
            None,
        )
    ]
    assert [f.kind for f in plan.findings] == [FindingKind.DRIFT]
    by_spec = make_plan([spec(state=DesiredState.PAUSED)], WINDOWED, world_at(CLOSED, backfill(7), bindings=bound()))
    assert rows(by_spec) == [("s", "pause", "Paused", "spec says paused", None)]
    # spec paused, then active again while the window is closed: stays paused, by the window now
    again = make_plan([spec()], WINDOWED, world_at(CLOSED, paused, bindings=bound(applied="paused")))
    assert rows(again) == [("s", "noop", "Paused", "paused by window until 20:00 Europe/Berlin", "window")]


def test_freeze_pauses_even_inside_a_window_and_its_end_resumes() -> None:
    policy = replace(WINDOWED, freezes=(FROZEN,))
    plan = make_plan([spec()], policy, world_at(OPEN, backfill(7), bindings=bound()))
    rule = "freeze 'year-end close'"
    assert rows(plan) == [("s", "pause", "Paused", f"paused by {rule} until 2026-12-02T00:00:00Z", rule)]
    after = datetime(2026, 12, 2, 20, 0, tzinfo=UTC)
    resumed = make_plan(
        [spec()],
        policy,
        world_at(after, backfill(7, paused=True), bindings=bound(guard=Guard(GuardKind.FREEZE, "year-end close"))),
    )
    assert rows(resumed) == [("s", "unpause", "Running", f"resumed: {rule} no longer applies", rule)]


BRAKE = Policy(scheduler_guard=SchedulerGuard(True))


def test_scheduler_brake() -> None:
    sick = SchedulerHealth("unhealthy", CLOSED)
    plan = make_plan([spec()], BRAKE, world_at(CLOSED, backfill(7), bindings=bound(), scheduler=sick))
    reason = "paused by scheduler guard (scheduler status 'unhealthy')"
    assert rows(plan) == [("s", "pause", "Paused", reason, "scheduler guard")]
    well = SchedulerHealth("healthy", CLOSED)
    resumed = make_plan(
        [spec()],
        BRAKE,
        world_at(CLOSED, backfill(7, paused=True), bindings=bound(guard=Guard(GuardKind.SCHEDULER)), scheduler=well),
    )
    assert rows(resumed) == [
        ("s", "unpause", "Running", "resumed: scheduler guard no longer applies", "scheduler guard")
    ]
    created = make_plan([spec()], BRAKE, world_at(CLOSED, dry_runs={"s": dates(7)}, scheduler=sick))
    assert rows(created) == [
        ("s", "wait", "Queued", "queued by " + reason.removeprefix("paused by "), "scheduler guard")
    ]


def test_unreadable_scheduler_health_is_an_incomplete_observation_not_healthy() -> None:
    unread = SchedulerHealth(error="GET /api/v2/monitor/health -> 503")
    held = make_plan(
        [spec()],
        BRAKE,
        world_at(CLOSED, backfill(7, paused=True), bindings=bound(guard=Guard(GuardKind.SCHEDULER)), scheduler=unread),
    )
    why = "observation incomplete: scheduler health: GET /api/v2/monitor/health -> 503"
    assert rows(held) == [("s", "noop", "Paused", why, "scheduler guard")]
    assert not held.complete
    assert [(f.kind, f.message) for f in held.findings] == [
        (
            FindingKind.INCOMPLETE,
            "scheduler health was not observed: GET /api/v2/monitor/health -> 503; "
            "nothing is created, paused or resumed by the guards",
        )
    ]
    running = make_plan([spec()], BRAKE, world_at(CLOSED, backfill(7), bindings=bound(), scheduler=unread))
    assert rows(running) == [("s", "noop", "Running", why, None)]
    fresh = make_plan([spec()], BRAKE, world_at(CLOSED, dry_runs={"s": dates(7)}))  # never observed
    assert rows(fresh) == [("s", "blocked", "Blocked", "observation incomplete: scheduler health: not observed", None)]


def _three(now: datetime, budget: int = 4) -> tuple[list[object], Policy, World]:
    specs = [spec(n, dag=f"d{n}", downstream=("warehouse",)) for n in "abc"]
    policy = Policy(downstream=(Budget("warehouse", budget),))
    obs = {f"d{n}": DagObservation(f"d{n}", OK) for n in "abc"}
    return specs, policy, World(obs, dry_runs={n: dates(7) for n in "abc"}, now=now)


def test_budget_admits_in_queue_order_across_dags() -> None:
    specs, policy, world = _three(CLOSED)
    plan = make_plan(specs, policy, world)  # type: ignore[arg-type]
    assert rows(plan) == [
        ("a", "create", "Pending", "", None),
        ("b", "create", "Pending", "", None),
        ("c", "wait", "Queued", "waiting for warehouse budget (4 of 4 in use by a, b)", "budget warehouse"),
    ]
    assert plan.items[2].as_json()["guard"] == "budget warehouse"
    assert plan.count(Kind.WAIT) == 1


def test_a_running_backfill_holds_its_share_and_an_earlier_spec_is_never_starved() -> None:
    big = spec("a", dag="da", downstream=("warehouse",), max_active_runs=3)
    waiting = spec("b", dag="db", downstream=("warehouse",), max_active_runs=2)
    small = spec("c", dag="dc", downstream=("warehouse",), max_active_runs=1)
    policy = Policy(downstream=(Budget("warehouse", 4),))
    obs = {
        "da": DagObservation("da", OK, (backfill(7, big),)),
        "db": DagObservation("db", OK),
        "dc": DagObservation("dc", OK),
    }
    bindings = {"a": Binding("a", "da", 7, Phase.RUNNING)}
    plan = make_plan([big, waiting, small], policy, World(obs, bindings, {n: dates(7) for n in "bc"}, now=CLOSED))
    assert rows(plan) == [
        ("a", "noop", "Running", "in sync", None),
        ("b", "wait", "Queued", "waiting for warehouse budget (3 of 4 in use by a)", "budget warehouse"),
        ("c", "wait", "Queued", "waiting for warehouse budget (3 of 4 in use by a; b waits first)", "budget warehouse"),
    ]


def test_a_head_awaiting_its_dry_run_queues_for_the_budget_too() -> None:
    specs, policy, world = _three(CLOSED)
    plan = make_plan(specs, policy, replace(world, dry_runs={}))  # type: ignore[arg-type]
    assert rows(plan) == [
        ("a", "wait", "Pending", "awaiting dry run", None),
        ("b", "wait", "Pending", "awaiting dry run", None),
        ("c", "wait", "Queued", "waiting for warehouse budget (4 of 4 in use by a, b)", "budget warehouse"),
    ]


def test_the_plan_shows_the_load_before_anyone_approves() -> None:
    wide = DagInfo("d", False, False, False, True, False, max_active_tasks=16)
    a = spec("a", downstream=("warehouse",), max_active_runs=3)
    b = spec("b", dag="e", downstream=("warehouse",), max_active_runs=2)
    flying = (("2025-01-03", "running"), ("2025-01-04", "queued"))
    obs = {"d": DagObservation("d", wide), "e": DagObservation("e", OK)}
    world = World(
        obs, dry_runs={"a": replace(dates(5), in_flight=flying), "b": replace(dates(7), in_flight=None)}, now=OPEN
    )
    plan = make_plan([a, b], Policy(downstream=(Budget("warehouse", 8),)), world)
    first, second = plan.items
    assert (first.task_ceiling, second.task_ceiling) == (48, None)  # 3 × 16; e's max_active_tasks is not known
    assert first.facts["task_ceiling"] == 48
    assert first.facts["in_flight"] == [
        {"date": "2025-01-03", "state": "running"},
        {"date": "2025-01-04", "state": "queued"},
    ]
    assert second.facts["in_flight"] is None
    assert plan.as_json()["budgets"] == [
        {
            "name": "warehouse",
            "max_active_runs": 8,
            "requested": 5,
            "specs": [{"spec": "a", "max_active_runs": 3}, {"spec": "b", "max_active_runs": 2}],
        }
    ]
    text = plan_text(plan).splitlines()
    assert "up to 48 tasks at once" in text[0]
    assert text[1] == "    in flight: 2025-01-03 (running), 2025-01-04 (queued) — these dates will be skipped"
    assert text[3] == "    in flight: not known (the query for queued and running runs failed)"
    assert text[4] == "Load: warehouse budget 8: a 3, b 2 (5 requested; at most 8 at once)"
    markdown = plan_markdown(plan)
    assert "- in flight: 2025-01-03 \\(running\\), 2025-01-04 \\(queued\\) — these dates will be skipped" in markdown
    assert "- warehouse budget 8: a 3, b 2 \\(5 requested; at most 8 at once\\)" in markdown


def test_a_hand_pause_while_a_guard_holds_is_drift_and_never_healed() -> None:
    healing = replace(WINDOWED, drift=DriftMode.HEAL)
    paused = backfill(7, paused=True)
    plan = make_plan([spec()], healing, world_at(CLOSED, paused, bindings=bound()))
    why = "paused in Airflow (who: not recorded); not unpaused while the window holds it until 20:00 Europe/Berlin"
    assert rows(plan) == [("s", "noop", "Paused", why, None)]
    assert [f.message for f in plan.findings] == ["backfill #7 was paused in Airflow (who: not recorded)"]
    open_window = make_plan([spec()], healing, world_at(OPEN, paused, bindings=bound()))
    assert [r[1] for r in rows(open_window)] == ["noop"]  # a person's pause: heal does not undo it


def test_a_guard_pause_is_not_settled_and_status_says_which_guard() -> None:
    plan = make_plan(
        [spec()], WINDOWED, world_at(CLOSED, backfill(7, paused=True), bindings=bound(guard=Guard(GuardKind.WINDOW)))
    )
    assert not PassResult(plan).settled  # --until-complete waits for the window instead of stopping
    (row,) = status_rows(plan, {})
    assert (row.phase, row.note) == ("Paused", "paused by window until 20:00 Europe/Berlin")
    by_hand = make_plan([spec()], WINDOWED, world_at(OPEN, backfill(7, paused=True), bindings=bound()))
    assert PassResult(by_hand).settled


def test_a_freeze_holds_even_when_the_scheduler_health_is_unknown() -> None:
    policy = Policy(freezes=(FROZEN,), scheduler_guard=SchedulerGuard(True))
    unread = SchedulerHealth(error="down")
    plan = make_plan([spec()], policy, world_at(CLOSED, backfill(7), bindings=bound(), scheduler=unread))
    rule = "freeze 'year-end close'"
    assert rows(plan) == [("s", "pause", "Paused", f"paused by {rule} until 2026-12-02T00:00:00Z", rule)]
    fresh = make_plan(
        [spec()],
        Policy(scheduler_guard=SchedulerGuard(True)),
        world_at(CLOSED, dry_runs={"s": dates(7)}, scheduler=unread),
    )
    (item,) = fresh.items
    assert (item.kind, item.error, item.reason) == (
        Kind.BLOCKED,
        True,
        "observation incomplete: scheduler health: down",
    )


def test_paused_and_cancelling_backfills_hold_their_share_and_finished_specs_leave_the_load() -> None:
    held = spec("a", dag="da", downstream=("warehouse",), max_active_runs=2, state=DesiredState.PAUSED)
    cancelling = spec("b", dag="db", downstream=("warehouse",), max_active_runs=1, state=DesiredState.CANCELLED)
    done = spec("c", dag="dc", downstream=("warehouse",), max_active_runs=3)
    asking = spec("d", dag="dd", downstream=("warehouse",), max_active_runs=2)
    policy = Policy(downstream=(Budget("warehouse", 4),))
    wide = DagInfo("da", False, False, False, True, False, max_active_tasks=8)
    obs = {
        "da": DagObservation("da", wide, (backfill(7, held, paused=True),)),
        "db": DagObservation("db", OK, (backfill(8, cancelling),)),
        "dc": DagObservation("dc", replace(wide, dag_id="dc")),
        "dd": DagObservation("dd", OK),
    }
    bindings = {
        "a": Binding("a", "da", 7, Phase.PAUSED, DesiredState.PAUSED),
        "b": Binding("b", "db", 8, Phase.RUNNING),
        "c": Binding("c", "dc", 9, Phase.SUCCEEDED),
    }
    plan = make_plan([held, cancelling, done, asking], policy, World(obs, bindings, {"d": dates(7)}, now=OPEN))
    assert rows(plan) == [
        ("a", "noop", "Paused", "spec says paused", None),
        ("b", "cancel", "Cancelled", "spec says cancelled", None),
        ("c", "noop", "Succeeded", "finished", None),
        ("d", "wait", "Queued", "waiting for warehouse budget (3 of 4 in use by a, b)", "budget warehouse"),
    ]
    assert [i.task_ceiling for i in plan.items] == [16, None, None, None]  # a finished spec shows no load
    assert [b.text() for b in plan.budgets] == ["warehouse budget 4: a 2, b 1, d 2 (5 requested; at most 4 at once)"]


def test_corners_of_budget_and_brake_bookkeeping() -> None:
    # a spec queued behind another on its DAG does not ask for budget; a budget wait sends nothing
    first = spec("a", downstream=("warehouse",), max_active_runs=2)
    behind = spec("b", downstream=("warehouse",), max_active_runs=2)
    other = spec("c", dag="e", downstream=("warehouse",), max_active_runs=2)
    policy = Policy(downstream=(Budget("warehouse", 3),))
    obs = {"d": DagObservation("d", OK), "e": DagObservation("e", OK)}
    plan = make_plan([first, behind, other], policy, World(obs, dry_runs={n: dates(7) for n in "ac"}, now=OPEN))
    assert rows(plan) == [
        ("a", "create", "Pending", "", None),
        ("b", "wait", "Queued", "queued behind a", None),
        ("c", "wait", "Queued", "waiting for warehouse budget (2 of 3 in use by a)", "budget warehouse"),
    ]
    assert plan.items[2].request is None
    # the heartbeat's age is measured at the plan's now
    stale = Policy(scheduler_guard=SchedulerGuard(True, 60))
    beat = SchedulerHealth("healthy", datetime(2026, 12, 1, 11, 58, tzinfo=UTC))
    braked = make_plan([spec()], stale, world_at(CLOSED, backfill(7), bindings=bound(), scheduler=beat))
    assert rows(braked)[0][3] == "paused by scheduler guard (scheduler heartbeat 120 s old (limit 60 s))"
    # a scheduler never observed is one finding, for no DAG
    unseen = make_plan(
        [spec()], Policy(scheduler_guard=SchedulerGuard(True)), world_at(CLOSED, dry_runs={"s": dates(7)})
    )
    assert [(f.dag_id, f.cause, f.message) for f in unseen.findings] == [
        (
            "",
            "not observed",
            "scheduler health was not observed: not observed; nothing is created, paused or resumed by the guards",
        )
    ]


def test_run_labels() -> None:
    day = DagRun("r1", datetime(2025, 1, 3, tzinfo=UTC), "running", None, None)
    part = DagRun("r2", None, "queued", None, None, partition_key="2025-01-04T00:00:00")
    bare = DagRun("r3", None, "queued", None, None)
    assert [run_label(r) for r in (day, part, bare)] == ["2025-01-03", "2025-01-04T00:00:00", "r3"]


def test_in_flight_runs_beyond_the_page_read_are_counted() -> None:
    """Issue 12: the in-flight runs are one page of a query, whatever the range; the rest are counted."""
    flying = (("2025-01-03", "running"),)
    world = World(
        {"d": DagObservation("d", OK)},
        dry_runs={"a": replace(dates(5), in_flight=flying, in_flight_more=149)},
        now=OPEN,
    )
    (item,) = make_plan([spec("a")], Policy(), world).items
    assert (item.facts["in_flight"], item.facts["in_flight_more"]) == (
        [{"date": "2025-01-03", "state": "running"}],
        149,
    )
    assert plan_text(make_plan([spec("a")], Policy(), world)).splitlines()[1] == (
        "    in flight: 2025-01-03 (running) and 149 more — these dates will be skipped"
    )
