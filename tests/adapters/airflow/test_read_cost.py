"""What reads cost: a pass's calls must not grow with the DAGs or a backfill's size. The DAG listing is read
page by page only while that costs fewer calls than the details of the DAGs still missing (whatever it leaves
out is looked up one by one by the observer); a backfill's runs by state cost the same few calls whatever its
size."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from controller.adapters.airflow import AirflowClient
from controller.commands.reconcile.observe import listed_infos, with_similar
from controller.core.model.airflow import BackfillRequest, RunSummary, summarise
from controller.core.model.secret import Secret
from controller.core.plan.world import DagObservation
from controller.core.rules.retrying import Backoff
from controller.errors import AirflowAuthError, AirflowNotFound, AirflowUnavailable
from tests.fakes.airflow import Dag, FakeAirflow
from tests.fakes.calls import record_calls


@contextmanager
def running(
    fake: FakeAirflow, handle: Callable[[httpx.Request], httpx.Response], start: datetime, end: datetime, *done: str
) -> Iterator[AirflowClient]:
    """A client through `handle`, once a backfill of the range started 40 runs and finished the first `done`."""
    transport = httpx.MockTransport(handle)
    with AirflowClient("http://fake", transport=transport, username="admin", password=Secret("admin")) as c:
        backfill = c.create(BackfillRequest("demo_hourly", start, end, max_active_runs=40))
        fake.start_runs(backfill.id)
        for state in done:
            fake.finish_run(backfill.id, state)
        yield c


def both_ways(
    c: AirflowClient, start: datetime, end: datetime, seen: list[str]
) -> tuple[RunSummary, tuple[RunSummary, list[str]], tuple[RunSummary, list[str]]]:
    """The range's runs listed, then summarised without and with its recorded size (145), each beside what `seen`
    logged meanwhile."""
    listed = summarise(c.dag_runs("demo_hourly", start, end))
    seen.clear()
    unhinted = c.run_summary("demo_hourly", start, end), list(seen)
    seen.clear()
    return listed, unhinted, (c.run_summary("demo_hourly", start, end, expected=145), list(seen))


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


def test_runs_by_state_of_a_backfill_beyond_two_pages_cost_five_calls_and_agree_with_listing_them() -> None:
    fake = FakeAirflow()
    fake.scheduler_running = False
    start, end = datetime(2025, 5, 1, tzinfo=UTC), datetime(2025, 5, 10, tzinfo=UTC)  # 217 hourly runs
    with AirflowClient("http://fake", transport=fake.transport(), username="admin", password=Secret("admin")) as c:
        backfill = c.create(BackfillRequest("demo_hourly", start, end, max_active_runs=40))
        fake.start_runs(backfill.id)
        for state in ["success"] * 25 + ["failed"] * 10:
            fake.finish_run(backfill.id, state)
        listed = summarise(c.dag_runs("demo_hourly", start, end))
        calls_seen = record_calls(c)
        counted = c.run_summary("demo_hourly", start, end)
        calls = list(calls_seen)
    assert listed.counts == {"success": 25, "failed": 10, "running": 5, "queued": 177}
    assert counted == listed
    assert calls == [("GET", "/api/v2/dags/demo_hourly/dagRuns")] * 5


def test_runs_by_state_of_a_backfill_within_two_pages_are_both_pages_read() -> None:
    """145 runs: the second page beside the first (2 calls, where counting costs 5 in 3 rounds of 2); recorded
    at 145, both pages at once, each at its offset."""
    fake = FakeAirflow()
    fake.scheduler_running = False
    start, end = datetime(2025, 5, 1, tzinfo=UTC), datetime(2025, 5, 7, tzinfo=UTC)  # 145 hourly runs
    offsets: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/dagRuns"):
            offsets.append(request.url.params.get("offset", "-"))
        return fake.handle(request)

    with running(fake, handle, start, end, *["success"] * 25, *["failed"] * 10) as c:
        listed, (read, unhinted), (recorded, told) = both_ways(c, start, end, offsets)
    assert listed.counts == {"success": 25, "failed": 10, "running": 5, "queued": 105}
    assert read == recorded == listed
    assert unhinted == sorted(told) == ["0", "100"]


def test_a_run_made_between_the_two_pages_is_counted_not_summed() -> None:
    """The second page's total differs from the first's (a run made between the reads shifts the pages, which may
    then overlap or miss a run): the range is counted instead, 5 reads more, and agrees with listing it."""
    fake = FakeAirflow()
    fake.scheduler_running = False
    start, end = datetime(2025, 5, 1, tzinfo=UTC), datetime(2025, 5, 7, tzinfo=UTC)  # 145 hourly runs
    offsets: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        answer = fake.handle(request)
        if not request.url.path.endswith("/dagRuns"):
            return answer
        offsets.append(request.url.params.get("offset", "-"))
        if request.url.params.get("offset") != "100":
            return answer
        body = answer.json()
        return httpx.Response(200, json={**body, "total_entries": body["total_entries"] + 1})

    with running(fake, handle, start, end) as c:
        listed, (summary, unhinted), (recorded, told) = both_ways(c, start, end, offsets)
    assert summary == recorded == listed
    assert (unhinted[:2], len(unhinted)) == (["0", "100"], 2 + 5)
    assert (sorted(told[:2]), len(told)) == (["0", "100"], 2 + 5)


def test_a_backfill_recorded_beyond_two_pages_is_counted_without_reading_its_first_page() -> None:
    """The create recorded 217 runs: the total is a count beside the other four reads, no page of the range."""
    fake = FakeAirflow()
    fake.scheduler_running = False
    start, end = datetime(2025, 5, 1, tzinfo=UTC), datetime(2025, 5, 10, tzinfo=UTC)  # 217 hourly runs
    queries: list[dict[str, list[str]]] = []

    def handle(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/dagRuns"):
            queries.append({k: request.url.params.get_list(k) for k in ("state", "limit", "order_by")})
        return fake.handle(request)

    with running(fake, handle, start, end, *["success"] * 25, *["failed"] * 10) as c:
        listed = summarise(c.dag_runs("demo_hourly", start, end))
        queries.clear()
        counted = c.run_summary("demo_hourly", start, end, expected=217)
        told = list(queries)
        queries.clear()
        unhinted = c.run_summary("demo_hourly", start, end, expected=100)  # one page might hold them: read it
    assert counted == listed == unhinted
    assert sorted(told, key=str) == sorted(
        [
            {"state": [], "limit": ["1"], "order_by": ["logical_date"]},
            {"state": ["queued"], "limit": ["1"], "order_by": ["logical_date"]},
            {"state": ["running"], "limit": ["1"], "order_by": ["logical_date"]},
            {"state": ["failed"], "limit": ["100"], "order_by": ["logical_date"]},
            {"state": ["success", "failed"], "limit": ["100"], "order_by": ["-end_date"]},
        ],
        key=str,
    )
    assert queries[0] == {"state": [], "limit": ["100"], "order_by": ["logical_date"]}
    assert len(queries) == 5  # its first page says more than two: counted


def test_a_running_backfills_own_runs_cost_one_call_in_a_page_and_no_more_than_counting_beyond() -> None:
    fake = FakeAirflow()
    fake.scheduler_running = False
    start, end = datetime(2025, 6, 1, tzinfo=UTC), datetime(2025, 6, 10, tzinfo=UTC)  # 217 hourly runs
    with AirflowClient("http://fake", transport=fake.transport(), username="admin", password=Secret("admin")) as c:
        backfill = c.create(BackfillRequest("demo_hourly", start, end, max_active_runs=40))
        fake.start_runs(backfill.id)
        fake.finish_run(backfill.id, "failed")
        calls_seen = record_calls(c)
        page = c.runs_or_summary("demo_hourly", start, start + timedelta(hours=99))
        one = len(calls_seen)
        beyond = c.runs_or_summary("demo_hourly", start, end)
        calls = calls_seen[one:]
        counted = c.run_summary("demo_hourly", start, end)
    assert isinstance(page, list)
    assert (len(page), one, sorted({r.state for r in page})) == (100, 1, ["failed", "queued", "running"])
    assert beyond == counted
    assert calls == [("GET", "/api/v2/dags/demo_hourly/dagRuns")] * 5  # what counting costs, not one more


def test_beyond_a_hundred_failures_the_first_hundred_dates_are_shown_and_the_rest_counted() -> None:
    fake = FakeAirflow()
    fake.scheduler_running = False
    start, end = datetime(2025, 6, 1, tzinfo=UTC), datetime(2025, 6, 10, tzinfo=UTC)  # 217 hourly runs
    with AirflowClient("http://fake", transport=fake.transport(), username="admin", password=Secret("admin")) as c:
        backfill = c.create(BackfillRequest("demo_hourly", start, end, max_active_runs=140))
        fake.start_runs(backfill.id)
        for state in ["failed"] * 120 + ["success"] * 20:
            fake.finish_run(backfill.id, state)
        c.cancel(backfill.id)  # the 77 queued runs fail without starting
        listed = summarise(c.dag_runs("demo_hourly", start, end))
        calls_seen = record_calls(c)
        counted = c.run_summary("demo_hourly", start, end)
        calls = list(calls_seen)
    assert (listed.counts, listed.never_started, len(listed.failed_dates)) == ({"failed": 197, "success": 20}, 77, 120)
    assert (counted.counts, counted.never_started) == (listed.counts, 77)
    assert counted.failed_dates == listed.failed_dates[:100]
    assert (counted.failed_unlisted, listed.failed_unlisted) == (20, 0)
    assert calls == [("GET", "/api/v2/dags/demo_hourly/dagRuns")] * 6


def test_a_pass_whose_specs_are_bound_reads_only_the_newest_page_of_a_dags_backfills() -> None:
    fake = FakeAirflow()
    fake.scheduler_running = False
    with AirflowClient("http://fake", transport=fake.transport(), username="admin", password=Secret("admin")) as c:
        ids = []
        for n in range(250):  # a long history: each backfill finished before the next began
            day = datetime(2020, 1, 1, tzinfo=UTC) + timedelta(days=n)
            ids.append(c.create(BackfillRequest("demo_daily", day, day)).id)
            if n < 249:
                c.cancel(ids[-1])
        costs = {}
        for name, newest in [("all", None), ("latest", frozenset({ids[-1]})), ("old", frozenset({ids[10], ids[-1]}))]:
            calls_seen = record_calls(c)
            listed = [b.id for b in c.list_backfills("demo_daily", newest=newest)]
            costs[name] = (len(calls_seen), listed[0], listed[-1], len(listed))
    assert costs == {
        "all": (3, ids[0], ids[-1], 250),
        "latest": (1, ids[150], ids[-1], 100),  # one page: the newest hundred, oldest first
        "old": (3, ids[0], ids[-1], 250),
    }


def test_calls_in_flight_are_bounded_whatever_the_callers_pools() -> None:
    """The observer's DAG pool and each backfill's counting reads nest: the client keeps the sum bounded."""

    lock, now, peak = threading.Lock(), [0], [0]

    def handler(_request: httpx.Request) -> httpx.Response:
        with lock:
            now[0] += 1
            peak[0] = max(peak[0], now[0])
        time.sleep(0.02)
        with lock:
            now[0] -= 1
        return httpx.Response(200, json={"version": "3.3.2"})

    bound = 3  # BACKFILLCTL_AIRFLOW_MAX_CONCURRENCY=3
    with (
        AirflowClient("http://fake", transport=httpx.MockTransport(handler), max_concurrency=bound) as client,
        ThreadPoolExecutor(max_workers=3 * bound) as pool,
    ):
        list(pool.map(lambda _n: client.version(), range(6 * bound)))
    assert peak[0] == bound


# --- the preflight's page of the DAG listing --------------------------------------------------------------------


def preflighted(
    lists_dags: bool, *faults: httpx.Response | httpx.TimeoutException, dags: int = 10, also: str = ""
) -> tuple[FakeAirflow, AirflowClient]:
    """A client on a fake of `dags` DAGs (and `also`), after its preflight (the version, then the credentials'
    check), the DAG listing answering `faults` first."""
    fake = FakeAirflow(dags=[Dag(f"dag_{n:03d}") for n in range(dags)] + ([Dag(also)] if also else []))
    for fault in faults:
        fake.fault("GET", "/api/v2/dags", lambda _r, answer=fault: answer)
    client = AirflowClient(
        "http://fake",
        transport=fake.transport(),
        username="admin",
        password=Secret("admin"),
        backoff=Backoff(base=0.0, cap=0.0, jitter=0.0),
    )
    client.preflight(lists_dags=lists_dags)
    return fake, client


def dag_reads(fake: FakeAirflow) -> list[str]:
    return [path for method, path in fake.requests if method == "GET" and path.startswith("/api/v2/dags")]


def test_a_command_that_lists_dags_has_the_preflight_read_the_first_page_for_it_once() -> None:
    fake, client = preflighted(lists_dags=True)
    with client:
        assert dag_reads(fake) == ["/api/v2/dags"]  # the credentials' check is the listing's first page
        assert sorted(client.dag_infos(["dag_001", "dag_009"])) == ["dag_001", "dag_009"]
        assert dag_reads(fake) == ["/api/v2/dags"]  # answered by the preflight's read
        assert sorted(client.dag_infos(["dag_002"])) == ["dag_002"]
        assert dag_reads(fake) == ["/api/v2/dags"] * 2  # once only: the next pass reads it again


def test_a_command_that_does_not_list_dags_checks_the_credentials_with_one_dag() -> None:
    fake, client = preflighted(lists_dags=False)
    with client:
        assert sorted(client.dag_infos(["dag_001"])) == ["dag_001"]
    assert dag_reads(fake) == ["/api/v2/dags"] * 2


def test_the_preflights_page_does_not_stand_for_a_read_after_five_seconds_or_after_a_write() -> None:
    fake, client = preflighted(lists_dags=True)
    with client:
        now = client.server.clock()
        client.server.clock = lambda: now + 5.01
        assert sorted(client.dag_infos(["dag_001"])) == ["dag_001"]
        assert dag_reads(fake) == ["/api/v2/dags"] * 2  # read again: the kept page was too old
    fake, client = preflighted(lists_dags=True)
    with client:
        client.create(BackfillRequest("dag_003", datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 1, 2, tzinfo=UTC)))
        assert sorted(client.dag_infos(["dag_003"])) == ["dag_003"]
        assert dag_reads(fake) == ["/api/v2/dags"] * 2  # read again: a write came between


def test_a_first_page_airflow_fails_to_serve_leaves_the_check_to_one_dag_and_the_page_to_the_command() -> None:
    busy = httpx.Response(503, json={"detail": "busy"})
    fake, client = preflighted(True, busy, busy)  # the preflight's two attempts
    with client:
        assert len(dag_reads(fake)) == 3  # the page twice, then the light check: the command goes on
        assert not client.dag_listing_at_hand
        assert sorted(client.dag_infos(["dag_001", "dag_002"])) == ["dag_001", "dag_002"]
        assert len(dag_reads(fake)) == 4  # its own read of the page


def test_a_first_page_refused_for_the_credentials_fails_the_preflight_as_the_light_check_does() -> None:
    said = []
    for lists_dags in (True, False):
        with pytest.raises(AirflowAuthError) as caught:
            preflighted(lists_dags, *[httpx.Response(403, json={"detail": "Forbidden"})] * 2)  # after a new login
        said.append(caught.value.message)
    assert (
        said
        == [
            "Airflow at http://fake refused the credentials (GET /api/v2/dags -> 403): check "
            "BACKFILLCTL_AIRFLOW_USERNAME/PASSWORD"
        ]
        * 2
    )


def test_one_dag_is_read_from_the_page_at_hand_else_from_its_details() -> None:
    fake, client = preflighted(True)
    with client:
        assert list(listed_infos(client, ["dag_004"])) == ["dag_004"]  # no call: the preflight's page
        assert dag_reads(fake) == ["/api/v2/dags"]
        assert listed_infos(client, ["dag_005"]) == {}  # the page is spent: its details will tell
        assert dag_reads(fake) == ["/api/v2/dags"]


def test_a_first_page_that_times_out_twice_leaves_one_attempt_to_the_light_check() -> None:
    late = httpx.ReadTimeout("no answer in time")
    with pytest.raises(AirflowUnavailable):
        preflighted(True, late, late, late)
    fake, client = preflighted(True, late, late)
    with client:
        assert len(dag_reads(fake)) == 3  # the page twice, the light check once: three timeouts at most, not four


def test_a_first_page_airflow_answers_otherwise_fails_the_preflight_as_the_light_check_does() -> None:
    said = []
    for lists_dags in (True, False):
        with pytest.raises(AirflowNotFound) as caught:
            preflighted(lists_dags, httpx.Response(404, json={"detail": "Not Found"}))
        said.append(caught.value.message)
    assert said == ["GET /api/v2/dags -> 404: Not Found"] * 2


def test_a_listing_read_to_its_end_gives_every_dag_id_without_another_call() -> None:
    fake, client = preflighted(True)
    with client:
        assert sorted(client.dag_infos(["dag_001", "dag_002"])) == ["dag_001", "dag_002"]
        assert len(client.dag_ids()) == 10
        assert dag_reads(fake) == ["/api/v2/dags"]


def test_a_missing_dag_is_matched_against_every_dag_id_not_only_the_first_page() -> None:
    fake, client = preflighted(True, dags=250, also="orders_rollup")  # the 251st in the listing's order: page 3
    with client:
        assert listed_infos(client, ["orders_rolup"]) == {}  # a typo: the page at hand lacks it
        observed = with_similar(client, {"orders_rolup": DagObservation("orders_rolup", None)})
        assert observed["orders_rolup"].similar == ("orders_rollup",)
        assert dag_reads(fake) == ["/api/v2/dags"] * 4  # the preflight's page, then the whole listing's three
