"""Selecting by code (pure): the intervals a `select` spec re-runs, the sub-ranges they form, the bound."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from controller.core.checks.changes import FieldChange, edited_fields
from controller.core.model.airflow import DagRun, DagVersion
from controller.core.model.policy import Policy, Rule
from controller.core.model.spec import ReprocessBehavior, Select
from controller.core.rules.coverage import latest_code
from controller.core.rules.selection import (
    MAX_BACKFILLS,
    Selection,
    code_moved,
    in_flight,
    latest_runs,
    max_backfills,
    merged,
    on_target,
    rederived,
    select,
    sub_ranges,
    too_many,
)
from tests.core.plan.test_plan import spec

DAY = timedelta(days=1)
JAN1 = datetime(2025, 1, 1, tzinfo=UTC)
V3, V4, V5 = DagVersion(3), DagVersion(4), DagVersion(5)
V4_TARGET = Select(code_version=4)

NEW_TARGET = (  # what a code-changed pause tells to do: select cannot change once applied
    "a new target is a new spec (select cannot change once applied): cancel this one (state: cancelled) and add a "
    "spec selecting the new target"
)


def _d(day: int) -> datetime:
    return JAN1 + (day - 1) * DAY


def _run(day: int, state: str, *versions: DagVersion, queued: int = 0, partition: bool = False) -> DagRun:
    return DagRun(
        f"r{day}-{queued}",
        None if partition else _d(day),
        state,
        None,
        None,
        partition_key=f"p{day}" if partition else None,
        partition_date=_d(day) if partition else None,
        queued_at=JAN1 + queued * timedelta(minutes=1),
        dag_versions=versions,
    )


def _days(*days: int) -> list[datetime]:
    return [_d(d) for d in days]


def test_failed_never_ran_and_older_code_are_selected_and_grouped_into_contiguous_sub_ranges() -> None:
    runs = [
        _run(1, "success", V4),
        _run(2, "success", V3),
        _run(3, "failed", V4),
        _run(5, "success", V4),
        _run(6, "success", DagVersion(2)),
        _run(7, "success", V4),
    ]
    got = select(_days(1, 2, 3, 4, 5, 6, 7), runs, V4_TARGET)
    assert got == Selection(
        V4_TARGET,
        intervals=7,
        selected=tuple(_days(2, 3, 4, 6)),
        failed=1,
        never_ran=1,
        off_target=2,
        newer=0,
        sub_ranges=((_d(2), _d(4)), (_d(6), _d(6))),
        gaps=((_d(5),),),
    )
    assert got.on_target == 3
    assert got.text() == (
        "re-runs 4 of 7 intervals in 2 backfills: 2 on version 3 or older; 1 failed; 1 never ran; "
        "3 already on version 4"
    )
    assert got.as_json() == {
        "code_version": 4,
        "bundle_version": None,
        "intervals": 7,
        "selected": 4,
        "failed": 1,
        "never_ran": 1,
        "off_target": 2,
        "on_target": 3,
        "in_flight": 0,
        "sub_ranges": [
            ["2025-01-02T00:00:00+00:00", "2025-01-04T00:00:00+00:00"],
            ["2025-01-06T00:00:00+00:00", "2025-01-06T00:00:00+00:00"],
        ],
    }


def test_a_run_is_judged_by_the_code_of_its_latest_try_and_an_interval_by_its_latest_run() -> None:
    """Airflow lists the code of every try of a run's tasks, oldest first (3.3.2: task instance history included):
    a run re-run on version 4 reads (3, 4) and is on version 4, as Airflow's own `version_number` says."""
    runs = [
        _run(1, "success", V3, V4),  # re-run on version 4 (its first try ran on 3): on the target
        _run(2, "success", V3),  # other code
        _run(3, "success", V4, queued=1),
        _run(3, "failed", V3, V4, queued=9),  # the latest run of day 3 failed
        _run(4, "failed", V3, queued=1),
        _run(4, "success", V4, queued=9),  # re-run since on the target: never selected
        _run(5, "success"),  # no code recorded: not known to be on the target
    ]
    got = select(_days(1, 2, 3, 4, 5), runs, V4_TARGET)
    assert got.selected == tuple(_days(2, 3, 5))
    assert (got.failed, got.off_target, got.never_ran, got.on_target) == (1, 2, 0, 2)
    assert got.sub_ranges == ((_d(2), _d(3)), (_d(5), _d(5)))
    assert got.text() == (
        "re-runs 3 of 5 intervals in 2 backfills: 2 on version 3 or older; 1 failed; 2 already on version 4"
    )
    assert [latest_code(r) for r in runs[:2]] == [V4, V3]
    assert latest_code(runs[-1]) is None


