"""Which code made the history a create re-runs (pure): each interval's latest run, its latest DAG version."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from controller.core.model.airflow import DagRun, DagVersion
from controller.core.rules.code_history import CodeInRange, code_in_range

DAY = timedelta(days=1)
JAN1 = datetime(2025, 1, 1, tzinfo=UTC)


def _run(day: int, state: str, *versions: DagVersion, queued: int = 0, logical: bool = True) -> DagRun:
    return DagRun(
        f"r{day}-{queued}",
        JAN1 + (day - 1) * DAY if logical else None,
        state,
        None,
        None,
        queued_at=JAN1 + queued * timedelta(minutes=1),
        dag_versions=versions,
    )


V3, V4, B = DagVersion(3), DagVersion(4), DagVersion(4, "abc123")


def test_each_interval_counts_once_by_its_latest_run_and_its_latest_code() -> None:
    runs = [
        _run(1, "success", V3),
        _run(2, "failed", V3),
        _run(2, "success", V3, V4, queued=5),  # re-run later: this is interval 2's latest, on version 4
        _run(3, "failed", V4),
        _run(4, "queued"),
        _run(9, "success", V4, logical=False),  # a partition's run: no interval of this range
    ]
    code = code_in_range(runs, 6)
    assert code == CodeInRange(((V4, 2), (V3, 1), (None, 1)), failed=1, without_run=2)
    assert code.text() == (
        "code in range: DAG version 4: 2 intervals, DAG version 3: 1 interval, no DAG version recorded: 1 interval; "
        "1 failed, 2 intervals without a run"
    )
    assert code.as_json() == {
        "versions": [
            {"version_number": 4, "bundle_version": None, "intervals": 2},
            {"version_number": 3, "bundle_version": None, "intervals": 1},
            {"version_number": None, "bundle_version": None, "intervals": 1},
        ],
        "failed": 1,
        "without_run": 2,
    }


def test_bundle_versions_are_their_own_code_and_unknown_intervals_say_nothing_of_gaps() -> None:
    code = code_in_range([_run(1, "success", B), _run(2, "success", V4)], None)
    assert code.text() == "code in range: DAG version 4 (bundle abc123): 1 interval, DAG version 4: 1 interval"
    assert code.without_run is None
    assert code_in_range([], 3).text() == "code in range: no runs yet; 3 intervals without a run"


def test_partition_runs_are_no_interval_and_equal_numbers_order_by_their_bundle() -> None:
    partition = DagRun("p", None, "success", None, None, partition_key="k", partition_date=JAN1, dag_versions=(V3,))
    bundles = [_run(1, "success", DagVersion(4, "bbb")), _run(2, "success", DagVersion(4, "aaa")), partition]
    code = code_in_range(bundles, 1)  # more intervals with a run than counted: none without one
    assert code == CodeInRange(((DagVersion(4, "aaa"), 1), (DagVersion(4, "bbb"), 1)), failed=0, without_run=0)
    assert code.as_json()["versions"][0] == {"version_number": 4, "bundle_version": "aaa", "intervals": 1}
    tie = [_run(1, "failed", V3, queued=2), _run(1, "success", V4, queued=2), _run(2, "success", V3)]
    assert code_in_range(tie, 2) == CodeInRange(((V4, 1), (V3, 1)), failed=0, without_run=0)  # a tie: the later listed
