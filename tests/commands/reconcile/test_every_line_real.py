"""One end-to-end scenario on every supported Airflow line (3.1.8, 3.2.2 and 3.3.2, each started by the
project's harness: BACKFILLCTL_TEST_AIRFLOW_VERSION): a queue on one DAG, outcomes with exact run counts
including failures, an idempotent second pass, lost-store adoption without duplicates, audit verify; and
the proof that no query the scenario sent carries a parameter the release ignores (FastAPI drops a query
parameter a route does not declare, so such a filter would answer unfiltered, silently).

Dates in 2022 and demo_flaky (odd days fail): no other test uses them on the shared server.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import httpx
import pytest
from packaging.version import Version

from controller.adapters.airflow import AirflowClient
from controller.adapters.store import Store
from controller.commands.reconcile.summaries import SummaryReader
from controller.core.model.capabilities import RUN_FILTERS, Capabilities, capabilities_of, rerun_code
from controller.core.model.secret import Secret
from tests.commands.reconcile.harness import Bench, mutating, real_bench
from tests.fakes.calls import record_calls

pytestmark = [pytest.mark.airflow, pytest.mark.every_line]


@pytest.fixture
def bench(tmp_path: Path, airflow_url: str) -> Iterator[Bench]:
    with real_bench(tmp_path, airflow_url, "demo_flaky") as made:
        yield made


def declared_queries(airflow_url: str) -> dict[tuple[str, str], set[str]]:
    """Each route's query parameters, as the running release's OpenAPI document declares them."""
    document = httpx.get(f"{airflow_url}/openapi.json", timeout=30).json()
    return {
        (method.upper(), path): {p["name"] for p in operation.get("parameters", []) if p.get("in") == "query"}
        for path, operations in document["paths"].items()
        for method, operation in operations.items()
        if isinstance(operation, dict)
    }


def route_of(path: str, routes: set[tuple[str, str]], method: str) -> tuple[str, str]:
    """The templated route (`/api/v2/dags/{dag_id}/dagRuns`) that a request path matches."""
    parts = path.split("/")
    for route_method, route in routes:
        pattern = route.split("/")
        if (
            route_method == method
            and len(pattern) == len(parts)
            and all(p == q or (p.startswith("{") and p.endswith("}")) for p, q in zip(pattern, parts, strict=True))
        ):
            return route_method, route
    raise AssertionError(f"no route of this release serves {method} {path}")


def ignored_parameters(sent: list[httpx.Request], airflow_url: str, caps: Capabilities) -> list[str]:
    declared = declared_queries(airflow_url)
    found = []
    for request in sent:
        if request.url.path == "/auth/token":
            continue
        route = route_of(request.url.path, set(declared), request.method)
        for name in parse_qs(request.url.query.decode()):
            if name not in declared[route] or (name in RUN_FILTERS and not getattr(caps, RUN_FILTERS[name])):
                found.append(f"{request.method} {route[1]}?{name}")
    return sorted(set(found))


def wait(seconds: float = 3.0) -> Any:
    return lambda: time.sleep(seconds)


def test_the_same_scenario_on_every_line(
    bench: Bench, tmp_path: Path, airflow_url: str, airflow_caps: Capabilities
) -> None:
    bench.spec("q1", dag="demo_flaky", start="2022-01-01", end="2022-01-04", mar=2)
    bench.spec("q2", dag="demo_flaky", start="2022-01-05", end="2022-01-06", mar=2)
    first = bench.run()
    assert [(i.spec, o) for i, o in first.applied] == [("q1", "created")]
    (created,) = [i for i, _ in first.applied]
    assert created.code == f"Airflow {airflow_caps.version}, DAG version 1: {rerun_code(airflow_caps, None)}"
    (intent,) = [e.entry.request for e in bench.events("q1") if e.entry.phase == "intent"]
    assert intent is not None
    assert intent["airflow"] == airflow_caps.version
    assert ("run_on_latest_version" in intent["body"]) is airflow_caps.run_on_latest_version
    assert [i.reason for i in first.plan.items if i.spec == "q2"] == ["queued behind q1"]
    done = bench.until_terminal(passes=60, wait=wait())
    assert bench.phases(done) == {"q1": "CompletedWithFailures", "q2": "CompletedWithFailures"}
    runs = {i.spec: dict(i.runs.counts) for i in done.current.items if i.runs is not None}
    assert runs == {"q1": {"failed": 2, "success": 2}, "q2": {"failed": 1, "success": 1}}
    assert [i.reason for i in done.current.items] == ["failed: 2022-01-01, 2022-01-03", "failed: 2022-01-05"]

    idle = bench.reconciler()  # a second pass over finished specs changes nothing
    calls = record_calls(idle.client)
    assert idle.run_once().applied == []
    assert mutating(calls) == []

    with bench.client() as client:
        ours = [b for b in client.list_backfills("demo_flaky") if b.from_date.year == 2022]
    assert len(ours) == 2
    bench.store.close()
    (tmp_path / "state.db").unlink()  # the store is lost: its specs' backfills are found again, not re-created
    bench.store = Store(bench.store_url)
    adopted = bench.run()
    assert sorted((i.spec, i.kind.value, i.backfill_id) for i, _ in adopted.applied) == [
        ("q1", "adopt", ours[0].id),
        ("q2", "adopt", ours[1].id),
    ]
    assert bench.phases(adopted) == {"q1": "CompletedWithFailures", "q2": "CompletedWithFailures"}
    with bench.client() as client:
        assert [b.id for b in client.list_backfills("demo_flaky") if b.from_date.year == 2022] == [b.id for b in ours]
    assert bench.store.verify().ok

    slot_reads = sorted({r.url.path for r in bench.sent if r.url.path.endswith("/dag_runs")})
    expected_reads = [f"/api/v2/backfills/{b.id}/dag_runs" for b in ours] if airflow_caps.backfill_slots else []
    assert slot_reads == expected_reads  # on 3.4 the counts above came from each backfill's slots
    assert_slots_count_as_the_old_path(airflow_url, airflow_caps, ours)

    assert ignored_parameters(bench.sent, airflow_url, airflow_caps) == []
    sent_filters = {n for r in bench.sent for n in parse_qs(r.url.query.decode())}
    assert {"run_type", "logical_date_gte", "logical_date_lte", "order_by"} <= sent_filters
    assert_each_filter_filters(bench)


def assert_slots_count_as_the_old_path(airflow_url: str, caps: Capabilities, ours: list[Any]) -> None:
    """On the same history, the counts from 3.4's slots equal those reconstructed from runs and dates (the path
    of the older lines, forced here with 3.3.2's capabilities), and only the slots reader reads slots."""
    found = {}
    for forced in (caps, capabilities_of(Version("3.3.2"))):
        client = AirflowClient(airflow_url, username="admin", password=Secret("admin"), capabilities=forced)
        sent: list[httpx.Request] = []
        client.transport.http.event_hooks["request"].append(sent.append)
        with client:
            runs, _owned = SummaryReader(client).summaries("demo_flaky", ours, ours, {}, {}, partitioned=False)
        found[forced.backfill_slots] = {b: dict(s.counts) for b, s in runs.items()}
        slots = [r.url.path for r in sent if r.url.path.endswith("/dag_runs")]
        assert len(slots) == (len(ours) if forced.backfill_slots else 0)
    assert found[caps.backfill_slots] == found[False]
    assert list(found[False].values()) == [{"failed": 2, "success": 2}, {"failed": 1, "success": 1}]


