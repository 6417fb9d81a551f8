"""Selecting by code against the real Apache Airflow: a `select` spec pinned to the DAG's latest version re-runs
only the intervals whose latest run failed or never ran, one backfill a contiguous sub-range (checked in Airflow),
and never touches an interval already on the target."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.reconcile.harness import Bench

pytestmark = pytest.mark.airflow


def test_a_select_spec_creates_backfills_over_exactly_the_selected_sub_ranges(tmp_path: Path, airflow_url: str) -> None:
    bench = Bench(tmp_path, url=airflow_url)
    try:
        client = bench.client()
        # demo_flaky fails odd days: March 1 and 3 fail, 2 and 4 succeed; March 5 never runs
        bench.spec("history", dag="demo_flaky", start="2016-03-01", end="2016-03-04", reprocess="none", mar=4)
        bench.until_terminal(passes=60, wait=lambda: time.sleep(2))
        info = client.dag("demo_flaky", with_tasks=False)
        assert info.latest_version is not None
        before = {b.id for b in client.list_backfills("demo_flaky")}
        low, high = datetime(2016, 3, 1, tzinfo=UTC), datetime(2016, 3, 5, tzinfo=UTC)
        kept = {r.logical_date: r.start_date for r in client.dag_runs("demo_flaky", low, high) if r.state == "success"}
        bench.spec(
            "fix",
            dag="demo_flaky",
            start="2016-03-01",
            end="2016-03-05",
            reprocess="completed",
            mar=2,
            select=f"{{code_version: {info.latest_version.number}}}",
        )
        plan, _, _ = bench.reconciler().plan()
        (item,) = [i for i in plan.items if i.spec == "fix"]
        assert item.selection is not None
        assert item.selection.text() == (
            f"re-runs 3 of 5 intervals in 3 backfills: 2 failed; 1 never ran; 2 already on version "
            f"{info.latest_version.number}"
        )
        last = bench.until_terminal(passes=90, wait=lambda: time.sleep(2))
        made = sorted(
            (b.from_date.day, b.to_date.day, b.reprocess_behavior, b.max_active_runs)
            for b in client.list_backfills("demo_flaky")
            if b.id not in before
        )
        after = {r.logical_date: r.start_date for r in client.dag_runs("demo_flaky", low, high) if r.state == "success"}
    finally:
        bench.close()
    assert made == [(1, 1, "completed", 2), (3, 3, "completed", 2), (5, 5, "completed", 2)]
    assert (next(i for i in last.plan.items if i.spec == "fix")).phase.value == "CompletedWithFailures"
    assert {d: s for d, s in after.items() if d in kept} == kept  # March 2 and 4 were never re-run
