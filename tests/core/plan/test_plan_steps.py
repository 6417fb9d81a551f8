"""The planner's steps, field by field: every item carries its spec, its DAG and the right flags; the walk's
hand-off (taken backfills, the DAG's slot); the chunk steps' corners; what a plan says (pure, exact values)."""

from __future__ import annotations

from dataclasses import replace

from controller.core.model.airflow import DagVersion, RunSummary
from controller.core.model.binding import Binding, Phase
from controller.core.model.capabilities import Capabilities
from controller.core.model.chunks import Progress
from controller.core.model.guards import Budget, Guard, GuardKind, SchedulerGuard
from controller.core.model.policy import Policy
from controller.core.model.ranges import DateRange, compact
from controller.core.model.spec import BackfillSpec, DesiredState
from controller.core.plan.matching import adoptable_chunks, chunk_of
from controller.core.plan.outcome import outcome_reason
from controller.core.plan.ownership import Owned
from controller.core.plan.queue import make_plan
from controller.core.plan.values import AWAITING_DRY_RUN, UNOBSERVED, FindingKind, Item, Kind, Plan, refusals, stuck
from controller.core.plan.world import DagObservation, DryRun, World, closest_ids
from tests.core.plan.test_plan import JAN1, NOW, OK, backfill, dates, spec, world
from tests.core.plan.test_plan_chunks import CHUNKED, DAY, FIRST, airflow, chunk, day, days, ten
from tests.core.plan.test_plan_chunks import bound as chunk_bound
from tests.core.plan.test_plan_chunks import runs as counts
from tests.core.plan.test_plan_chunks import world as chunk_world

SICK = Policy(scheduler_guard=SchedulerGuard(True))  # the scheduler guard on, its health not observed


def carried(plan: Plan, *specs: BackfillSpec) -> list[Item]:
    """The plan's items, after checking each carries its spec and its DAG and says its flags as its reason does."""
    by_name = {s.name: s for s in specs}
    for item in plan.items:
        if item.spec not in by_name:  # a deleted spec's
            assert item.source is None, item
            continue
        assert item.source is by_name[item.spec], item
        assert item.dag_id == by_name[item.spec].dag_id, item
        assert item.unobserved is item.reason.startswith(UNOBSERVED), item
        assert item.awaiting_dry_run is (item.kind is Kind.WAIT and item.reason == AWAITING_DRY_RUN), item
    return list(plan.items)


# --- a spec not created yet ---------------------------------------------------------------------------------


def test_a_head_on_a_missing_dag_names_the_closest_ids() -> None:
    s = spec()
    w = World({"d": DagObservation("d", None, similar=("d1", "dd"))}, now=NOW)
    (item,) = carried(make_plan([s], Policy(), w), s)
    assert (item.kind, item.reason, item.error) == (
        Kind.BLOCKED,
        "DAG d does not exist in Airflow; did you mean d1 or dd?",
        True,
    )


def test_a_head_waits_for_its_dry_run_then_is_refused_by_airflow() -> None:
    s = spec()
    (waiting,) = carried(make_plan([s], Policy(), world()), s)
    assert (waiting.kind, waiting.phase, waiting.awaiting_dry_run, waiting.error) == (
        Kind.WAIT,
        Phase.PENDING,
        True,
        False,
    )
    (refused,) = carried(make_plan([s], Policy(), world(dry={"s": DryRun(error="depends_on_past")})), s)
    assert (refused.reason, refused.error, refused.awaiting_dry_run) == (
        "Airflow refuses it: depends_on_past",
        True,
        False,
    )


def test_the_head_create_lists_the_dates_it_runs() -> None:
    s = spec()
    (item,) = carried(make_plan([s], Policy(), world(dry={"s": dates(3)})), s)
    assert item.dates == compact([JAN1, JAN1 + DAY, JAN1 + 2 * DAY])
    assert (item.kind, item.error, item.unobserved, item.behind) == (Kind.CREATE, False, False, None)


