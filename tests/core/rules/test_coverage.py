"""Version coverage (pure): each interval's latest run, succeeded on the target DAG version or not, and why not."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from controller.core.model.airflow import DagRun, DagVersion
from controller.core.model.coverage import DISCLAIMER, Coverage, Gap, Missed, TargetSource
from controller.core.rules.coverage import changed_since, coverage, judged, latest_runs

DAY = timedelta(days=1)
JAN1 = datetime(2025, 1, 1, tzinfo=UTC)
ENDED = JAN1 + 10 * DAY
V3, V4, B4 = DagVersion(3), DagVersion(4), DagVersion(4, "abc123")


def _day(n: int) -> datetime:
    return JAN1 + (n - 1) * DAY


def _run(day: int, state: str, *versions: DagVersion, queued: datetime | None = JAN1, key: str | None = None) -> DagRun:
    """A run of interval `day`; with `key`, a partitioned DAG's run (partition date, no logical date)."""
    date = _day(day)
    return DagRun(
        f"r{day}-{queued}",
        None if key else date,
        state,
        None,
        None,
        partition_key=key,
        partition_date=date if key else None,
        queued_at=queued,
        dag_versions=versions,
    )


def test_each_interval_is_judged_by_its_latest_run_and_every_gap_is_named() -> None:
    runs = [
        _run(1, "success", V4),
        _run(2, "failed", V4),
        _run(3, "success", V3),  # other code, made before the spec ended
        _run(4, "success", V4),
        _run(4, "success", V3, queued=ENDED + DAY),  # re-run since on the old code: its latest run decides
        _run(5, "running", V4),
        _run(6, "success", V3, V4),  # re-run on the target (its first try ran on 3): covered
        _run(10, "success", V4, V3),  # its latest try ran on 3 (a versioned bundle's listing): other code
        _run(7, "success"),  # no version recorded
        _run(8, "failed", V3, queued=JAN1),
        _run(8, "success", V4, queued=JAN1 + DAY),  # re-run later on the target: covered
    ]
    result = coverage(runs, V4, [_day(1), _day(9)], ended=ENDED)
    assert result == Coverage(
        V4,
        TargetSource.AT_END,
        intervals=10,
        covered=3,
        missed=(
            Missed("2025-01-02T00:00:00+00:00", Gap.FAILED, (V4,)),
            Missed("2025-01-03T00:00:00+00:00", Gap.OTHER_CODE, (V3,)),
            Missed("2025-01-04T00:00:00+00:00", Gap.RERUN_OTHER_CODE, (V3,)),
            Missed("2025-01-05T00:00:00+00:00", Gap.UNFINISHED, (V4,)),
            Missed("2025-01-07T00:00:00+00:00", Gap.OTHER_CODE),
            Missed("2025-01-09T00:00:00+00:00", Gap.NEVER_RAN),
            Missed("2025-01-10T00:00:00+00:00", Gap.OTHER_CODE, (V4, V3)),
        ),
    )
    assert not result.holds
    assert result.text() == (
        "version coverage: 3 of 10 intervals on DAG version 4 (1 failed, 1 never ran, 3 other code, "
        "1 queued or running, 1 re-run since on other code)"
    )
    assert [m.text() for m in result.missed[:2]] == [
        "2025-01-02T00:00:00+00:00 (failed: DAG version 4)",
        "2025-01-03T00:00:00+00:00 (other code: DAG version 3)",
    ]
    assert [m.text() for m in result.missed[-2:]] == [
        "2025-01-09T00:00:00+00:00 (never ran)",
        "2025-01-10T00:00:00+00:00 (other code: DAG version 4, DAG version 3)",
    ]


def test_full_coverage_holds_and_says_so_in_one_line() -> None:
    result = coverage([_run(1, "success", V4), _run(2, "success", V4)], V4, [_day(1), _day(2)], ended=None)
    assert result.holds
    assert (result.intervals, result.covered) == (2, 2)
    assert result.text() == "version coverage: 2 of 2 intervals on DAG version 4"
    empty = coverage([], V4, [], ended=None)
    assert (empty.holds, empty.intervals, empty.covered) == (True, 0, 0)


def test_a_bundle_version_is_part_of_the_target() -> None:
    """A bundle change with the same version number is other code (SHAs have no order)."""
    result = coverage([_run(1, "success", V4), _run(2, "success", B4)], B4, [], ended=None)
    assert result.covered == 1
    assert result.missed == (Missed("2025-01-01T00:00:00+00:00", Gap.OTHER_CODE, (V4,)),)
    assert result.text() == "version coverage: 1 of 2 intervals on DAG version 4 (bundle abc123) (1 other code)"


