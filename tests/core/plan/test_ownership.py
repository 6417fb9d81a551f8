"""Which runs are a spec's own: compact date ranges, creation windows, re-runs and who made them (pure)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from hypothesis import given, settings
from hypothesis import strategies as st

from controller.core.model.airflow import Backfill, DagRun, Rerun, RunSummary, summarise
from controller.core.model.binding import CreateFacts, Phase
from controller.core.model.policy import Policy
from controller.core.model.ranges import DateRange, compact, expand, ranges_from_json, ranges_json
from controller.core.model.spec import DesiredState
from controller.core.plan.outcome import terminal_phase, unknown_text
from controller.core.plan.ownership import (
    BY_HAND,
    CREATE_SPAN,
    GAP,
    DagHistory,
    Owned,
    own_runs,
    rerun_by,
    run_date,
    window_end,
)
from controller.core.plan.queue import make_plan
from controller.core.plan.world import DagObservation, World
from tests.core.plan.test_plan import NOW, OK, bound, spec

JAN1 = datetime(2025, 1, 1, tzinfo=UTC)
DAY = timedelta(days=1)
T = datetime(2026, 11, 1, 10, tzinfo=UTC)  # the server clock when the first backfill was created
S = timedelta(seconds=1)


def day(i: int) -> datetime:
    return JAN1 + i * DAY


def made(id_: int, at: datetime, *, first: int = 0, last: int = 6, done: datetime | None = None) -> Backfill:
    return Backfill(id_, "d", day(first), day(last), "none", 2, False, None, at, done)


def run(i: int, state: str, queued: datetime | None, *, key: str | None = None) -> DagRun:
    started = None if queued is None else queued + S
    if key is None:
        return DagRun(f"r{i}", day(i), state, started, started, queued_at=queued)
    return DagRun(f"p{i}-{queued}", None, state, started, started, key, day(i), queued_at=queued)


# --- compact dates ----------------------------------------------------------------------------------


def test_compact_makes_equal_step_ranges_in_date_order_and_expands_back() -> None:
    odd = [day(6), day(0), day(2), day(4), day(2)]  # any order, a repeat
    assert compact(odd) == (DateRange(day(0), day(6), 4),)
    assert compact([day(0), day(1), day(3), day(7)]) == (DateRange(day(0), day(1), 2), DateRange(day(3), day(7), 2))
    assert compact([day(5)]) == (DateRange(day(5), day(5), 1),)
    assert compact([]) == ()
    hourly = [JAN1 + timedelta(hours=h) for h in range(48)]
    assert compact(hourly) == (DateRange(JAN1, JAN1 + timedelta(hours=47), 48),)
    assert expand(compact(hourly)) == hourly
    assert expand(compact(odd)) == [day(0), day(2), day(4), day(6)]
    three = compact([day(0), day(1), day(2), day(4), day(5)])
    assert three == (DateRange(day(0), day(2), 3), DateRange(day(4), day(5), 2))
    assert expand(three) == [day(0), day(1), day(2), day(4), day(5)]


def test_date_ranges_as_json_and_back() -> None:
    ranges = compact([day(0), day(1), day(3)])
    assert ranges_json(ranges) == [
        ["2025-01-01T00:00:00+00:00", "2025-01-02T00:00:00+00:00", 2],
        ["2025-01-04T00:00:00+00:00", "2025-01-04T00:00:00+00:00", 1],
    ]
    assert ranges_from_json(ranges_json(ranges)) == ranges
    assert ranges_from_json(None) is None


def test_create_facts_keep_the_dates_and_say_when_they_are_the_whole_range() -> None:
    dates = compact([day(0), day(1), day(2)])
    whole = CreateFacts(3, 3, dates=dates)
    assert (whole.own_dates, whole.whole_range) == ([day(0), day(1), day(2)], True)
    assert CreateFacts(3, 5, dates=dates).whole_range is False
    assert CreateFacts(3, 3).whole_range is False  # no dates recorded: nothing to count by
    assert CreateFacts(dates=dates, whole=True).whole_range is True
    assert CreateFacts(dates=dates, whole=False).whole_range is False
    assert CreateFacts.from_json(whole.as_json()) == whole
    adopted = CreateFacts(dates=dates, whole=True)
    assert adopted.as_json()["dates_whole"] is True
    assert CreateFacts.from_json(adopted.as_json()) == adopted
    assert CreateFacts.from_json(CreateFacts(3, 3).as_json()) == CreateFacts(3, 3)
    assert "dates" not in CreateFacts(3, 3).as_json()


# --- windows and who re-ran ------------------------------------------------------------------------


def test_the_creation_window_ends_at_a_pause_the_next_backfill_or_completion() -> None:
    b = made(1, T)
    queued = [run(0, "success", T + S), run(1, "success", T + 2 * S), run(2, "success", T + 2 * S + GAP)]
    assert window_end(b, queued, []) == T + 2 * S + GAP  # a gap of exactly GAP still belongs to it
    late = [*queued[:2], run(2, "success", T + 2 * S + GAP + timedelta(microseconds=1))]
    assert window_end(b, late, []) == T + 2 * S
    assert window_end(b, queued, [made(2, T + 2 * S)]) == T + S  # the next create began: its runs are its own
    assert window_end(b, queued, [made(0, T - DAY)]) == T + 2 * S + GAP  # an earlier one bounds nothing
    assert window_end(replace(b, completed_at=T + 2 * S), queued, []) == T + S
    before = [run(0, "success", T - S), run(1, "success", T + S)]  # queued before it existed: not its own
    assert window_end(b, before, []) == T + S
    assert window_end(b, [run(0, "success", None)], []) == T


def test_a_rerun_is_named_by_the_create_under_way_or_by_hand() -> None:
    later = [made(2, T + DAY), made(3, T + 2 * DAY)]
    owners = {2: "fix"}
    assert rerun_by(T + DAY, later, owners) == "spec fix (#2)"
    assert rerun_by(T + DAY + CREATE_SPAN, later, owners) == "spec fix (#2)"
    assert rerun_by(T + DAY + CREATE_SPAN + S, later, owners) == BY_HAND == "hand"
    assert rerun_by(T + 2 * DAY + S, later, owners) == "backfill #3 (unmanaged)"
    assert rerun_by(T + DAY - S, later, owners) == "hand"
    both = [made(2, T + DAY), made(4, T + DAY + S)]
    assert rerun_by(T + DAY + 2 * S, both, {4: "newest"}) == "spec newest (#4)"
    finished = [made(2, T + DAY, done=T + DAY + S)]  # a completed backfill queues nothing any more
    assert rerun_by(T + DAY + S, finished, owners) == "spec fix (#2)"
    assert rerun_by(T + DAY + 2 * S, finished, owners) == "hand"


def test_run_date_is_the_logical_date_or_the_partition_date() -> None:
    assert run_date(run(3, "success", T)) == day(3)
    assert run_date(run(3, "success", T, key="k3")) == day(3)
    assert run_date(DagRun("x", None, "success", None, None)) is None


# --- a backfill's own runs ---------------------------------------------------------------------------


def test_only_the_recorded_dates_count_and_a_later_rerun_is_unknown() -> None:
    """B (failed) after A: B's dry run listed 01-02 and 01-04; later C (completed) re-ran 01-04."""
    b = made(2, T, done=T + DAY)
    c = made(3, T + 2 * DAY)
    runs = [
        run(0, "success", T - DAY),  # A's, not re-run by B
        run(1, "failed", T + S),
        run(2, "success", T - DAY),
        run(3, "success", T + 3 * DAY),  # re-run by C after B recorded nothing yet
        run(9, "failed", T + S),  # outside B's range
    ]
    owned = own_runs(b, [day(1), day(3)], runs, [b, c], {2: "b", 3: "c"})
    assert owned.summary == RunSummary(
        {"failed": 1}, (day(1),), mean_duration=0.0, reruns=(Rerun(day(3), "hand", "success"),)
    )  # C's create was two days before: a run queued a day later is nobody's create
    c_now = made(3, T + 3 * DAY)
    owned = own_runs(b, [day(1), day(3)], runs, [b, c_now], {2: "b", 3: "c"})
    assert owned.summary.reruns == (Rerun(day(3), "spec c (#3)", "success"),)
    assert (owned.summary.unknown, owned.dates, owned.whole) == (1, compact([day(1)]), False)