def test_not_created_items_are_no_errors_and_queue_behind_only_specs_of_theirs() -> None:
    a, b, paused, cancelled = (
        spec("a"),
        spec("b"),
        spec("p", state=DesiredState.PAUSED),
        spec("c", state=DesiredState.CANCELLED),
    )
    unmanaged = world(backfill(5, spec("x", max_active_runs=9)))
    items = carried(make_plan([a, paused, cancelled], Policy(), unmanaged), a, paused, cancelled)
    assert [(i.kind, i.phase, i.error, i.behind) for i in items] == [
        (Kind.WAIT, Phase.QUEUED, False, None),  # behind an unmanaged backfill: nothing of ours to wait for
        (Kind.NOOP, Phase.PAUSED, False, None),
        (Kind.NOOP, Phase.CANCELLED, False, None),
    ]
    assert items[0].reason == "queued behind unmanaged backfill #5 (backfill #5)"
    ours = world(backfill(6, a), bindings={"a": Binding("a", "d", 6, Phase.RUNNING)})
    items = carried(make_plan([a, b], Policy(), ours), a, b)
    assert [(i.spec, i.reason, i.behind) for i in items][1] == ("b", "queued behind a (backfill #6)", "a")


def test_a_spec_behind_a_deleted_specs_backfill_waits_for_nothing_of_ours() -> None:
    b = spec("b")
    w = world(backfill(6, spec("gone")), bindings={"gone": Binding("gone", "d", 6, Phase.RUNNING)})
    item = carried(make_plan([b], Policy(), w), b)[0]
    assert (item.reason, item.behind) == ("queued behind gone (backfill #6)", None)


def test_an_unobserved_scheduler_blocks_the_create_and_says_so_by_its_flag() -> None:
    s = spec()
    (item,) = carried(make_plan([s], SICK, world(dry={"s": dates(3)})), s)
    assert (item.kind, item.reason, item.error, item.unobserved) == (
        Kind.BLOCKED,
        "observation incomplete: scheduler health: not observed",
        True,
        True,
    )


def test_the_specs_of_an_unobserved_dag_are_blocked_and_flagged() -> None:
    s = spec()
    w = World({"d": DagObservation("d", None, error="503 Service Unavailable")}, now=NOW)
    (item,) = carried(make_plan([s], Policy(), w), s)
    assert (item.kind, item.error, item.unobserved) == (Kind.BLOCKED, True, True)
    (missing,) = carried(make_plan([s], Policy(), World(now=NOW)), s)
    assert (missing.reason, missing.unobserved) == ("observation incomplete: DAG not observed", True)


def test_a_create_says_which_airflow_and_dag_version_its_runs_use() -> None:
    s = spec()
    caps = Capabilities("3.3.2", run_on_latest_version=True)
    versioned = World(
        {"d": DagObservation("d", replace(OK, latest_version=DagVersion(3)))}, dry_runs={"s": dates(3)}, now=NOW
    )
    item = make_plan([s], Policy(), replace(versioned, airflow=caps)).items[0]
    assert item.code == "Airflow 3.3.2, DAG version 3: every run: the latest DAG version (run_on_latest_version: true)"
    unversioned = make_plan([s], Policy(), replace(world(dry={"s": dates(3)}), airflow=caps)).items[0]
    assert unversioned.code == "Airflow 3.3.2: every run: the latest DAG version (run_on_latest_version: true)"
    asked = spec(run_on_latest_version=False)
    older = make_plan([asked], Policy(), replace(world(dry={"s": dates(3)}), airflow=caps)).items[0]
    assert older.code == (
        "Airflow 3.3.2: new runs: the latest DAG version; re-runs: the DAG version each run first ran with"
    )
    waiting = make_plan([s], Policy(), replace(world(), airflow=caps)).items[0]
    assert waiting.code is None  # only a create says it
    assert make_plan([s], Policy(), world(dry={"s": dates(3)})).items[0].code is None  # the release was not read


# --- the walk's hand-off ------------------------------------------------------------------------------------


def test_a_backfill_adopted_by_one_spec_is_not_adopted_by_the_next() -> None:
    a, b = spec("a"), spec("b")
    found = backfill(5, a, active=False)
    items = carried(make_plan([a, b], Policy(), world(found, runs={5: RunSummary({"success": 7})})), a, b)
    assert [(i.spec, i.kind, i.backfill_id) for i in items] == [("a", Kind.ADOPT, 5), ("b", Kind.WAIT, None)]