def test_same_queue_time_the_later_listed_run_counts_and_no_queue_time_is_earliest() -> None:
    first = _run(1, "success", V4)
    second = _run(1, "failed", V4)
    assert latest_runs([first, second]) == {_d(1): second}
    unqueued = DagRun("u", _d(2), "failed", None, None, dag_versions=(V3,))
    queued = _run(2, "success", V4)
    assert latest_runs([queued, unqueued]) == {_d(2): queued}
    assert latest_runs([unqueued, queued]) == {_d(2): queued}
    assert latest_runs([DagRun("x", None, "success", None, None)]) == {}


def test_a_bundle_version_change_with_the_same_version_number_is_other_code() -> None:
    target = Select(bundle_version="abc123")
    runs = [
        _run(1, "success", DagVersion(4, "abc123")),
        _run(2, "success", DagVersion(4, "fff000")),  # same number, another commit: SHAs have no order
        _run(3, "success", DagVersion(4)),  # an unversioned bundle's run: not the commit
        _run(4, "success", DagVersion(9, "abc123")),
    ]
    got = select(_days(1, 2, 3, 4), runs, target)
    assert got.selected == tuple(_days(2, 3))
    assert got.text() == (
        "re-runs 2 of 4 intervals in 1 backfill: 2 on other bundle versions; 2 already on bundle abc123"
    )


def test_on_target_rules() -> None:
    assert on_target(V4, V4_TARGET) is True
    assert on_target(V5, V4_TARGET) is True
    assert on_target(V3, V4_TARGET) is False
    assert on_target(None, V4_TARGET) is False
    assert on_target(DagVersion(4, "a"), Select(bundle_version="a")) is True
    assert on_target(DagVersion(4, "b"), Select(bundle_version="a")) is False
    assert on_target(V4, Select()) is False


def test_a_run_without_a_recorded_version_and_newer_code() -> None:
    runs = [_run(1, "success"), _run(2, "success", V5), _run(3, "success", V4)]  # a run that names no code: other code
    got = select(_days(1, 2, 3), runs, V4_TARGET)
    assert (got.selected, got.off_target, got.newer) == ((_d(1),), 1, 1)
    assert got.text() == (
        "re-runs 1 of 3 intervals in 1 backfill: 1 on version 3 or older; 2 already on version 4 or newer"
    )


def test_partitions_are_selected_by_partition_date() -> None:
    runs = [
        _run(1, "success", V3, partition=True),
        _run(2, "success", V4, partition=True),
        _run(3, "success", V3, partition=True),
    ]
    got = select(_days(3, 1, 2, 1), runs, V4_TARGET)  # the dry run's order and repeats do not matter
    assert got.intervals == 3
    assert got.sub_ranges == ((_d(1), _d(1)), (_d(3), _d(3)))


def test_an_empty_selection_has_nothing_to_re_run() -> None:
    got = select(_days(1, 2), [_run(1, "success", V4), _run(2, "success", V4)], V4_TARGET)
    assert (got.selected, got.sub_ranges) == ((), ())
    assert got.text() == "re-runs 0 of 2 intervals: nothing to re-run; 2 already on version 4"
    one = select(_days(1), [_run(1, "success", V4)], Select(code_version=1))
    assert one.text() == "re-runs 0 of 1 interval: nothing to re-run; 1 already on version 1 or newer"


def test_everything_selected_says_no_on_target_part() -> None:
    got = select(_days(1, 2), [], V4_TARGET)
    assert got.text() == "re-runs 2 of 2 intervals in 1 backfill: 2 never ran"
    assert got.sub_ranges == ((_d(1), _d(2)),)


def test_sub_ranges_at_both_ends() -> None:
    ordered = _days(1, 2, 3, 4, 5)
    assert sub_ranges(ordered, _days(1, 5)) == ((_d(1), _d(1)), (_d(5), _d(5)))
    assert sub_ranges(ordered, _days(1, 2, 4, 5)) == ((_d(1), _d(2)), (_d(4), _d(5)))
    assert sub_ranges(ordered, []) == ()


def test_the_max_backfills_bound_refuses_with_the_count() -> None:
    runs = [_run(d, "success", V3 if d % 2 else V4) for d in range(1, 46)]  # 23 odd days on old code, alone
    got = select(_days(*range(1, 46)), runs, V4_TARGET)
    assert len(got.sub_ranges) == 23
    assert too_many(got, 20) == (
        "select makes 23 backfills (contiguous sub-ranges of the 23 selected intervals); the policy allows at most "
        "20 (max_backfills): narrow the range, or raise max_backfills in a reviewed policy change"
    )
    assert too_many(got, 23) is None
    assert too_many(got, 22) is not None


