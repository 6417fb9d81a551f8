"""What creating costs: per created spec its DAG's backfills, a dry run, one read of its range and the POST (4
calls), and no read after the create: the create's answer is the new backfill and its dry run listed the runs it
made, queued. The next pass reads them as it reads any running backfill's. (A spec that leaves re-runs to the
DAG's `rerun_with_latest_version` adds its DAG's details read on Airflow 3.3+: test_rerun_choice_fake.py.)"""

from __future__ import annotations

import json
import threading

import httpx
import pytest

from tests.commands.reconcile.harness import Bench, count_calls, fake

DAGS = ("demo_daily", "demo_tz", "demo_flaky", "demo_finance_ledger")


def test_each_created_spec_costs_exactly_four_calls_and_none_after_the_create(bench: Bench) -> None:
    fake(bench).scheduler_running = False
    for n, dag in enumerate(DAGS):
        bench.spec(f"make-{n}", dag=dag, run_on_latest_version="true")
    result = bench.run()
    assert [o.value for _i, o in result.applied] == ["created"] * len(DAGS)
    calls = count_calls(fake(bench).requests)
    per_dag = {
        "GET /api/v2/backfills": len(DAGS),
        "POST /api/v2/backfills/dry_run": len(DAGS),
        "POST /api/v2/backfills": len(DAGS),
        **{f"GET /api/v2/dags/{dag}/dagRuns": 1 for dag in DAGS},  # the range read before; none after
    }
    assert calls == {**per_dag, "POST /auth/token": 1, "GET /api/v2/dags": 1}
    assert sum(per_dag.values()) == 4 * len(DAGS)


def test_after_the_create_the_pass_shows_the_dry_runs_dates_queued_and_the_next_pass_reads_them(
    bench: Bench,
) -> None:
    fake(bench).scheduler_running = False
    bench.spec("made")
    first = bench.run()
    made = {i.spec: i.runs for i in first.current.items}["made"]
    assert made is not None
    assert dict(made.counts) == {"queued": 7}
    assert bench.phases(first) == {"made": "Running"}
    fake(bench).start_runs(1)
    fake(bench).finish_run(1, "success")
    before = len(fake(bench).requests)
    second = bench.run()
    seen = {i.spec: i.runs for i in second.current.items}["made"]
    assert seen is not None
    assert dict(seen.counts) == {"success": 1, "running": 2, "queued": 4}
    assert any(p == "/api/v2/dags/demo_daily/dagRuns" for _m, p in fake(bench).requests[before:])


def test_a_heads_dry_run_its_range_read_and_its_dags_details_are_in_flight_together(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Independent reads overlap: each dry run is held until its DAG's range read and details have arrived,
    which, made one after the other, they never would (the hold gives up after 3 s and says so)."""
    fake(bench).scheduler_running = False
    bench.spec("one", dag="demo_daily")  # no run_on_latest_version: the DAG's details are read for its create
    bench.spec("two", dag="demo_tz")
    seen: list[str] = []
    held: dict[str, bool] = {}
    arrived = threading.Condition()
    process = fake(bench)._process

    def gated(request: httpx.Request) -> httpx.Response:
        with arrived:
            seen.append(request.url.path)
            arrived.notify_all()
        if request.url.path == "/api/v2/backfills/dry_run":
            dag = json.loads(request.content)["dag_id"]
            wanted = {f"/api/v2/dags/{dag}/details", f"/api/v2/dags/{dag}/dagRuns"}
            with arrived:
                held[dag] = arrived.wait_for(lambda: wanted <= set(seen), timeout=3)
        return process(request)

    monkeypatch.setattr(fake(bench), "_process", gated)
    result = bench.run()
    assert [o.value for _i, o in result.applied] == ["created", "created"]
    assert held == {"demo_daily": True, "demo_tz": True}
    calls = count_calls(fake(bench).requests)
    assert {p: calls[p] for p in calls if p.startswith("GET /api/v2/dags/")} == {
        f"GET /api/v2/dags/{dag}/{what}": 1 for dag in ("demo_daily", "demo_tz") for what in ("details", "dagRuns")
    }


Read = tuple[tuple[str, ...], str, str]  # a dagRuns read: its states, offset ("-": none) and limit


@pytest.mark.parametrize(
    ("end", "queued", "expected"),
    [
        # more than two pages: counted by state (5 reads side by side), no page read only to learn its size
        (
            "2025-05-10T00:00:00Z",
            214,
            [
                ((), "-", "1"),
                (("failed",), "-", "100"),
                (("queued",), "-", "1"),
                (("running",), "-", "1"),
                (("success", "failed"), "-", "100"),
            ],
        ),
        # two pages: both read at once, at their offsets (2 reads in one round, where counting takes 5 in 3)
        ("2025-05-07T00:00:00Z", 142, [((), "0", "100"), ((), "100", "100")]),
    ],
)
def test_the_pass_after_creating_more_than_a_page_of_runs_reads_what_its_recorded_size_says(
    bench: Bench,
    monkeypatch: pytest.MonkeyPatch,
    end: str,
    queued: int,
    expected: list[tuple[tuple[str, ...], str, str]],
) -> None:
    """The create recorded every backfill run of the range (217 or 145): the next pass reads by that size."""
    fake(bench).scheduler_running = False
    bench.spec("hours", dag="demo_hourly", start="2025-05-01T00:00:00Z", end=end, reprocess="completed")
    assert [o.value for _i, o in bench.run().applied] == ["created"]
    fake(bench).start_runs(1)
    fake(bench).finish_run(1, "success")
    reads: list[Read] = []
    process = fake(bench)._process

    def seen(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/api/v2/dags/demo_hourly/dagRuns":
            params = request.url.params
            reads.append((tuple(params.get_list("state")), params.get("offset", "-"), params["limit"]))
        return process(request)

    monkeypatch.setattr(fake(bench), "_process", seen)
    second = bench.run()
    counts = {i.spec: i.runs for i in second.current.items}["hours"]
    assert counts is not None
    assert dict(counts.counts) == {"success": 1, "running": 2, "queued": queued}
    assert sorted(reads) == expected
