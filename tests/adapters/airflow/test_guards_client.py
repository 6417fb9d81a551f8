"""The client calls the load guards add (issue 14): in-flight runs and the scheduler's health, on MockTransport."""

from __future__ import annotations

from datetime import UTC, datetime

import httpx

from controller.adapters.airflow import AirflowClient
from controller.core.model.guards import SchedulerHealth
from controller.core.model.secret import Secret
from controller.core.rules.retrying import Backoff

JAN1, JAN7 = datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 1, 7, tzinfo=UTC)


def client_for(handler: object, seen: list[httpx.Request]) -> AirflowClient:
    def record(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return handler(request)  # type: ignore[operator,no-any-return]

    return AirflowClient(
        "http://airflow.test",
        token=Secret("t"),
        transport=httpx.MockTransport(record),
        backoff=Backoff(attempts=1),
        sleep=lambda _s: None,
    )


def run(day: str, state: str) -> dict[str, object]:
    return {"dag_run_id": f"r{day}", "logical_date": f"{day}T00:00:00Z", "state": state, "run_type": "scheduled"}


def test_the_range_read_is_one_query_over_every_run_type_up_to_a_page() -> None:
    seen: list[httpx.Request] = []
    runs = [run("2025-01-02", "success"), run("2025-01-03", "running"), run("2025-01-04", "queued")]
    answer = {"dag_runs": [*runs, run("2025-01-05", "failed")], "total_entries": 4}
    with client_for(lambda _r: httpx.Response(200, json=answer), seen) as client:
        kept, flying, total = client.range_runs("d", JAN1, JAN7, kept=("success", "failed"))
    assert (kept, total) == (2, 2)
    assert [(r.logical_date, r.state) for r in flying] == [
        (datetime(2025, 1, 3, tzinfo=UTC), "running"),
        (datetime(2025, 1, 4, tzinfo=UTC), "queued"),
    ]
    (request,) = seen
    assert request.url.path == "/api/v2/dags/d/dagRuns"
    params = request.url.params
    assert "run_type" not in params  # a scheduled or manual run in flight blocks a date as much as a backfill's
    assert (params["logical_date_gte"], params["logical_date_lte"]) == ("2025-01-01T00:00:00Z", "2025-01-07T00:00:00Z")


def test_past_code_runs_the_range_read_counts_the_kept_runs_and_reads_a_page_of_those_in_flight() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        states = request.url.params.get_list("state")
        if states == ["queued", "running"]:
            return httpx.Response(200, json={"dag_runs": [run("2025-01-03", "running")], "total_entries": 150})
        if states:
            return httpx.Response(200, json={"dag_runs": [], "total_entries": 40})
        return httpx.Response(200, json={"dag_runs": [run("2025-01-01", "success")] * 100, "total_entries": 1001})

    with client_for(answer, seen) as client:
        read = client.range_read("d", JAN1, JAN7, kept=("success",))
    assert (read.counted, [r.state for r in read.flying], read.in_flight, read.runs) == (40, ["running"], 150, None)
    assert [r.url.params.get_list("state") for r in seen] == [[], ["success"], ["queued", "running"]]
    assert [r.url.params["limit"] for r in seen] == ["100", "1", "100"]


def test_up_to_code_runs_the_range_is_read_page_by_page_and_counted_from_its_runs() -> None:
    seen: list[httpx.Request] = []
    days = [f"2025-01-{d:02d}" for d in range(1, 31)]
    every = [run(day, "success" if n % 3 else "running") for n, day in enumerate(days * 8)][:230]

    def answer(request: httpx.Request) -> httpx.Response:
        offset = int(request.url.params["offset"])
        return httpx.Response(200, json={"dag_runs": every[offset : offset + 100], "total_entries": len(every)})

    with client_for(answer, seen) as client:
        read = client.range_read("d", JAN1, JAN7, kept=("success",))
    in_flight = sum(1 for r in every if r["state"] == "running")
    assert (read.counted, read.in_flight, len(read.flying)) == (230 - in_flight, in_flight, in_flight)
    assert read.runs is not None
    assert len(read.runs) == 230
    assert [(r.url.params["offset"], r.url.params["limit"]) for r in seen] == [
        ("0", "100"),
        ("100", "100"),
        ("200", "100"),
    ]


def test_scheduler_health_reads_status_and_heartbeat() -> None:
    body = {"scheduler": {"status": "unhealthy", "latest_scheduler_heartbeat": "2026-12-01T11:58:00+00:00"}}
    with client_for(lambda _r: httpx.Response(200, json=body), []) as client:
        assert client.scheduler_health() == SchedulerHealth("unhealthy", datetime(2026, 12, 1, 11, 58, tzinfo=UTC))


def test_scheduler_health_that_cannot_be_read_says_why() -> None:
    with client_for(lambda _r: httpx.Response(503, json={"detail": "down"}), []) as client:
        health = client.scheduler_health()
    assert health == SchedulerHealth(error="GET /api/v2/monitor/health -> 503: down")
    with client_for(lambda _r: httpx.Response(200, json=["not", "a", "mapping"]), []) as client:
        assert client.scheduler_health().error == "GET /api/v2/monitor/health: the answer has no scheduler status"