def test_a_create_takes_the_dags_slot_from_a_chunked_spec_behind_it() -> None:
    head, chunked = spec("a"), ten("s")
    w = chunk_world(airflow(1, 0, 3, active=False), progress=FIRST, backfill_id=1, runs_of={1: counts(success=4)})
    w = replace(w, dry_runs={"a": dates(3), "s": days(4, 9)})
    items = carried(make_plan([head, chunked], Policy(), w), head, chunked)
    assert [(i.spec, i.kind, i.reason, i.behind) for i in items] == [
        ("a", Kind.CREATE, "", None),
        ("s", Kind.WAIT, "queued behind a (backfill #0)", "a"),
    ]


def test_each_specs_findings_are_kept() -> None:
    a, b = spec("a"), spec("b", from_date=JAN1 + DAY)
    early = backfill(5, a, active=False)
    bindings = {"a": Binding("a", "d", 5, Phase.RUNNING), "b": Binding("b", "d", 6, Phase.RUNNING)}
    w = world(early, backfill(6, b, paused=True), bindings=bindings, runs={5: RunSummary({"queued": 1})})
    plan = make_plan([a, b], Policy(), w)
    assert [(f.kind, f.spec) for f in plan.findings] == [
        (FindingKind.COMPLETED_EARLY, "a"),
        (FindingKind.DRIFT, "b"),
    ]


def test_deleted_specs_after_a_finished_one_are_still_found() -> None:
    done = backfill(1, spec("a-done"), active=False)
    running = backfill(2, spec("b-gone", dag="e"))
    obs = {"d": DagObservation("d", OK, (done,)), "e": DagObservation("e", OK, (running,))}
    bindings = {"a-done": Binding("a-done", "d", 1, Phase.RUNNING), "b-gone": Binding("b-gone", "e", 2, Phase.RUNNING)}
    plan = make_plan([], Policy(), World(obs, bindings, now=NOW))
    assert [(i.spec, i.phase) for i in plan.items] == [("b-gone", Phase.ORPHANED)]


def test_a_deleted_specs_outcome_follows_what_was_applied() -> None:
    done = backfill(1, spec("gone"), active=False)
    obs = {"d": DagObservation("d", OK, (done,), {1: RunSummary({"success": 2})})}
    cancelled = Binding("gone", "d", 1, Phase.RUNNING, DesiredState.CANCELLED)
    (settled,) = make_plan([], Policy(), World(obs, {"gone": cancelled}, now=NOW)).settled
    assert (settled.spec, settled.dag_id, settled.kind, settled.phase, settled.backfill_id) == (
        "gone",
        "d",
        Kind.NOOP,
        Phase.CANCELLED,
        1,
    )


def test_a_recorded_chunked_spec_keeps_its_progress_and_says_it_ran_every_chunk() -> None:
    s = ten()
    progress = Progress(0, (chunk(1, 0, 3, counts(success=4)), chunk(2, 4, 9, counts(success=6))))
    recorded = Binding("s", "d", 2, Phase.SUCCEEDED, reason="10 run(s) succeeded", progress=progress)
    (item,) = carried(make_plan([s], Policy(), World({}, {"s": recorded}, now=NOW)), s)
    assert (item.chunk, item.progress, item.runs) == ((2, 2), progress, RunSummary({}))
    plain = Binding("s", "d", 2, Phase.SUCCEEDED)
    (item,) = carried(make_plan([s], Policy(), World({}, {"s": plain}, now=NOW)), s)
    assert (item.chunk, item.progress, item.reason) == (None, None, "finished")


# --- one bound backfill -------------------------------------------------------------------------------------


def test_a_bound_backfill_gone_from_airflow_is_blocked_with_its_spec() -> None:
    s = spec()
    (item,) = carried(make_plan([s], Policy(), world(bindings={"s": Binding("s", "d", 9, Phase.RUNNING)})), s)
    assert (item.kind, item.reason, item.backfill_id, item.error) == (
        Kind.BLOCKED,
        "backfill #9 is no longer in Airflow",
        9,
        True,
    )