def test_max_backfills_defaults_to_20_and_reads_the_matching_rule() -> None:
    assert MAX_BACKFILLS == 20
    assert max_backfills(Policy(), "d") == 20
    assert max_backfills(Policy(rules=(Rule(("d*",)),)), "d") == 20
    assert max_backfills(Policy(rules=(Rule(("d*",), max_backfills=3),)), "dx") == 3
    assert max_backfills(Policy(rules=(Rule(("e*",), max_backfills=3),)), "dx") == 20


def test_code_moved_says_when_the_latest_code_is_not_the_target() -> None:
    assert code_moved(V4_TARGET, V4) is None
    assert code_moved(V4_TARGET, None) is None
    assert code_moved(V4_TARGET, V5) == (
        "the DAG's latest code is DAG version 5, not the reviewed target (version 4): its runs would use code nobody "
        "reviewed for this backfill; " + NEW_TARGET
    )
    assert code_moved(V4_TARGET, V3) is not None  # older than the target: the selected runs would not reach it
    sha = Select(bundle_version="abc")
    assert code_moved(sha, DagVersion(7, "abc")) is None
    assert code_moved(sha, DagVersion(7, "def")) == (
        "the DAG's latest code is DAG version 7 (bundle def), not the reviewed target (bundle abc): its runs would "
        "use code nobody reviewed for this backfill; " + NEW_TARGET
    )
    assert code_moved(sha, DagVersion(7)) is not None


def test_more_failed_intervals_are_each_counted() -> None:
    runs = [_run(1, "failed", V4), _run(2, "failed", V4), _run(3, "success", V4)]
    got = select(_days(1, 2, 3), runs, V4_TARGET)
    assert (got.failed, got.never_ran, got.off_target) == (2, 0, 0)


def test_a_run_without_a_date_does_not_end_the_reading() -> None:
    undated = DagRun("x", None, "success", None, None)
    assert latest_runs([undated, _run(1, "success", V4)]) == {_d(1): _run(1, "success", V4)}


def test_select_cannot_change_once_applied_its_sub_ranges_were_chosen_for_its_target() -> None:
    applied = spec("s", reprocess_behavior=ReprocessBehavior.COMPLETED, select=Select(4))
    assert applied.identity()["select"] == {"code_version": 4}
    assert applied.with_identity(applied.identity()).select == Select(4)
    assert edited_fields(applied.identity(), False, replace(applied, select=Select(5))) == (
        FieldChange("select", {"code_version": 4}, {"code_version": 5}),
    )
    bundle = replace(applied, select=Select(bundle_version="abc"))
    assert edited_fields(applied.identity(), False, bundle) == (
        FieldChange("select", {"code_version": 4}, {"bundle_version": "abc"}),
    )
    assert edited_fields(applied.identity(), False, replace(applied, select=None))[0].after is None
    assert "select" not in spec("t").identity()  # identities stored before select hold
    assert edited_fields(applied.identity(), False, applied) == ()


def test_an_interval_in_flight_is_never_re_run_and_splits_the_sub_range_around_it() -> None:
    runs = [
        _run(1, "success", V3),
        _run(2, "running", V4),  # cleared by hand, running on the target now: Airflow's dry run leaves it out
        _run(3, "success", V3),
        _run(4, "queued"),  # queued, no code yet: in flight all the same
        _run(5, "success", V3),
    ]
    assert in_flight(runs) == (_d(2), _d(4))
    got = select([_d(1), _d(3), _d(5), *in_flight(runs)], runs, V4_TARGET)
    assert got.selected == (_d(1), _d(3), _d(5))
    assert got.sub_ranges == ((_d(1), _d(1)), (_d(3), _d(3)), (_d(5), _d(5)))
    assert (got.in_flight, got.on_target, got.as_json()["in_flight"]) == (2, 0, 2)
    assert got.text() == (
        "re-runs 3 of 5 intervals in 3 backfills: 3 on version 3 or older; 0 already on version 4; 2 in flight "
        "(never re-run)"
    )
    quiet = select([_d(1)], runs[:1], V4_TARGET)
    assert (quiet.in_flight, quiet.text()) == (0, "re-runs 1 of 1 interval in 1 backfill: 1 on version 3 or older")


# --- merge_sub_ranges: joining the closest sub-ranges ----------------------------------------------------------