def test_without_recorded_dates_the_window_recovers_them() -> None:
    """An adopted backfill: its own dates are its runs queued in its window, the rest of its range is not."""
    b = made(1, T)
    runs = [run(0, "success", T + S), run(1, "failed", T + 2 * S), run(2, "success", T - DAY)]
    owned = own_runs(b, None, runs, [b], {})
    assert owned.summary == RunSummary({"success": 1, "failed": 1}, (day(1),), mean_duration=0.0)
    assert (owned.dates, owned.whole) == (compact([day(0), day(1)]), False)
    alone = own_runs(b, None, runs[:2], [b], {})
    assert (alone.dates, alone.whole, alone.summary.reruns) == (compact([day(0), day(1)]), True, ())


def test_a_clear_by_hand_soon_after_its_own_create_is_not_its_own_rerun() -> None:
    b = made(1, T)
    runs = [run(0, "failed", T + S), run(1, "success", T + 30 * S)]  # cleared by hand 30 s after the create
    owned = own_runs(b, [day(0), day(1)], runs, [b], {1: "a"})
    assert owned.summary.reruns == (Rerun(day(1), "hand", "success"),)
    assert owned.summary.counts == {"failed": 1}


def test_the_last_rerun_of_a_date_says_its_state_now_and_a_partition_keeps_its_own_run() -> None:
    b = made(1, T, done=T + DAY)
    runs = [
        run(0, "failed", T + S, key="k0"),
        run(0, "failed", T + 2 * DAY, key="k0"),
        run(0, "success", T + 3 * DAY, key="k0"),  # the partition's latest run
        run(1, "success", T + S, key="k1"),
    ]
    owned = own_runs(b, [day(0), day(1)], runs, [b], {})
    assert owned.summary.counts == {"failed": 1, "success": 1}
    assert owned.summary.reruns == (Rerun(day(0), "hand", "success", "failed"),)
    assert owned.summary.unknown == 0  # the old run is still beside the new ones: its outcome is known
    assert owned.whole is True


