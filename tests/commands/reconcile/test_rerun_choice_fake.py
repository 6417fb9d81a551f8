"""Issue 23's last gap: in a pass over several DAGs their infos come from the DAG listing, which has no
`rerun_with_latest_version`; the create of a spec that does not say must still send the DAG's own choice. So a
DAG a create will start on has its details read, once, before the create body is built; a DAG with no planned
create, or whose spec sets `run_on_latest_version`, has none read (a pass stays O(1) calls per backfill)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from tests.commands.reconcile.harness import Bench, fake
from tests.fakes.airflow import DEMO_DAGS, FakeAirflow
from tests.fakes.calls import record_calls


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[Bench]:
    pinned = [replace(d, rerun_with_latest_version=False) if d.dag_id == "demo_daily" else d for d in DEMO_DAGS]
    b = Bench(tmp_path, fake=FakeAirflow(dags=pinned))
    yield b
    b.close()


def _sent(bench: Bench) -> dict[str, object]:
    """DAG → the `run_on_latest_version` each create body carried."""
    return {
        body["dag_id"]: body.get("run_on_latest_version")
        for method, path, body in fake(bench).bodies
        if (method, path) == ("POST", "/api/v2/backfills")
    }


def test_a_listed_dag_whose_details_say_false_gets_a_create_with_false_and_only_creating_dags_are_read(
    bench: Bench,
) -> None:
    fake(bench).scheduler_running = False
    bench.spec("earlier", dag="demo_tz")
    assert [o.value for _i, o in bench.run().applied] == ["created"]  # running from now on: no create for it
    bench.spec("pinned", dag="demo_daily")
    bench.spec("plain", dag="demo_hourly", end="2025-01-01T06:00:00Z")
    bench.spec("explicit", dag="demo_flaky", run_on_latest_version="true")
    reconciler = bench.reconciler()
    calls = record_calls(reconciler.client)
    result = reconciler.run_once()
    assert sorted((i.spec, o.value) for i, o in result.applied) == [
        ("explicit", "created"),
        ("pinned", "created"),
        ("plain", "created"),
    ]
    assert _sent(bench) == {"demo_tz": True, "demo_daily": False, "demo_hourly": True, "demo_flaky": True}
    assert sorted(p for m, p in calls if p.endswith("/details")) == [
        "/api/v2/dags/demo_daily/details",
        "/api/v2/dags/demo_hourly/details",
    ]
    assert calls.count(("GET", "/api/v2/dags")) == 1
    code = {i.spec: i.code for i in result.plan.items}
    assert code["pinned"] == (
        "Airflow 3.3.2: new runs: the latest DAG version; re-runs: the DAG version each run first ran with "
        "(the DAG's rerun_with_latest_version: false)"
    )
    assert code["plain"] == "Airflow 3.3.2: every run: the latest DAG version (run_on_latest_version: true)"


def test_a_pass_with_no_planned_create_reads_no_details(bench: Bench) -> None:
    fake(bench).scheduler_running = False
    bench.spec("one", dag="demo_daily")
    bench.spec("two", dag="demo_hourly", end="2025-01-01T06:00:00Z")
    assert len(bench.run().applied) == 2
    reconciler = bench.reconciler()
    calls = record_calls(reconciler.client)
    assert reconciler.run_once().applied == []
    assert [p for _m, p in calls if p.endswith("/details")] == []
    assert calls.count(("GET", "/api/v2/dags")) == 1
