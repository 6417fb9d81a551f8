"""What reads cost (issue 12). The DAG listing is read page by page only while that costs fewer calls than
the details of the DAGs still missing (whatever it leaves out is looked up one by one by the observer); a
backfill's runs by state cost the same few calls whatever its size."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime

from controller.adapters.airflow import AirflowClient
from controller.core.model import BackfillRequest, summarise
from controller.core.secret import Secret
from tests.fakes.airflow import Dag, FakeAirflow


def listing(wanted: list[str], dags: int = 250) -> tuple[list[str], Counter[str]]:
    fake = FakeAirflow(dags=[Dag(f"dag_{n:03d}") for n in range(dags)] + [Dag("zz_manual", schedule=None)])
    with AirflowClient("http://fake", transport=fake.transport(), username="admin", password=Secret("admin")) as c:
        found = sorted(c.dag_infos(wanted))
    offsets = Counter(p for m, p in fake.requests if p == "/api/v2/dags")
    return found, offsets


def test_one_page_when_every_dag_is_on_it() -> None:
    assert listing(["dag_000", "dag_050", "dag_099"]) == (["dag_000", "dag_050", "dag_099"], {"/api/v2/dags": 1})


def test_more_pages_only_while_fewer_than_the_dags_missing() -> None:
    # 3 DAGs beyond page 1, 2 pages left: page 2 (1 call) beats 3 details calls; then 1 DAG is missing and
    # 1 page is left, so the listing stops there (a details call costs the same and reads less)
    assert listing(["dag_000", "dag_120", "dag_150", "dag_220"]) == (
        ["dag_000", "dag_120", "dag_150"],
        {"/api/v2/dags": 2},
    )
    # 1 DAG beyond page 1, 2 pages left: its details (1 call) are cheaper, so the listing stops
    assert listing(["dag_000", "dag_220"]) == (["dag_000"], {"/api/v2/dags": 1})


def test_a_dag_that_is_not_periodic_or_not_known_is_left_to_its_details() -> None:
    assert listing(["dag_001", "zz_manual", "nope"], dags=10) == (["dag_001"], {"/api/v2/dags": 1})


def test_runs_by_state_of_a_backfill_beyond_one_page_cost_five_calls_and_agree_with_listing_them() -> None:
    fake = FakeAirflow()
    fake.scheduler_running = False
    start, end = datetime(2025, 5, 1, tzinfo=UTC), datetime(2025, 5, 7, tzinfo=UTC)  # 145 hourly runs
    with AirflowClient("http://fake", transport=fake.transport(), username="admin", password=Secret("admin")) as c:
        backfill = c.create(BackfillRequest("demo_hourly", start, end, max_active_runs=40))
        fake.start_runs(backfill.id)
        for state in ["success"] * 25 + ["failed"] * 10:
            fake.finish_run(backfill.id, state)
        listed = summarise(c.dag_runs("demo_hourly", start, end))
        before = len(c.calls)
        counted = c.run_summary("demo_hourly", start, end)
        calls = c.calls[before:]
    assert listed.counts == {"success": 25, "failed": 10, "running": 5, "queued": 105}
    assert counted == listed
    assert calls == [("GET", "/api/v2/dags/demo_hourly/dagRuns")] * 5


def test_beyond_a_hundred_failures_the_first_hundred_dates_are_shown_and_the_rest_counted() -> None:
    fake = FakeAirflow()
    fake.scheduler_running = False
    start, end = datetime(2025, 6, 1, tzinfo=UTC), datetime(2025, 6, 7, tzinfo=UTC)  # 145 hourly runs
    with AirflowClient("http://fake", transport=fake.transport(), username="admin", password=Secret("admin")) as c:
        backfill = c.create(BackfillRequest("demo_hourly", start, end, max_active_runs=140))
        fake.start_runs(backfill.id)
        for state in ["failed"] * 120 + ["success"] * 20:
            fake.finish_run(backfill.id, state)
        c.cancel(backfill.id)  # the 5 queued runs fail without starting
        listed = summarise(c.dag_runs("demo_hourly", start, end))
        before = len(c.calls)
        counted = c.run_summary("demo_hourly", start, end)
        calls = c.calls[before:]
    assert (listed.counts, listed.never_started, len(listed.failed_dates)) == ({"failed": 125, "success": 20}, 5, 120)
    assert (counted.counts, counted.never_started) == (listed.counts, 5)
    assert counted.failed_dates == listed.failed_dates[:100]
    assert (counted.failed_unlisted, listed.failed_unlisted) == (20, 0)
    assert calls == [("GET", "/api/v2/dags/demo_hourly/dagRuns")] * 6