# --- outcomes ------------------------------------------------------------------------------------------


def test_an_unknown_outcome_is_never_success() -> None:
    b = made(1, T, done=T + DAY)
    lost = RunSummary({"success": 2}, reruns=(Rerun(day(3), "spec c (#3)", "success"),))
    assert terminal_phase(b, lost, None) is Phase.COMPLETED_WITH_FAILURES
    known = RunSummary({"success": 2}, reruns=(Rerun(day(3), "hand", "success", "success"),))
    assert terminal_phase(b, known, None) is Phase.SUCCEEDED
    assert terminal_phase(b, lost, DesiredState.CANCELLED) is Phase.CANCELLED
    assert unknown_text(known) == ""
    assert unknown_text(lost) == (
        "; outcome unknown for 1 date(s) re-run before backfillctl recorded them: "
        "2025-01-04 re-run by spec c (#3), now success"
    )
    two = replace(lost, reruns=(*lost.reruns, Rerun(day(4), "hand", "failed")))
    assert unknown_text(two).endswith("now success and 1 more")


def test_a_finished_backfill_whose_dates_were_all_rerun_is_not_an_empty_orphan() -> None:
    s = spec()
    b = made(1, T, done=T + DAY)
    lost = RunSummary({}, reruns=(Rerun(day(0), "spec c (#3)", "success"),))
    binding = replace(bound("s", 1), created=CreateFacts(1, 7, dates=compact([day(0)])))
    plan = make_plan([s], Policy(), World({"d": DagObservation("d", OK, (b,), {1: lost})}, {"s": binding}, now=NOW))
    assert [(i.phase, i.reason) for i in plan.items] == [
        (
            Phase.COMPLETED_WITH_FAILURES,
            "0 run(s) succeeded; outcome unknown for 1 date(s) re-run before backfillctl recorded them: "
            "2025-01-01 re-run by spec c (#3), now success",
        )
    ]
    assert plan.findings == ()