def test_a_running_backfill_with_the_scheduler_unobserved_changes_nothing_and_is_flagged() -> None:
    s = spec()
    w = world(backfill(7), bindings={"s": Binding("s", "d", 7, Phase.RUNNING)})
    (item,) = carried(make_plan([s], SICK, w), s)
    assert (item.kind, item.phase, item.unobserved, item.guard) == (Kind.NOOP, Phase.RUNNING, True, None)
    (steady,) = carried(make_plan([s], Policy(), w), s)
    assert (steady.unobserved, steady.error) == (False, False)


def test_an_adopted_backfill_carries_the_dates_its_runs_say_are_its_own() -> None:
    s = spec()
    own = (DateRange(JAN1, JAN1 + 2 * DAY, 3),)
    obs = DagObservation("d", OK, (backfill(5, s, active=False),), {5: RunSummary({"success": 3})})
    obs = replace(obs, owned={5: Owned(RunSummary({"success": 3}), own, False)})
    (item,) = carried(make_plan([s], Policy(), World({"d": obs}, now=NOW)), s)
    assert (item.kind, item.dates, item.whole) == (Kind.ADOPT, own, False)
    unread = make_plan([s], Policy(), World({"d": replace(obs, owned={})}, now=NOW)).items[0]
    assert (unread.dates, unread.whole) == (None, None)


# --- budgets and the load -----------------------------------------------------------------------------------


def test_a_head_waiting_for_a_budget_no_longer_waits_for_its_dry_run() -> None:
    full = Policy(downstream=(Budget("wh", 2),))
    a, b = spec("a", downstream=("wh",)), spec("b", dag="e", downstream=("wh",))
    obs = {"d": DagObservation("d", OK, (backfill(7, a),)), "e": DagObservation("e", OK)}
    w = World(obs, {"a": Binding("a", "d", 7, Phase.RUNNING)}, now=NOW)
    item = make_plan([a, b], full, w).items[1]
    assert (item.spec, item.kind, item.guard, item.awaiting_dry_run) == (
        "b",
        Kind.WAIT,
        Guard(GuardKind.BUDGET, "wh"),
        False,
    )


def test_a_bound_chunked_spec_does_not_show_the_next_chunks_in_flight_runs() -> None:
    flying = replace(days(4, 9), in_flight=(("2025-01-05", "running"),), in_flight_more=2)
    w = chunk_world(airflow(1, 0, 3), progress=FIRST, backfill_id=1, runs_of={1: counts(running=4)}, dry=flying)
    item = make_plan([ten()], Policy(), w).items[0]
    assert (item.in_flight, item.in_flight_more) == ((), 0)
    head = make_plan([ten()], Policy(), chunk_world(dry=flying)).items[0]
    assert (head.in_flight, head.in_flight_more) == ((("2025-01-05", "running"),), 2)
    unread = make_plan([spec()], Policy(), world()).items[0]
    assert (unread.in_flight, unread.in_flight_more) == ((), 0)


# --- the chunk steps ----------------------------------------------------------------------------------------


def test_a_chunked_spec_whose_last_chunk_is_not_listed_ends_with_its_chunks_outcome() -> None:
    s = ten()
    done = Progress(10, (chunk(1, 0, 3, counts(success=4)), chunk(2, 4, 7, counts(success=3, failed=1))))
    binding = replace(chunk_bound(done, None), backfills=(1, 2))
    w = World({"d": DagObservation("d", OK)}, {"s": binding}, {"s": DryRun((), 0)}, now=NOW)
    (item,) = carried(make_plan([s], Policy(), w), s)
    assert (item.kind, item.phase, item.backfill_id, item.progress) == (
        Kind.NOOP,
        Phase.COMPLETED_WITH_FAILURES,
        2,
        done,
    )
    assert item.reason == outcome_reason(Phase.COMPLETED_WITH_FAILURES, counts(success=7, failed=1))
    clean = replace(done, chunks=(done.chunks[0], replace(done.chunks[1], summary=counts(success=4))))
    w = replace(w, bindings={"s": replace(binding, progress=clean)})
    (item,) = carried(make_plan([s], Policy(), w), s)
    assert (item.phase, item.reason, item.backfill_id) == (Phase.SUCCEEDED, "8 run(s) succeeded", 2)