@pytest.mark.parametrize(
    ("queued", "ended", "gap"),
    [
        (ENDED + timedelta(microseconds=1), ENDED, Gap.RERUN_OTHER_CODE),
        (ENDED, ENDED, Gap.OTHER_CODE),  # queued at the end itself: not since
        (None, ENDED, Gap.OTHER_CODE),  # no queue time: not said
        (ENDED + DAY, None, Gap.OTHER_CODE),  # the end not known: not said
    ],
)
def test_re_run_since_needs_a_queue_time_after_the_end(
    queued: datetime | None, ended: datetime | None, gap: Gap
) -> None:
    result = coverage([_run(1, "success", V3, queued=queued)], V4, [], ended=ended)
    assert result.missed == (Missed("2025-01-01T00:00:00+00:00", gap, (V3,)),)


def test_a_failed_rerun_since_is_failed_and_queued_counts_as_unfinished() -> None:
    runs = [_run(1, "failed", V4, queued=ENDED + DAY), _run(2, "queued", queued=None)]
    assert coverage(runs, V4, [], ended=ENDED).missed == (
        Missed("2025-01-01T00:00:00+00:00", Gap.FAILED, (V4,)),
        Missed("2025-01-02T00:00:00+00:00", Gap.UNFINISHED),
    )


def test_partitions_are_keyed_by_partition_date_and_named_by_their_key() -> None:
    runs = [
        DagRun("manual", None, "success", None, None, dag_versions=(V3,)),  # neither date: no interval
        _run(1, "success", V3, key="2025-01-01", queued=JAN1),
        _run(1, "success", V4, key="2025-01-01", queued=JAN1 + DAY),  # the partition re-processed: latest decides
        _run(2, "failed", V4, key="2025-01-02"),
    ]
    result = coverage(runs, V4, [_day(1), _day(3)], ended=None)
    assert (result.intervals, result.covered) == (3, 1)
    assert result.missed == (
        Missed("2025-01-02", Gap.FAILED, (V4,)),
        Missed("2025-01-03T00:00:00+00:00", Gap.NEVER_RAN),
    )


def test_the_latest_run_is_by_queue_time_and_a_tie_goes_to_the_later_read() -> None:
    first, second = _run(1, "failed", V4, queued=JAN1), _run(1, "success", V4, queued=JAN1)
    assert latest_runs([first, second]) == {JAN1: second}
    unqueued = _run(1, "success", V3, queued=None)
    assert latest_runs([first, unqueued]) == {JAN1: first}  # no queue time sorts oldest
    assert latest_runs([unqueued, first]) == {JAN1: first}


def test_stored_coverage_reads_back_and_changes_are_the_new_gaps() -> None:
    before = coverage([_run(1, "success", V4), _run(2, "failed", B4)], B4, [], ended=ENDED)
    document = before.as_json()
    assert document == {
        "target": {"version_number": 4, "bundle_version": "abc123"},
        "target_source": "at_end",
        "intervals": 2,
        "covered": 0,
        "holds": False,
        "missed": [
            {
                "interval": "2025-01-01T00:00:00+00:00",
                "gap": "other code",
                "code": [{"version_number": 4, "bundle_version": None}],
            },
            {
                "interval": "2025-01-02T00:00:00+00:00",
                "gap": "failed",
                "code": [{"version_number": 4, "bundle_version": "abc123"}],
            },
        ],
    }
    assert Coverage.from_json(document) == before
    now_source = coverage([], V4, [], ended=None, source=TargetSource.NOW)
    assert Coverage.from_json(now_source.as_json()).source is TargetSource.NOW
    later = coverage([_run(1, "success", V4), _run(2, "failed", B4), _run(3, "success", V3)], B4, [], ended=ENDED)
    assert changed_since(before, later) == (Missed("2025-01-03T00:00:00+00:00", Gap.OTHER_CODE, (V3,)),)
    assert changed_since(later, before) == ()


def test_the_disclaimer_says_what_coverage_is_not() -> None:
    assert DISCLAIMER == (
        "Version coverage is evidence from Airflow's metadata about which code ran, not proof that the outputs are "
        "correct."
    )
    assert TargetSource.AT_END.value == "the DAG's latest version when the spec ended"


def test_read_again_against_the_target_recorded_at_the_end_else_the_latest_now() -> None:
    runs = [_run(1, "success", V3), _run(2, "success", V4)]
    at_end = coverage([_run(1, "success", V3)], V3, [], ended=ENDED)
    again = judged(runs, [_day(3)], stored=at_end, latest=V4, ended=ENDED)
    assert again == coverage(runs, V3, [_day(3)], ended=ENDED)
    assert again is not None
    assert (again.source, again.intervals) == (TargetSource.AT_END, 3)
    now = judged(runs, [], stored=None, latest=V4, ended=None)
    assert now == coverage(runs, V4, [], ended=None, source=TargetSource.NOW)
    assert judged(runs, [], stored=None, latest=None, ended=ENDED) is None
    stored_now = coverage([], V4, [], ended=None, source=TargetSource.NOW)
    assert judged(runs, [], stored=stored_now, latest=V3, ended=None) == now