def test_a_deleted_specs_finished_backfill_is_settled_and_not_shown() -> None:
    b = made(1, T, done=T + DAY)
    done = RunSummary({"success": 1, "failed": 1}, (day(1),))
    obs = {"d": DagObservation("d", OK, (b,), {1: done})}
    plan = make_plan([], Policy(), World(obs, {"gone": bound("gone", 1)}, now=NOW))
    assert (plan.items, plan.findings) == ((), ())
    assert [(i.spec, i.phase, i.reason, i.backfill_id, i.runs) for i in plan.settled] == [
        ("gone", Phase.COMPLETED_WITH_FAILURES, "failed: 2025-01-02", 1, done)
    ]
    running = {"d": DagObservation("d", OK, (b,), {1: RunSummary({"running": 1})})}
    assert make_plan([], Policy(), World(running, {"gone": bound("gone", 1)}, now=NOW)).settled == ()
    unread = {"d": DagObservation("d", OK, (b,), {})}
    assert make_plan([], Policy(), World(unread, {"gone": bound("gone", 1)}, now=NOW)).settled == ()
    active = {"d": DagObservation("d", OK, (replace(b, completed_at=None),), {1: done})}
    orphaned = make_plan([], Policy(), World(active, {"gone": bound("gone", 1)}, now=NOW))
    assert (orphaned.settled, [i.phase for i in orphaned.items]) == ((), [Phase.ORPHANED])
    recorded = {"gone": bound("gone", 1, phase=Phase.SUCCEEDED)}
    assert make_plan([], Policy(), World(obs, recorded, now=NOW)).settled == ()


# --- many backfills of one DAG at once (a lost store adopting its history) -----------------------------


def _scanned(backfill: Backfill, dates: list[datetime] | None, runs: list[DagRun], listed: list[Backfill]) -> Owned:
    """The definition, a scan of every run and backfill per backfill (what `DagHistory` must equal)."""
    wanted = None if dates is None else set(dates)
    dated = [(d, r) for r in runs if (d := run_date(r)) is not None and backfill.from_date <= d <= backfill.to_date]
    mine = [(d, r) for d, r in dated if wanted is None or d in wanted]
    end = window_end(backfill, [r for _d, r in mine], listed)
    own = {d: r for d, r in mine if r.queued_at is not None and backfill.created_at <= r.queued_at <= end}
    later = sorted(((d, r, r.queued_at) for d, r in mine if r.queued_at and r.queued_at > end), key=lambda x: x[2])
    latest = {d: (r, when) for d, r, when in later}
    others = [b for b in listed if b.id != backfill.id]
    owners = {b.id: f"s{b.id}" for b in listed[::2]}
    reruns = tuple(
        Rerun(d, rerun_by(when, others, owners), r.state, own[d].state if d in own else None)
        for d, (r, when) in sorted(latest.items())
    )
    strangers = {d for d, _r in dated} - own.keys()
    return Owned(replace(summarise([own[d] for d in sorted(own)]), reruns=reruns), compact(own), not strangers)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 9), st.integers(0, 4), st.integers(0, 200), st.booleans()), max_size=6),
    st.lists(st.tuples(st.integers(0, 12), st.sampled_from(["success", "failed"]), st.integers(-5, 260)), max_size=25),
    st.booleans(),
    st.booleans(),
)
def test_a_dags_history_ordered_once_gives_each_backfill_the_runs_a_scan_per_backfill_gives(
    shapes: list[tuple[int, int, int, bool]],
    runs_drawn: list[tuple[int, str, int]],
    partitioned: bool,
    recorded: bool,
) -> None:
    listed = [
        made(n, T + at * S, first=first, last=first + length, done=T + (at + 90) * S if done else None)
        for n, (first, length, at, done) in enumerate(shapes)
    ]
    runs = [
        run(i, state, None if q < 0 else T + q * S, key=f"k{i}" if partitioned else None) for i, state, q in runs_drawn
    ]
    history = DagHistory.of(runs, listed)
    for backfill in listed:
        dates = [day(backfill.from_date.day - 1)] if recorded else None
        owners = {b.id: f"s{b.id}" for b in listed[::2]}
        assert history.own(backfill, dates, owners) == _scanned(backfill, dates, runs, listed)
        assert own_runs(backfill, dates, runs, listed, owners) == _scanned(backfill, dates, runs, listed)