def test_a_chunk_create_carries_its_spec_and_its_own_dates() -> None:
    s = ten()
    w = chunk_world(airflow(1, 0, 3, active=False), progress=FIRST, backfill_id=1, runs_of={1: counts(success=4)})
    (item,) = carried(make_plan([s], Policy(), replace(w, dry_runs={"s": days(4, 9)})), s)
    assert (item.kind, item.dates, item.first_date, item.last_date) == (
        Kind.CREATE,
        compact([day(i) for i in range(4, 8)]),
        day(4),
        day(7),
    )


def test_the_first_chunk_of_a_backwards_spec_says_the_whole_specs_dates() -> None:
    s = ten(run_backwards=True)
    (item,) = carried(make_plan([s], Policy(), chunk_world(dry=days(0, 9))), s)
    assert (item.first_date, item.last_date, item.dates) == (day(0), day(9), compact([day(i) for i in range(6, 10)]))


def test_the_next_chunk_on_a_missing_dag_names_the_closest_ids() -> None:
    s = ten()
    w = chunk_world(airflow(1, 0, 3, active=False), progress=FIRST, backfill_id=1, runs_of={1: counts(success=4)})
    obs = replace(w.observations["d"], info=None, similar=("d1",))
    (item,) = carried(make_plan([s], Policy(), replace(w, observations={"d": obs})), s)
    assert (item.kind, item.reason) == (Kind.BLOCKED, "DAG d does not exist in Airflow; did you mean d1?")


def test_the_next_chunk_with_the_scheduler_unobserved_is_blocked_and_flagged() -> None:
    s = ten()
    w = chunk_world(airflow(1, 0, 3, active=False), progress=FIRST, backfill_id=1, runs_of={1: counts(success=4)})
    (item,) = carried(make_plan([s], SICK, replace(w, dry_runs={"s": days(4, 9)})), s)
    assert (item.kind, item.error, item.unobserved) == (Kind.BLOCKED, True, True)


def test_a_finished_chunk_not_read_again_keeps_its_recorded_runs() -> None:
    s = ten()
    kept = Progress(10, (chunk(1, 0, 3, counts(success=3, failed=1)),))
    w = chunk_world(airflow(1, 0, 3, active=False), progress=kept, backfill_id=1, dry=days(4, 9))
    (item,) = carried(make_plan([s], Policy(), w), s)
    assert (item.kind, item.runs) == (Kind.CREATE, counts(success=3, failed=1))


def test_a_paused_chunked_spec_is_paused_however_many_runs_failed() -> None:
    s = ten(state=DesiredState.PAUSED, execution=replace(CHUNKED, halt_on_failure_ratio=0.2))
    w = chunk_world(airflow(1, 0, 3), progress=FIRST, backfill_id=1, runs_of={1: counts(failed=4)})
    (item,) = carried(make_plan([s], Policy(), w), s)
    assert (item.kind, item.phase, item.reason) == (Kind.PAUSE, Phase.PAUSED, "spec says paused")


def test_adopted_chunks_take_their_own_dates_and_finished_runs() -> None:
    s = ten()
    first, second, third = airflow(1, 0, 3, active=False), airflow(2, 4, 7, active=False), airflow(3, 8, 9)
    own = (DateRange(day(0), day(2), 3),)
    obs = DagObservation(
        "d",
        OK,
        (first, second, third),
        {1: counts(success=4), 2: counts(success=4), 3: counts(success=1, running=1)},
        owned={1: Owned(counts(success=3), own, False)},
    )
    (item,) = carried(make_plan([s], Policy(), World({"d": obs}, now=NOW)), s)
    assert item.progress is not None
    assert [(c.backfill_id, c.runs, c.dates, c.summary) for c in item.progress.chunks] == [
        (1, 3, own, counts(success=4)),
        (2, 4, None, counts(success=4)),
        (3, 2, None, None),
    ]
    assert (item.kind, item.backfill_id, item.progress.promoted, item.chunk) == (Kind.ADOPT, 3, True, (3, 0))
    alone = replace(obs, backfills=(third,), runs={}, owned={})
    (item,) = carried(make_plan([s], Policy(), World({"d": alone}, now=NOW)), s)
    assert item.progress is not None
    assert (item.progress.promoted, item.progress.chunks[0].summary, item.runs) == (False, None, RunSummary({}))


