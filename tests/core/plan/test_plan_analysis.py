"""Analysis verdicts in the planner (pure, issue 27 §1): a system over its limit holds creates and pauses running
managed backfills as a guard's pause; HOLD and INCONCLUSIVE create and resume nothing and pause nothing; the
strictest verdict of a spec's systems wins; THROTTLE runs a chunked spec's next chunk slower; never in the
checksum."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from controller.commands.reconcile.reconciler import planned
from controller.core.model.airflow import BackfillRequest
from controller.core.model.analysis import Analysis, Inconclusive, Sample
from controller.core.model.binding import Phase
from controller.core.model.guards import Budget, Guard, GuardKind
from controller.core.model.policy import Policy
from controller.core.plan.desired import Desired
from controller.core.plan.queue import make_plan
from controller.core.plan.values import Item, Kind, Plan
from controller.core.render.analysis import analysis_lines
from controller.core.render.status import status_rows
from controller.core.rules.analysis import NEW_STATE, AnalysisState, Verdict, evaluate
from tests.core.plan.test_plan import backfill, dates, spec
from tests.core.plan.test_plan_chunks import CHUNKED, day, days, ten
from tests.core.plan.test_plan_guards import CLOSED, NIGHTS, bound, rows, world_at
from tests.core.rules.test_analysis import WAREHOUSE, Q

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
POLICY = Policy(downstream=(Budget("warehouse", 8, analysis=WAREHOUSE),))
LISTING = {"downstream": ("warehouse",)}

BY_WAREHOUSE = Guard(GuardKind.ANALYSIS, "warehouse")  # a pause the analysis of warehouse made


def verdict(value: float | None, config: Analysis = WAREHOUSE, state: AnalysisState = NEW_STATE) -> Verdict:
    seen = Inconclusive("Prometheus answered 503 error: down") if value is None else Sample(value, NOW)
    return evaluate(config, state, seen, NOW)[0]


PAUSED = AnalysisState(paused_since=NOW - timedelta(minutes=5))
FAILED = AnalysisState(inconclusive_since=NOW - timedelta(minutes=20))
CLOSING = replace(WAREHOUSE, pause_after=timedelta(minutes=10))


def test_high_load_holds_a_create_with_the_verdicts_reason() -> None:
    world = world_at(NOW, dry_runs={"s": dates(7)}, analysis={"warehouse": verdict(0.95)})
    plan = make_plan([spec(**LISTING)], POLICY, world)
    assert rows(plan) == [("s", "wait", "Queued", f"waiting: warehouse load 0.95 > 0.85 ({Q})", "analysis warehouse")]


def test_low_load_creates_and_a_spec_not_listing_the_system_is_not_held() -> None:
    low = world_at(NOW, dry_runs={"s": dates(7)}, analysis={"warehouse": verdict(0.5)})
    assert make_plan([spec(**LISTING)], POLICY, low).items[0].kind.value == "create"
    high = world_at(NOW, dry_runs={"s": dates(7)}, analysis={"warehouse": verdict(0.95)})
    assert make_plan([spec()], POLICY, high).items[0].kind.value == "create"


def test_high_load_pauses_as_a_guard_and_low_load_resumes_after_hysteresis() -> None:
    s = spec(**LISTING)
    pause = make_plan([s], POLICY, world_at(NOW, backfill(7), bindings=bound(), analysis={"warehouse": verdict(0.95)}))
    reason = f"paused by analysis warehouse: waiting: warehouse load 0.95 > 0.85 ({Q})"
    assert rows(pause) == [("s", "pause", "Paused", reason, "analysis warehouse")]
    assert pause.findings == ()  # never drift
    paused = backfill(7, paused=True)
    between = verdict(0.8, state=PAUSED)
    held = make_plan(
        [s],
        POLICY,
        world_at(NOW, paused, bindings=bound(guard=BY_WAREHOUSE), analysis={"warehouse": between}),
    )
    assert rows(held) == [
        (
            "s",
            "noop",
            "Paused",
            f"paused by analysis warehouse: waiting: warehouse load 0.8, resumes < 0.7 ({Q})",
            "analysis warehouse",
        )
    ]
    low = verdict(0.5, state=PAUSED)
    resumed = make_plan(
        [s],
        POLICY,
        world_at(NOW, paused, bindings=bound(guard=BY_WAREHOUSE), analysis={"warehouse": low}),
    )
    assert rows(resumed) == [
        ("s", "unpause", "Running", "resumed: analysis warehouse no longer applies", "analysis warehouse")
    ]


def test_inconclusive_creates_nothing_pauses_nothing_resumes_nothing() -> None:
    s, unsure = spec(**LISTING), {"warehouse": verdict(None, CLOSING)}
    why = f"inconclusive: warehouse: Prometheus answered 503 error: down; pausing at 12:10Z if it stays so ({Q})"
    create = make_plan([s], POLICY, world_at(NOW, dry_runs={"s": dates(7)}, analysis=unsure))
    assert rows(create) == [("s", "wait", "Queued", why, "analysis warehouse")]
    running = make_plan([s], POLICY, world_at(NOW, backfill(7), bindings=bound(), analysis=unsure))
    assert rows(running) == [("s", "noop", "Running", f"running; {why}", None)]
    paused = backfill(7, paused=True)
    kept = make_plan(
        [s],
        POLICY,
        world_at(NOW, paused, bindings=bound(guard=BY_WAREHOUSE), analysis=unsure),
    )
    assert rows(kept) == [("s", "noop", "Paused", f"paused by analysis warehouse: {why}", "analysis warehouse")]


def test_fail_closed_pauses_and_says_so() -> None:
    closed = {"warehouse": verdict(None, CLOSING, FAILED)}
    plan = make_plan([spec(**LISTING)], POLICY, world_at(NOW, backfill(7), bindings=bound(), analysis=closed))
    why = (
        "paused by analysis warehouse: fail-closed: warehouse: Prometheus answered 503 error: down; inconclusive for "
        f"20m >= pause_after 10m ({Q})"
    )
    assert rows(plan) == [("s", "pause", "Paused", why, "analysis warehouse")]


def test_the_strictest_verdict_of_a_specs_systems_wins() -> None:
    lake = replace(WAREHOUSE, system="lake", query="max(lake_load)")
    policy = Policy(downstream=(Budget("warehouse", 8, analysis=WAREHOUSE), Budget("lake", 8, analysis=lake)))
    both = spec(downstream=("lake", "warehouse"))
    verdicts = {"warehouse": verdict(0.5), "lake": verdict(0.95, lake)}
    plan = make_plan([both], policy, world_at(NOW, backfill(7), bindings=bound(), analysis=verdicts))
    assert rows(plan) == [
        (
            "s",
            "pause",
            "Paused",
            "paused by analysis lake: waiting: lake load 0.95 > 0.85 (max(lake_load))",
            "analysis lake",
        )
    ]


def test_a_window_pause_stays_a_window_pause_while_the_analysis_only_holds() -> None:

    policy = replace(POLICY, windows=(NIGHTS,))
    hold = replace(WAREHOUSE, for_passes=3)
    world = world_at(CLOSED, backfill(7), bindings=bound(), analysis={"warehouse": verdict(0.95, hold)})
    assert rows(make_plan([spec(**LISTING)], policy, world))[0][1:] == (
        "pause",
        "Paused",
        "paused by window until 20:00 Europe/Berlin",
        "window",
    )


def test_throttle_runs_the_next_chunk_at_throttle_max_active_runs() -> None:
    throttling = replace(WAREHOUSE, throttle_at=0.6, throttle_max_active_runs=1)
    policy = Policy(downstream=(Budget("warehouse", 8, analysis=throttling),))
    s = ten(downstream=("warehouse",), execution=CHUNKED)
    world = world_at(NOW, dry_runs={"s": days(0, 9)}, analysis={"warehouse": verdict(0.65, throttling)})
    (item,) = make_plan([s], policy, world).items
    assert item.request == BackfillRequest("d", day(0), day(3), "none", 1)
    assert item.reason == (
        f"chunk 1: 4 run(s); throttled: warehouse load 0.65 > 0.6, next chunk at max_active_runs 1 ({Q})"
    )
    calm = world_at(NOW, dry_runs={"s": days(0, 9)}, analysis={"warehouse": verdict(0.5, throttling)})
    assert make_plan([s], policy, calm).items[0].request == BackfillRequest("d", day(0), day(3), "none", 2)


def test_the_checksum_is_the_plan_without_analysis() -> None:
    s, base = spec(**LISTING), world_at(NOW, dry_runs={"s": dates(7)})
    without = make_plan([s], POLICY, base)
    with_high = planned(Desired((s,), POLICY), replace(base, analysis={"warehouse": verdict(0.95)}))
    assert with_high.items[0].kind.value == "wait"
    assert with_high.checksum() == without.checksum()
    assert planned(Desired((s,), POLICY), base) == without  # no analysis: the plan is the one it always was


def test_plan_and_status_lines() -> None:
    assert analysis_lines(["warehouse"], None) == [
        "analysis of warehouse: analysis evaluated at reconcile (this plan does not query Prometheus)"
    ]
    unsure = {"warehouse": verdict(None)}
    assert analysis_lines(["warehouse"], unsure) == [
        f"analysis warehouse: inconclusive: warehouse: Prometheus answered 503 error: down ({Q})"
    ]
    plan = make_plan([spec(**LISTING)], POLICY, world_at(NOW, backfill(7), bindings=bound(), analysis=unsure))
    (row,) = status_rows(plan, {}, unsure)
    assert row.note == f"running; inconclusive: warehouse: Prometheus answered 503 error: down ({Q})"
    assert status_rows(plan, {}) == [row]  # the reason says the verdict already: not a second time


def test_the_analysis_note_stands_alone_or_follows_the_reason() -> None:
    unsure = {"warehouse": verdict(None)}
    shown = f"analysis warehouse: inconclusive: warehouse: Prometheus answered 503 error: down ({Q})"
    running = Item("s", "d", Kind.NOOP, Phase.RUNNING, "in sync", 4, source=spec(downstream=("warehouse",)))
    (row,) = status_rows(Plan((running,)), {}, unsure)
    assert row.note == f"in sync · {shown}"
    (row,) = status_rows(Plan((replace(running, reason=""),)), {}, unsure)
    assert row.note == shown
    (row,) = status_rows(Plan((replace(running, phase=Phase.SUCCEEDED),)), {}, unsure)
    assert row.note == "in sync"  # a finished spec: the analysis no longer holds it


def test_a_verdict_that_holds_or_paused_the_spec_is_said_once_in_its_note() -> None:
    """The held create's and the paused backfill's reason is the verdict: not said again after ` · `."""
    high, s = {"warehouse": verdict(0.95)}, spec(**LISTING)
    held = make_plan([s], POLICY, world_at(NOW, dry_runs={"s": dates(7)}, analysis=high))
    (row,) = status_rows(held, {}, high)
    assert row.note == f"waiting: warehouse load 0.95 > 0.85 ({Q})"
    paused = make_plan([s], POLICY, world_at(NOW, backfill(7), bindings=bound(), analysis=high))
    (row,) = status_rows(paused, {}, high)
    assert (row.phase, row.note) == (
        "Running",  # the pause is the next pass's: status shows what the backfill is doing now
        f"pause at the next pass: paused by analysis warehouse: waiting: warehouse load 0.95 > 0.85 ({Q})",
    )