def assert_each_filter_filters(bench: Bench) -> None:
    """Each filter backfillctl uses on every line changes the answer on this release (an ignored one would not)."""
    path = "/api/v2/dags/demo_flaky/dagRuns"
    q1 = {"logical_date_gte": "2022-01-01T00:00:00Z", "logical_date_lte": "2022-01-04T00:00:00Z"}
    narrowed = {  # filter → (the query with it, its count), against the same query without it
        "logical_date_gte": (
            {"logical_date_gte": "2022-01-05T00:00:00Z", "logical_date_lte": "2022-01-06T00:00:00Z"},
            2,
        ),
        "logical_date_lte": (
            {"logical_date_lte": "2022-01-04T00:00:00Z", "logical_date_gte": "2022-01-01T00:00:00Z"},
            4,
        ),
        "state": ({**q1, "state": "failed"}, 2),
        "run_type": ({**q1, "run_type": "manual"}, 0),
    }
    with bench.client() as client:
        for name, (params, expected) in narrowed.items():
            without = {k: v for k, v in params.items() if k != name}
            assert int(client.server.json("GET", path, params={**params, "limit": 1})["total_entries"]) == expected, (
                name
            )
            assert int(client.server.json("GET", path, params={**without, "limit": 1})["total_entries"]) != expected, (
                name
            )
