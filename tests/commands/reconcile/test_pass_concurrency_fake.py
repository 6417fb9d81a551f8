"""A pass's Airflow calls at once: at most BACKFILLCTL_AIRFLOW_MAX_CONCURRENCY in flight (default 2), dry runs one at
a time (each scans Airflow's metadata database), creates one after the other in the plan's order (Airflow
serialises them), and a steady pass costs the same calls per live spec however many there are."""

from __future__ import annotations

import json
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from tests.commands.reconcile.harness import Bench, count_calls
from tests.fakes.airflow import Dag, FakeAirflow

HOLD = 0.03  # seconds each gated call stays in flight: long enough for the others to pile up behind the bound
CREATE = ("POST", "/api/v2/backfills")
DRY_RUN = ("POST", "/api/v2/backfills/dry_run")


class InFlight:
    """The fake's handler held `HOLD` seconds a call, counting the calls in flight, all of them and by kind."""

    def __init__(self, process: Callable[[httpx.Request], httpx.Response]) -> None:
        self.process, self.lock = process, threading.Lock()
        self.now: Counter[str] = Counter()
        self.peak: Counter[str] = Counter()
        self.created: list[str] = []  # the DAGs of the creates, in the order Airflow received them

    def __call__(self, request: httpx.Request) -> httpx.Response:
        kinds = ["all", f"{request.method} {request.url.path}"]
        with self.lock:
            for kind in kinds:
                self.now[kind] += 1
                self.peak[kind] = max(self.peak[kind], self.now[kind])
            if (request.method, request.url.path) == CREATE:
                self.created.append(json.loads(request.content)["dag_id"])
        time.sleep(HOLD)
        try:
            return self.process(request)
        finally:
            with self.lock:
                self.now.subtract(kinds)


def gated(bench: Bench, monkeypatch: pytest.MonkeyPatch) -> InFlight:
    assert bench.fake is not None
    counter = InFlight(bench.fake._process)
    monkeypatch.setattr(bench.fake, "_process", counter)
    return counter


def dags(count: int) -> FakeAirflow:
    fake = FakeAirflow(dags=[Dag(f"dag_{n}") for n in range(count)])
    fake.scheduler_running = False
    return fake


def test_a_pass_creating_on_six_dags_has_two_calls_in_flight_one_dry_run_and_one_create_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = Bench(tmp_path, fake=dags(6))
    for n in range(6):
        bench.spec(f"spec-{n}", dag=f"dag_{n}", run_on_latest_version="true")
    counter = gated(bench, monkeypatch)
    result = bench.run()
    bench.close()
    assert [(i.spec, o.value) for i, o in result.applied] == [(f"spec-{n}", "created") for n in range(6)]
    assert counter.created == [f"dag_{n}" for n in range(6)]  # in the plan's order
    assert (counter.peak["all"], counter.peak["POST /api/v2/backfills/dry_run"]) == (2, 1)
    assert counter.peak["POST /api/v2/backfills"] == 1


def test_the_bound_is_the_settings_and_still_one_dry_run_at_a_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bench = Bench(tmp_path, fake=dags(6))
    bench.max_concurrency = 5  # BACKFILLCTL_AIRFLOW_MAX_CONCURRENCY=5
    for n in range(6):
        bench.spec(f"spec-{n}", dag=f"dag_{n}", run_on_latest_version="true")
    counter = gated(bench, monkeypatch)
    bench.run()
    bench.close()
    assert (counter.peak["all"], counter.peak["POST /api/v2/backfills/dry_run"]) == (5, 1)
    assert counter.peak["POST /api/v2/backfills"] == 1


def steady_calls(tmp_path: Path, live: int) -> Counter[str]:
    """The calls of the pass after the one that created `live` specs' backfills, one a DAG, all still running."""
    bench = Bench(tmp_path, fake=dags(live))
    for n in range(live):
        bench.spec(f"spec-{n}", dag=f"dag_{n}", run_on_latest_version="true")
    assert [o.value for _i, o in bench.run().applied] == ["created"] * live
    assert bench.fake is not None
    before = len(bench.fake.requests)
    assert bench.run().applied == []
    calls = count_calls(bench.fake.requests[before:])
    bench.close()
    return calls


@pytest.mark.parametrize("live", [3, 12])
def test_a_steady_pass_costs_two_calls_a_live_spec_and_one_listing_whatever_their_number(
    tmp_path: Path, live: int
) -> None:
    calls = steady_calls(tmp_path, live)
    assert calls == {
        "GET /api/v2/backfills": live,  # each DAG's newest backfills
        **{f"GET /api/v2/dags/dag_{n}/dagRuns": 1 for n in range(live)},  # each running backfill's runs
        "GET /api/v2/dags": 1,  # every DAG's details, one listing
        "POST /auth/token": 1,
    }
    assert sum(calls.values()) == 2 * live + 2