def _scattered() -> Selection:
    """Days 1-10: on the target but 1, 3-4, 7, 10 (older code), with day 9 running: sub-ranges 1, 3-4, 7, 10; the
    gaps between them hold day 2 (1 interval), days 5-6 (2), days 8-9 (day 9 in flight: never joined)."""
    old = [_run(d, "success", V3) for d in (1, 3, 4, 7, 10)]
    on = [_run(d, "success", V4) for d in (2, 5, 6, 8)]
    return select(_days(*range(1, 11)), [*old, *on, _run(9, "running", V4)], V4_TARGET)


def test_the_gaps_between_sub_ranges_name_their_on_target_intervals_or_an_interval_in_flight() -> None:
    got = _scattered()
    assert got.sub_ranges == ((_d(1), _d(1)), (_d(3), _d(4)), (_d(7), _d(7)), (_d(10), _d(10)))
    assert got.gaps == ((_d(2),), (_d(5), _d(6)), None)
    assert (got.mergeable, got.in_flight) == (2, 1)


def test_merging_joins_across_the_fewest_on_target_intervals_and_says_so() -> None:
    got = merged(_scattered(), 3)
    assert got.sub_ranges == ((_d(1), _d(4)), (_d(7), _d(7)), (_d(10), _d(10)))
    assert got.selected == tuple(_days(1, 2, 3, 4, 7, 10))
    assert (got.merged, got.gaps, got.on_target) == (1, ((_d(5), _d(6)), None), 3)
    assert got.text() == (
        "re-runs 6 of 10 intervals in 3 backfills: 5 on version 3 or older; 1 on version 4 re-run to join "
        "sub-ranges; 3 already on version 4; 1 in flight (never re-run)"
    )
    assert got.as_json()["merged"] == 1
    twice = merged(_scattered(), 2)
    assert twice.sub_ranges == ((_d(1), _d(7)), (_d(10), _d(10)))
    assert (twice.merged, len(twice.selected)) == (3, 8)
    assert merged(got, 2) == twice  # joined in steps or at once: the same


def test_merging_never_joins_across_an_interval_in_flight_nor_when_it_cannot_reach_the_limit() -> None:
    scattered = _scattered()
    assert merged(scattered, 1) is scattered  # the gap with day 9 running cannot close: refused with its count
    assert merged(scattered, 4) is scattered  # within the limit
    assert "merged" not in scattered.as_json()
    assert too_many(merged(scattered, 1), 1) == (
        "select makes 4 backfills (contiguous sub-ranges of the 5 selected intervals); the policy allows at most 1 "
        "(max_backfills): narrow the range, or raise max_backfills in a reviewed policy change"
    )


def test_ties_join_the_earliest_gap_first() -> None:
    runs = [_run(d, "success", V3 if d % 2 else V4) for d in range(1, 8)]  # 1, 3, 5, 7 older: every gap one day
    got = merged(select(_days(*range(1, 8)), runs, V4_TARGET), 3)
    assert got.sub_ranges == ((_d(1), _d(3)), (_d(5), _d(5)), (_d(7), _d(7)))


# --- a lost store: the sub-ranges read again -------------------------------------------------------------------


def test_after_a_lost_store_the_sub_ranges_are_the_chunks_run_then_the_selection_beyond_them() -> None:
    # now: days 1 and 3 were re-run on the target by the chunks found; 5-6 are still old, 8 failed since
    runs = [_run(d, "success", V4) for d in (1, 2, 3, 4, 7)] + [_run(5, "success", V3), _run(6, "success", V3)]
    now = select(_days(*range(1, 9)), [*runs, _run(8, "failed", V4)], V4_TARGET)
    chunks = [(_d(1), _d(1)), (_d(3), _d(3))]
    assert rederived(now, chunks, backwards=False) == ((_d(1), _d(1)), (_d(3), _d(3)), (_d(5), _d(6)), (_d(8), _d(8)))
    assert rederived(now, [], backwards=False) == now.sub_ranges
    # backwards: the chunks ran from the end; what is left lies before the earliest
    late = [(_d(8), _d(8))]
    assert rederived(now, late, backwards=True) == ((_d(5), _d(6)), (_d(8), _d(8)))


def test_a_sub_range_that_straddles_the_last_chunk_is_clipped_to_its_selected_intervals_beyond_it() -> None:
    runs = [_run(d, "success", V3) for d in (2, 3, 4)] + [_run(1, "success", V4)]
    now = select(_days(1, 2, 3, 4), runs, V4_TARGET)  # one sub-range, days 2-4
    assert rederived(now, [(_d(1), _d(2))], backwards=False) == ((_d(1), _d(2)), (_d(3), _d(4)))
    assert rederived(now, [(_d(4), _d(4))], backwards=True) == ((_d(2), _d(3)), (_d(4), _d(4)))