def test_an_active_adopted_chunk_without_unfinished_runs_is_not_finished_yet() -> None:
    s = ten()
    obs = DagObservation("d", OK, (airflow(1, 0, 3),), {1: counts(success=4)})
    (item,) = carried(make_plan([s], Policy(), World({"d": obs}, now=NOW)), s)
    assert item.progress is not None
    assert item.progress.chunks[0].summary is None


# --- which backfill is a spec's -----------------------------------------------------------------------------


def test_a_chunk_may_end_on_the_specs_last_day_or_start_on_it() -> None:
    s = ten()
    assert chunk_of(s, airflow(1, 9, 9))  # a one-day last chunk
    assert chunk_of(s, airflow(1, 6, 9))
    assert not chunk_of(s, airflow(1, 6, 10))


def test_backwards_chunks_that_share_a_day_are_not_one_specs() -> None:
    s = ten(run_backwards=True)
    assert adoptable_chunks(s, (airflow(1, 6, 9), airflow(2, 2, 6)), set()) == ()
    assert adoptable_chunks(s, (airflow(1, 6, 9), airflow(2, 2, 5)), set()) == (airflow(1, 6, 9), airflow(2, 2, 5))


def test_closest_ids() -> None:
    known = ["orders_daily", "orders_hourly", "payments", "orders_dailyy"]
    assert closest_ids("orders_daly", known) == ("orders_daily",)  # 0.957; orders_dailyy's 0.917 is not as close
    assert closest_ids("orders_daily", known) == ("orders_dailyy",)  # never itself
    assert closest_ids("zzz", known) == ()
    assert closest_ids("x", []) == ()
    assert closest_ids("abcd", ["abce", "abcf", "abcg", "abch"]) == ("abce", "abcf", "abcg")  # as close: three
    assert closest_ids("abcde", ["abcxy"]) == ("abcxy",)  # 0.6 is close enough
    assert closest_ids("abcd", ["abxy"]) == ()  # 0.5 is not


# --- what a plan says ---------------------------------------------------------------------------------------


def test_refusals_of_every_spec_or_of_the_named_ones() -> None:
    over = spec("a", expected_runs=2)
    other = spec("b", dag="e", expected_runs=2)
    obs = {"d": DagObservation("d", OK), "e": DagObservation("e", OK)}
    plan = make_plan(
        [over, other, spec("c", dag="f")], Policy(), World(obs, dry_runs={"a": dates(7), "b": dates(7)}, now=NOW)
    )
    assert [i.spec for i in refusals(plan)] == ["a", "b"]
    assert [i.spec for i in refusals(plan, {"b", "c"})] == ["b"]
    assert refusals(plan, ()) == ()


def test_an_incomplete_plan_has_no_checksum() -> None:
    s = spec()
    plan = make_plan([s], Policy(), World(now=NOW))
    assert (plan.complete, plan.as_json()["checksum"]) == (False, None)


def test_stuck_follows_only_queued_items_of_ours() -> None:
    head = Item("a", "d", Kind.BLOCKED, Phase.BLOCKED, "no")
    running = Item("r", "d", Kind.NOOP, Phase.RUNNING, "in sync", behind="a")  # not queued: not behind anyone
    loop = (
        Item("x", "d", Kind.WAIT, Phase.QUEUED, "q", behind="y"),
        Item("y", "d", Kind.WAIT, Phase.QUEUED, "q", behind="x"),
    )
    assert stuck(Plan((head, running, *loop))) == {}
    chain = (
        Item("b", "d", Kind.WAIT, Phase.QUEUED, "q", behind="a"),
        Item("c", "d", Kind.WAIT, Phase.QUEUED, "q", behind="b"),
    )
    assert stuck(Plan((head, *chain))) == {"b": head, "c": head}


def test_outcome_reasons_count_the_successes() -> None:
    two = RunSummary({"success": 2, "running": 1})
    assert outcome_reason(Phase.SUCCEEDED, two) == "2 run(s) succeeded"
    assert outcome_reason(Phase.COMPLETED_WITH_FAILURES, two) == "2 run(s) succeeded"  # its outcome unknown for some
