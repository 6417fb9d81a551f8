"""`drain_dag` against a real Airflow on every line (BACKFILLCTL_TEST_AIRFLOW_VERSION): on 3.4 a drained backfill
creates no scheduled run of its DAG and leaves the DAG paused, which backfillctl never undoes (the next spec on the
DAG waits for a person, told why); before 3.4 the spec is refused before any backfill call.

demo_guard_c and dates in 2023: the guard tests use the DAG in 2022 only, and the DAG is unpaused again at the end.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.core.model.capabilities import Capabilities
from tests.commands.reconcile.harness import Bench, real_bench

pytestmark = [pytest.mark.airflow, pytest.mark.every_line]
DAG = "demo_guard_c"


@pytest.fixture
def bench(tmp_path: Path, airflow_url: str) -> Iterator[Bench]:
    with real_bench(tmp_path, airflow_url, DAG) as made:
        try:
            yield made
        finally:
            with made.client() as client:  # the test's own clean-up: backfillctl never unpauses a DAG
                client.server.json("PATCH", f"/api/v2/dags/{DAG}", json={"is_paused": False})


def scheduled_runs(bench: Bench) -> int:
    with bench.client() as client:
        path = f"/api/v2/dags/{DAG}/dagRuns"
        return int(client.server.json("GET", path, params={"run_type": "scheduled", "limit": 1})["total_entries"])


def test_a_drain_leaves_the_dag_paused_and_is_refused_before_3_4(bench: Bench, airflow_caps: Capabilities) -> None:
    bench.policy(f"version: 1\ndrain:\n  allowed_dags: [{DAG}]\n")
    bench.spec("drained", dag=DAG, start="2023-03-01", end="2023-03-03", mar=3, drain_dag="true")
    if not airflow_caps.drain_dag:
        first = bench.run()
        (item,) = first.plan.items
        assert item.reason == (
            f"Airflow refuses it: drain_dag: true needs Airflow 3.4 or newer; Airflow {airflow_caps.version} cannot "
            "keep the DAG's scheduled runs from being created while the backfill runs (remove the field, or upgrade "
            "Airflow)"
        )
        assert [r for r in bench.sent if r.url.path.startswith("/api/v2/backfills") and r.method != "GET"] == []
        return
    before = scheduled_runs(bench)
    (planned,) = bench.reconciler().plan().plan.items  # the plan reads the DAG's catchup from its details
    assert planned.drain is not None
    assert (planned.drain.schedule, planned.drain.catchup, planned.drain.on_unpause) == ("0 0 * * *", False, "skipped")
    done = bench.until_terminal(passes=40, wait=lambda: time.sleep(3))
    assert bench.phases(done) == {"drained": "Succeeded"}
    (finished,) = done.current.items
    assert finished.reason.endswith(
        f"DAG {DAG} is paused by drain (not a stop) once none of its runs is left unfinished: backfillctl never "
        "unpauses it, and specs "
        "queued on it wait until a person unpauses it"
    )
    (create,) = [r for r in bench.sent if r.method == "POST" and r.url.path == "/api/v2/backfills"]
    assert json.loads(create.content)["drain_dag"] is True
    with bench.client() as client:
        for _ in range(40):  # the scheduler pauses the DAG once nothing of the drain is left
            if client.dag(DAG, with_tasks=False).is_paused:
                break
            time.sleep(2)
        assert client.dag(DAG, with_tasks=False).is_paused
    assert scheduled_runs(bench) == before  # no scheduled run was created during the drain

    next_waits_for_a_person(bench, DAG, "2023-03-05", "2023-03-06")


def next_waits_for_a_person(bench: Bench, dag: str, start: str, end: str) -> None:
    """The next spec on a DAG a drain paused is Blocked, saying why; backfillctl never unpauses the DAG."""
    bench.spec("next", dag=dag, start=start, end=end, mar=3)
    after = bench.run()
    assert [(i.spec, i.phase.value, i.reason) for i in after.plan.items if i.spec == "next"] == [
        (
            "next",
            "Blocked",
            f"DAG {dag} is paused by drain (spec drained set drain_dag; not a stop): backfillctl never unpauses a "
            "DAG; specs queued on it wait until a person unpauses it",
        )
    ]
    assert [r for r in bench.sent if r.url.path == f"/api/v2/dags/{dag}" and r.method == "PATCH"] == []
