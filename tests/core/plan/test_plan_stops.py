"""The planner under emergency stops: a stopped spec is held (exact items), never created, unpaused or next-chunked."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from controller.core.model.airflow import Backfill, RunSummary
from controller.core.model.chunks import Progress
from controller.core.model.guards import Budget, Guard, GuardKind
from controller.core.model.logins import one_of, same_login
from controller.core.model.policy import Policy
from controller.core.model.spec import Execution
from controller.core.model.stops import EVERYTHING, EmergencyStop, EmergencyStopKind, StopSource
from controller.core.plan.queue import make_plan
from controller.core.plan.stops import Lift, LiftReason, affected, due_lifts, lifters, resumed_from, stop_of, stoppers
from controller.core.plan.world import Holds, World
from tests.core.plan.test_plan import NOW, T0, backfill, bound, dates, decided, spec, world
from tests.core.plan.test_plan_chunks import airflow, chunk, days, one, row, runs, ten
from tests.core.plan.test_plan_chunks import world as chunk_world

STOP = EmergencyStop(
    3, EmergencyStopKind.DOWNSTREAM, "warehouse", "CPU at 95%", "oncall", StopSource.CLI, T0, NOW + timedelta(hours=4)
)
HELD = "stop #3: stopped by oncall (cli): CPU at 95% (until 2026-11-02T04:00:00Z)"


def stopped(w: World, *stops: EmergencyStop, paused_by_stop: frozenset[int] = frozenset()) -> World:
    return replace(w, holds=Holds(stops=stops or (STOP,), stop_paused=paused_by_stop))


def test_a_stopped_spec_is_never_created() -> None:
    s = spec(downstream=("warehouse",))
    plan = make_plan([s], Policy(), stopped(world(dry={"s": dates(3)})))
    assert decided(plan) == [("s", "noop", "Paused", HELD, None)]
    assert (plan.items[0].guard, plan.items[0].dag_id, plan.items[0].source) == (Guard(GuardKind.STOP), "d", s)
    other = spec(downstream=("lake",))
    assert [i.kind.value for i in make_plan([other], Policy(), stopped(world(dry={"s": dates(3)}))).items] == ["create"]


def test_a_running_backfill_is_paused_and_a_paused_one_stays_paused() -> None:
    s = spec(downstream=("warehouse",))
    running = make_plan([s], Policy(), stopped(world(backfill(4, s), bindings={"s": bound("s", 4)})))
    assert decided(running) == [("s", "pause", "Paused", HELD, 4)]
    held = make_plan([s], Policy(), stopped(world(backfill(4, s, paused=True), bindings={"s": bound("s", 4)})))
    assert decided(held) == [("s", "noop", "Paused", HELD, 4)]
    assert held.findings == ()  # a stop's pause is not drift


def test_a_spec_stop_holds_by_name_and_an_expired_one_does_not() -> None:
    s = spec()
    by_name = replace(STOP, kind=EmergencyStopKind.SPEC, target="s", expires_at=None)
    plan = make_plan([s], Policy(), stopped(world(backfill(4, s), bindings={"s": bound("s", 4)}), by_name))
    assert decided(plan) == [("s", "pause", "Paused", "stop #3: stopped by oncall (cli): CPU at 95%", 4)]
    gone = replace(by_name, expires_at=NOW)
    plan = make_plan([s], Policy(), stopped(world(backfill(4, s), bindings={"s": bound("s", 4)}), gone))
    assert decided(plan) == [("s", "noop", "Running", "in sync", 4)]


def test_once_lifted_what_the_stop_paused_is_resumed() -> None:
    s = spec(downstream=("warehouse",))
    w = world(backfill(4, s, paused=True), bindings={"s": bound("s", 4)})
    plan = make_plan([s], Policy(), replace(w, holds=Holds(stop_paused=frozenset({4}))))
    assert decided(plan) == [("s", "unpause", "Running", "the stop that paused it was lifted; resuming", 4)]


def test_a_reviewed_resume_naming_the_stop_lifts_it() -> None:
    s = spec(downstream=("warehouse",), resume="stop #3: warehouse recovered (CHG-9)")
    w = stopped(world(backfill(4, s, paused=True), bindings={"s": bound("s", 4)}))
    plan = make_plan([s], Policy(), w)
    why = "resumed: stop #3: warehouse recovered (CHG-9) (lifts stop #3)"
    assert decided(plan) == [("s", "unpause", "Running", why, 4)]
    lifts = due_lifts(w.holds.stops, [s], {"s": backfill(4, s, paused=True)}, NOW)
    assert [(d.stop.id, d.reason, d.why) for d in lifts] == [
        (3, LiftReason.RESUMED, "reviewed resume of s: stop #3: warehouse recovered (CHG-9)")
    ]


def test_due_lifts_expired_and_unpaused_in_airflow() -> None:
    s = spec()
    hand = EmergencyStop(5, EmergencyStopKind.SPEC, "s", "paused by hand in Airflow", "admin", StopSource.AIRFLOW, T0)
    expired = replace(STOP, expires_at=NOW)
    paused: dict[str, Backfill] = {"s": backfill(4, s, paused=True)}
    assert due_lifts((hand, expired), [s], paused, NOW) == [
        Lift(expired, LiftReason.EXPIRED, "expired at 2026-11-02T00:00:00Z")
    ]
    assert due_lifts((hand,), [s], {"s": backfill(4, s)}, NOW) == [
        Lift(hand, LiftReason.UNPAUSED, "unpaused in Airflow")
    ]
    plan = make_plan([s], Policy(), stopped(world(backfill(4, s, paused=True), bindings={"s": bound("s", 4)}), hand))
    why = (
        "paused by hand in Airflow by admin at 2026-11-01T00:00:00Z (stop #5); "
        'lift: unpause it in Airflow, or merge `resume: "stop #5: …"`'
    )
    assert decided(plan) == [("s", "noop", "Paused", why, 4)]


def test_a_stop_holds_the_next_chunk_and_keeps_the_progress() -> None:
    s = ten(downstream=("warehouse",))
    progress = Progress(10, (chunk(1, 0, 3),))
    finished = airflow(1, 0, 3, active=False)
    w = chunk_world(finished, progress=progress, backfill_id=1, runs_of={1: runs(success=4)}, dry=days(4, 9))
    item = one(make_plan([s], Policy(), stopped(w)))
    assert row(item) == ("noop", "Paused", HELD, None)
    assert (item.guard, item.chunk, item.dag_id, item.source) == (Guard(GuardKind.STOP), (1, 3), "d", s)
    assert item.progress is not None
    assert [(c.backfill_id, c.summary) for c in item.progress.chunks] == [(1, RunSummary({"success": 4}))]
    canary = ten(downstream=("warehouse",), execution=Execution(chunk_runs=4, canary_runs=4))
    waiting = one(make_plan([canary], Policy(), stopped(w)))  # the canary's review comes first
    assert (waiting.phase.value, waiting.guard) == ("AwaitingPromotion", None)


def test_an_expired_stop_says_when_it_expired_not_when_it_was_lifted() -> None:
    expired = replace(STOP, expires_at=NOW - timedelta(hours=1))
    assert due_lifts((expired,), [], {}, NOW) == [Lift(expired, LiftReason.EXPIRED, "expired at 2026-11-01T23:00:00Z")]


def test_a_downstream_stop_is_lifted_only_when_every_spec_it_holds_resumes_it() -> None:
    one_resumes = spec("a", downstream=("warehouse",), resume="stop #3: recovered")
    other = spec("b", downstream=("warehouse",))
    assert due_lifts((STOP,), [one_resumes, other], {}, NOW) == []
    both = replace(other, resume="stop #3: recovered too")
    assert due_lifts((STOP,), [one_resumes, both], {}, NOW) == [
        Lift(STOP, LiftReason.RESUMED, "reviewed resume of a: stop #3: recovered")
    ]


def test_a_pause_made_in_airflow_is_lifted_when_its_backfill_is_gone_finished_or_unpaused() -> None:
    s = spec()
    hand = EmergencyStop(5, EmergencyStopKind.SPEC, "s", "paused by hand in Airflow", "admin", StopSource.AIRFLOW, T0)
    lifted = [Lift(hand, LiftReason.UNPAUSED, "unpaused in Airflow")]
    assert due_lifts((hand,), [s], {}, NOW) == lifted  # no backfill bound any more
    assert due_lifts((hand,), [s], {"s": backfill(4, s, active=False, paused=True)}, NOW) == lifted
    assert due_lifts((hand,), [s], {"s": backfill(4, s, paused=True)}, NOW) == []
    assert due_lifts((hand,), [], {}, NOW) == []  # it holds no spec: nothing seen unpaused


def test_the_oldest_stop_holds_and_resume_names_only_a_stop_of_the_spec() -> None:
    s = spec(downstream=("warehouse",), resume="stop #7: the other one")
    newer = replace(STOP, id=5)
    assert stop_of(s, (newer, STOP), NOW) == STOP
    assert stop_of(s, (newer, STOP, replace(STOP, id=7)), NOW) == STOP  # #7 is lifted by the resume
    elsewhere = replace(STOP, id=7, target="lake")
    assert resumed_from(s, (newer, elsewhere)) is None  # #7 does not hold s; #5 is not named
    assert resumed_from(s, (newer, replace(STOP, id=7))) == replace(STOP, id=7)


# --- who may stop and who may lift (on-call, owners, owner-less, everything) ---------------------------------

BUDGETED = Policy(
    downstream=(Budget("warehouse", 8, ("WH-Owner",)), Budget("lake", 4, ())),
    oncall=("pager-bob",),
)
ORDERS = spec(name="orders", downstream=("warehouse",))
LOGS = spec(name="logs", downstream=("lake",))
PLAIN = spec(name="plain")


def stop_of_kind(kind: EmergencyStopKind, target: str, actor: str = "carol") -> EmergencyStop:
    return EmergencyStop(9, kind, target, "why", actor, StopSource.CLI, T0)


def test_a_stop_of_everything_covers_every_spec() -> None:
    everything = stop_of_kind(EmergencyStopKind.ALL, EVERYTHING)
    assert [everything.covers(s) for s in (ORDERS, LOGS, PLAIN)] == [True, True, True]
    assert [s.name for s in affected([ORDERS, LOGS, PLAIN], EmergencyStopKind.ALL, EVERYTHING)] == [
        "orders",
        "logs",
        "plain",
    ]


def test_who_may_lift_owners_first_the_placer_of_an_ownerless_stop_and_never_an_oncall_login() -> None:
    specs = [ORDERS, LOGS, PLAIN]
    cases = [
        (stop_of_kind(EmergencyStopKind.DOWNSTREAM, "warehouse"), ("WH-Owner",)),
        (stop_of_kind(EmergencyStopKind.SPEC, "orders"), ("WH-Owner",)),
        (stop_of_kind(EmergencyStopKind.DOWNSTREAM, "lake"), ("carol",)),  # no owners: who placed it
        (stop_of_kind(EmergencyStopKind.SPEC, "plain"), ("carol",)),
        (stop_of_kind(EmergencyStopKind.SPEC, "plain", actor="Pager-Bob"), ()),  # on-call never lifts
        (stop_of_kind(EmergencyStopKind.ALL, EVERYTHING), ("WH-Owner",)),
        (replace(stop_of_kind(EmergencyStopKind.SPEC, "plain"), actor="not recorded"), ()),
    ]
    assert [lifters(BUDGETED, specs, stop) for stop, _ in cases] == [expected for _, expected in cases]


def test_who_may_stop_through_the_workflow_the_owners_and_oncall_or_anyone_without_owners() -> None:
    specs = [ORDERS, LOGS, PLAIN]
    assert stoppers(BUDGETED, specs, EmergencyStopKind.DOWNSTREAM, "warehouse") == ("WH-Owner", "pager-bob")
    assert stoppers(BUDGETED, specs, EmergencyStopKind.ALL, EVERYTHING) == ("WH-Owner", "pager-bob")
    assert stoppers(BUDGETED, specs, EmergencyStopKind.DOWNSTREAM, "lake") == ()
    assert stoppers(BUDGETED, specs, EmergencyStopKind.SPEC, "plain") == ()


def test_logins_compare_case_insensitively() -> None:
    assert (one_of("wh-owner", ("WH-Owner",)), one_of("wh-owner2", ("WH-Owner",))) == (True, False)
    assert (same_login("ALICE", "alice"), same_login("alice", "alicia")) == (True, False)
