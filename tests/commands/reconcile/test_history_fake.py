"""History read once, kept: a create lists only the backfills newer than the store's watermark, newest first, so
it costs the same calls on a DAG with thousands of past backfills as on a fresh one. A store that never read the
DAG (new, or lost) reads its whole history once; an Airflow that answers a kept backfill with other parameters (a
database reset or restored) has its history dropped, read again whole, and audited."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from controller.adapters.store import Store
from controller.commands.reconcile.history import environment_of
from tests.commands.reconcile.harness import Bench, count_calls, fake
from tests.fakes.airflow import FakeAirflow

ENVIRONMENT = "http://fake-airflow"  # the bench's Airflow, as the store names it
WHOLE = ("GET", "/api/v2/backfills")


def seed(airflow: FakeAirflow, dag_id: str, count: int) -> None:
    """`count` completed backfills of the DAG, one day each in 2019 (no spec's range), made before any spec."""
    for n in range(count):
        day = "2019-01-01T00:00:00Z" if n % 2 else "2019-02-01T00:00:00Z"
        backfill = airflow._new_backfill(airflow.dags[dag_id], {"from_date": day, "to_date": day}, [])
        backfill["completed_at"] = backfill["created_at"]


def finish(airflow: FakeAirflow, backfill_id: int) -> None:
    """Every run of the backfill succeeded, and Airflow marked it completed."""
    for run in airflow.runs.values():
        if run["_backfill"] == backfill_id:
            run.update(state="success")
    assert backfill_id in airflow.mark_complete()


def calls_of(bench: Bench, start: int) -> Counter[str]:
    calls = count_calls(fake(bench).requests[start:])
    del calls["POST /auth/token"]
    return calls


def create(bench: Bench, name: str, dag: str, start: str) -> Counter[str]:
    """One pass creating spec `name` (one week from `start`) on `dag`: its calls (the login left out)."""
    before = len(fake(bench).requests)
    bench.spec(name, dag=dag, start=start, end=start[:8] + "07", run_on_latest_version="true")
    result = bench.run()
    assert [(i.spec, o.value) for i, o in result.applied if i.spec == name] == [(name, "created")], result.plan
    return calls_of(bench, before)


@pytest.fixture
def benches(tmp_path: Path) -> Iterator[dict[int, Bench]]:
    """A bench per history size: 0 (a fresh DAG), 300 and 3,000 past backfills (1× and 10×)."""
    made = {}
    for size in (0, 300, 3000):
        airflow = FakeAirflow()
        airflow.scheduler_running = False
        seed(airflow, "demo_daily", size)
        made[size] = Bench(tmp_path / str(size), fake=airflow)
    yield made
    for bench in made.values():
        bench.close()


def test_a_create_costs_the_same_calls_at_1x_and_10x_history_as_on_a_fresh_dag(benches: dict[int, Bench]) -> None:
    firsts, seconds = {}, {}
    for size, bench in benches.items():
        firsts[size] = create(bench, "first", "demo_daily", "2025-01-01")
        finish(fake(bench), size + 1)
        seconds[size] = create(bench, "second", "demo_daily", "2025-03-01")
        kept = bench.store.backfill_history.known(ENVIRONMENT, ["demo_daily"])["demo_daily"]
        assert (kept.watermark, len(kept.backfills)) == (size + 1, size + 1)
    # the first create on the DAG reads its whole history once (a page of 100 each), then every create one page
    assert {size: c[" ".join(WHOLE)] for size, c in firsts.items()} == {0: 1, 300: 3, 3000: 30}
    fresh = {
        "GET /api/v2/backfills": 1,  # newest first, down to the watermark
        # one DAG: its details, not the listing; and again as the first spec ends in this pass (its version
        # coverage: the fake names no DAG version, so no runs are read for it)
        "GET /api/v2/dags/demo_daily/details": 2,
        "GET /api/v2/dags/demo_daily/dagRuns": 2,  # the finished spec's runs, the new one's range
        "POST /api/v2/backfills/dry_run": 1,
        "POST /api/v2/backfills": 1,
    }
    assert seconds == {0: fresh, 300: fresh, 3000: fresh}
    assert sum(fresh.values()) == 7


def test_the_listing_stops_at_the_watermark_newest_first(benches: dict[int, Bench]) -> None:
    bench = benches[3000]
    create(bench, "first", "demo_daily", "2025-01-01")
    finish(fake(bench), 3001)
    asked: list[dict[str, str]] = []
    process = fake(bench)._process

    def seen(request: httpx.Request) -> httpx.Response:
        if (request.method, request.url.path) == WHOLE:
            asked.append(dict(request.url.params))
        return process(request)

    fake(bench)._process = seen  # type: ignore[method-assign]
    create(bench, "second", "demo_daily", "2025-03-01")
    assert asked == [{"dag_id": "demo_daily", "order_by": "-id", "limit": "100", "offset": "0"}]


def test_a_lost_store_reads_the_history_once_then_creates_cost_one_listing(benches: dict[int, Bench]) -> None:
    bench = benches[3000]
    create(bench, "first", "demo_daily", "2025-01-01")
    finish(fake(bench), 3001)
    bench.store.close()
    bench.store = Store(f"sqlite:///{bench.root}/lost.db")  # the store is lost: a new, empty one
    bench.store_url = str(bench.store.url)
    before = len(fake(bench).requests)
    result = bench.run()  # adopts "first" after the lost store: the whole history, once
    assert [(i.spec, o.value) for i, o in result.applied] == [("first", "adopted")]
    assert calls_of(bench, before)[" ".join(WHOLE)] == 31
    assert create(bench, "second", "demo_daily", "2025-03-01")[" ".join(WHOLE)] == 1


def test_an_airflow_whose_database_was_restored_has_its_history_dropped_rebuilt_and_audited(
    benches: dict[int, Bench],
) -> None:
    bench = benches[300]
    create(bench, "first", "demo_daily", "2025-01-01")
    finish(fake(bench), 301)
    create(bench, "other", "demo_tz", "2025-01-01")  # another DAG's kept history of the same Airflow
    finish(fake(bench), 302)
    fake(bench).backfills[300]["max_active_runs"] = 9  # restored: #300 is another backfill now
    before = len(fake(bench).requests)
    create(bench, "second", "demo_daily", "2025-03-01")
    # one page newest first finds #300 changed, then the whole history is read again (4 pages: 301 backfills);
    # and demo_tz's bound spec's newest page
    assert calls_of(bench, before)[" ".join(WHOLE)] == 1 + 4 + 1
    [record] = [e.entry for e in bench.events() if e.entry.outcome == "history-reset"]
    assert (record.action, record.phase, record.spec_name) == ("reconcile", "observation", None)
    assert record.message == (
        "Airflow http://fake-airflow answered its backfill history differently from what was kept (its database was "
        "reset or restored): DAG demo_daily: backfill #300 answers other parameters than the ones kept; dropped 300 "
        "kept backfill(s), read again whole"
    )
    kept = bench.store.backfill_history.known(ENVIRONMENT, ["demo_daily", "demo_tz"])
    assert kept["demo_daily"].watermark == 301
    assert [b.max_active_runs for b in kept["demo_daily"].backfills if b.id == 300] == [9]
    assert "demo_tz" not in kept  # dropped with the rest of that Airflow's history: read again when needed
    again = len(fake(bench).requests)
    finish(fake(bench), 303)
    create(bench, "third", "demo_daily", "2025-05-01")
    assert calls_of(bench, again)[" ".join(WHOLE)] == 1  # rebuilt once: one page again, no second reset
    assert len([e for e in bench.events() if e.entry.outcome == "history-reset"]) == 1


def test_an_airflow_reset_below_the_watermark_is_found_by_the_missing_watermark(benches: dict[int, Bench]) -> None:
    bench = benches[300]
    create(bench, "first", "demo_daily", "2025-01-01")
    finish(fake(bench), 301)
    assert bench.phases(bench.run()) == {"first": "Succeeded"}  # its binding is final: the DAG's rest is history
    for backfill_id in range(150, 302):  # a reset: only the first 149 backfills are left
        del fake(bench).backfills[backfill_id]
    create(bench, "second", "demo_daily", "2025-03-01")
    [record] = [e.entry for e in bench.events() if e.entry.outcome == "history-reset"]
    assert record.message is not None
    assert "DAG demo_daily: backfill #300, the newest kept, is not in Airflow's listing; dropped 300" in record.message


def test_a_server_that_ignores_the_order_is_read_whole_and_said_so(
    benches: dict[int, Bench], caplog: pytest.LogCaptureFixture
) -> None:
    bench = benches[300]
    create(bench, "first", "demo_daily", "2025-01-01")
    finish(fake(bench), 301)
    process = fake(bench)._process

    def unordered(request: httpx.Request) -> httpx.Response:  # as a server that does not declare `order_by`
        if (request.method, request.url.path) == WHOLE:
            params = {k: v for k, v in request.url.params.items() if k != "order_by"}
            request = httpx.Request(request.method, request.url.copy_with(params=params), headers=request.headers)
        return process(request)

    fake(bench)._process = unordered  # type: ignore[method-assign]
    before = len(fake(bench).requests)
    with caplog.at_level(logging.WARNING, logger="controller.commands.reconcile.history"):
        create(bench, "second", "demo_daily", "2025-03-01")
    assert calls_of(bench, before)[" ".join(WHOLE)] == 4  # 302 backfills, nothing could stop early
    assert [r.getMessage() for r in caplog.records if r.name == "controller.commands.reconcile.history"] == [
        "Airflow ignored order_by=-id on the backfills of DAG demo_daily: its whole history was read, not only the "
        "backfills newer than #300"
    ]
    assert not [e for e in bench.events() if e.entry.outcome == "history-reset"]
    assert bench.store.backfill_history.known(ENVIRONMENT, ["demo_daily"])["demo_daily"].watermark == 301


def test_an_airflow_is_named_by_its_url_without_credentials_query_or_fragment() -> None:
    assert environment_of("https://ci:s3cret@Airflow.Example.com:8443/base/?token=abc#top") == (
        "https://airflow.example.com:8443/base"
    )
    assert environment_of("http://[::1]:8080/") == "http://[::1]:8080"


def test_a_read_only_plan_reads_the_kept_history_and_writes_none(benches: dict[int, Bench]) -> None:
    bench = benches[300]
    bench.spec("first", start="2025-01-01", end="2025-01-07", run_on_latest_version="true")
    with Store(bench.store_url, read_only=True) as store:
        plan = bench.reconciler(store).plan().plan
    assert [(i.spec, i.kind.value) for i in plan.items] == [("first", "create")]
    assert bench.store.backfill_history.known(ENVIRONMENT, ["demo_daily"]) == {}
    assert create(bench, "first", "demo_daily", "2025-01-01")[" ".join(WHOLE)] == 3  # the history, read once
    before = len(fake(bench).requests)
    bench.spec("second", start="2025-03-01", end="2025-03-07", run_on_latest_version="true")
    with Store(bench.store_url, read_only=True) as store:
        bench.reconciler(store).plan()
    assert calls_of(bench, before)[" ".join(WHOLE)] == 1  # a plan lists only what is newer too
    assert bench.store.backfill_history.known(ENVIRONMENT, ["demo_daily"])["demo_daily"].watermark == 300
