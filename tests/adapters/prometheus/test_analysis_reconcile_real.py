"""Metric analysis end to end (issue 27 §1, Done when): a real Apache Airflow 3.3.2 and a real Prometheus scraping
an exporter the test sets. High load holds a create, low load creates, high load pauses the running backfill, low
load resumes it after the hysteresis, each audited with the query and the value; an unreachable Prometheus and a
stale sample are inconclusive and fail closed after `pause_after`."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from controller.adapters.prometheus import PrometheusClient
from controller.commands.reconcile.reconciler import PassResult, Reconciler
from controller.core.model.analysis import Sample
from controller.core.model.guards import Guard, GuardKind
from controller.core.plan.values import Item
from tests.adapters.prometheus.harness import PrometheusServer, free_port, wait
from tests.commands.reconcile.harness import Bench

pytestmark = [pytest.mark.airflow, pytest.mark.prometheus]
DAG = "demo_slow"  # a 25 s task: the backfill is still running when the load rises
QUERY = "max(wire_wh_cpu_ratio)"
POLICY = f"""\
    version: 1
    downstream:
      warehouse:
        max_active_runs: 8
        analysis:
          prometheus: {{url_env: BACKFILLCTL_PROMETHEUS_URL, query: "{QUERY}"}}
          pause_above: 0.85
          resume_below: 0.7
          max_sample_age: 1m
          on_inconclusive: {{pause_after: 4s}}
"""


@pytest.fixture
def bench(tmp_path: Path, airflow_url: str) -> Iterator[Bench]:
    b = Bench(tmp_path, url=airflow_url)
    yield b
    with b.client() as client:
        for backfill in client.list_backfills(DAG):
            if backfill.active:
                client.cancel(backfill.id)
    b.close()


def load(server: PrometheusServer, value: float) -> Sample:
    """Set the warehouse's load and wait until Prometheus answers it."""
    server.main.set("wire_wh_cpu_ratio", value)
    with PrometheusClient(server.url) as client:

        def probe() -> Sample | None:
            found = client.query(QUERY)
            return found if isinstance(found, Sample) and found.value == value else None

        return wait(probe, f"{QUERY} = {value}")


def one(result: PassResult) -> Item:
    (item,) = result.current.items
    return item


def steps(bench: Bench, spec: str) -> list[tuple[str, str, Any]]:
    """(action, phase, the analysis audited with it) of the spec's pause and unpause records."""
    return [
        (e.entry.action, e.entry.phase, (e.entry.request or e.entry.response or {}).get("analysis"))
        for e in bench.events(spec)
        if e.entry.action in ("pause", "unpause")
    ]


def analysed(record: Any) -> tuple[str, str, float | None, dict[str, float]]:
    (verdict,) = record
    return verdict["action"], verdict["query"], verdict["value"], verdict["thresholds"]


# each run its own week of 2023 (a rerun against the same Airflow must not adopt the last run's backfill)
START = datetime(2023, 1, 1, tzinfo=UTC) + timedelta(days=7 * (int(time.time() / 60) % 50))


def is_paused(bench: Bench) -> bool:
    with bench.client() as client:
        (active,) = [b for b in client.list_backfills(DAG) if b.active and b.from_date == START]
        return active.is_paused


def reconciler(bench: Bench, clock: Callable[[], datetime]) -> Reconciler:
    return Reconciler(bench.settings(), bench.store, bench.client(), sleep=lambda _s: None, clock=clock)


def test_load_holds_creates_pauses_and_resumes_a_real_backfill(
    bench: Bench, prometheus_server: PrometheusServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BACKFILLCTL_PROMETHEUS_URL", prometheus_server.url)
    bench.policy(POLICY)
    end = START + timedelta(days=7)
    bench.spec("wh-load", dag=DAG, start=f"{START:%Y-%m-%d}", end=f"{end:%Y-%m-%d}", mar=1, downstream="[warehouse]")

    pr_plan = bench.cli("plan", "--no-store")  # a pull request's plan: Prometheus is not asked
    assert "analysis of warehouse: analysis evaluated at reconcile (this plan does not query Prometheus)" in (
        pr_plan.stdout
    ), pr_plan.stderr
    load(prometheus_server, 0.95)
    held = one(bench.run())
    assert (held.kind.value, held.phase.value, held.reason, held.guard) == (
        "wait",
        "Queued",
        f"waiting: warehouse load 0.95 > 0.85 ({QUERY})",
        Guard(GuardKind.ANALYSIS, "warehouse"),
    )
    with bench.client() as client:
        assert [b for b in client.list_backfills(DAG) if b.from_date == START] == []

    load(prometheus_server, 0.5)
    started = time.perf_counter()
    created = bench.run()
    first_pass = time.perf_counter() - started
    assert [(i.spec, o) for i, o in created.applied] == [("wh-load", "created")]
    assert not is_paused(bench)

    load(prometheus_server, 0.95)
    paused = bench.run()
    assert [(i.kind.value, i.guard, i.reason) for i, _ in paused.applied] == [
        (
            "pause",
            Guard(GuardKind.ANALYSIS, "warehouse"),
            f"paused by analysis warehouse: waiting: warehouse load 0.95 > 0.85 ({QUERY})",
        )
    ]
    assert one(paused).phase.value == "Paused"
    assert is_paused(bench)

    load(prometheus_server, 0.8)  # under the pause threshold, not yet under resume_below: stays paused
    hysteresis = one(bench.run())
    assert (hysteresis.kind.value, hysteresis.phase.value, hysteresis.reason) == (
        "noop",
        "Paused",
        f"paused by analysis warehouse: waiting: warehouse load 0.8, resumes < 0.7 ({QUERY})",
    )
    assert is_paused(bench)

    load(prometheus_server, 0.5)
    resumed = bench.run()
    assert [(i.kind.value, i.reason) for i, _ in resumed.applied] == [
        ("unpause", "resumed: analysis warehouse no longer applies")
    ]
    assert not is_paused(bench)
    trail = steps(bench, "wh-load")
    assert [(a, p) for a, p, _ in trail] == [
        ("pause", "intent"),
        ("pause", "outcome"),
        ("unpause", "intent"),
        ("unpause", "outcome"),
    ]
    thresholds = {"pause_above": 0.85, "resume_below": 0.7}
    assert [analysed(r) for _, _, r in trail] == [
        ("pause", QUERY, 0.95, thresholds),
        ("pause", QUERY, 0.95, thresholds),
        ("resume", QUERY, 0.5, thresholds),
        ("resume", QUERY, 0.5, thresholds),
    ]
    assert all(r[0]["sample_time"] for _, _, r in trail)

    # the status of the spec names the system's verdict
    shown = bench.cli("status")
    assert f"analysis warehouse: ok: warehouse load 0.5, pauses > 0.85 ({QUERY})" in shown.stdout, shown.stdout

    # Prometheus unreachable: inconclusive (nothing paused yet), then fail closed after pause_after
    monkeypatch.setenv("BACKFILLCTL_PROMETHEUS_URL", f"http://127.0.0.1:{free_port()}")
    unsure = one(bench.run())
    assert (unsure.kind.value, unsure.phase.value) == ("noop", "Running")
    assert unsure.reason.startswith("running; inconclusive: warehouse: Prometheus http://127.0.0.1:")
    assert "unreachable (ConnectError); pausing at" in unsure.reason
    time.sleep(4.5)
    closed = bench.run()
    ((item, outcome),) = closed.applied
    assert (item.kind.value, outcome) == ("pause", "done")
    assert item.reason.startswith("paused by analysis warehouse: fail-closed: warehouse: Prometheus")
    assert "inconclusive for 4s >= pause_after 4s" in item.reason or "inconclusive for 5s" in item.reason
    assert is_paused(bench)
    fail_closed = steps(bench, "wh-load")[-1][2]
    assert (fail_closed[0]["action"], fail_closed[0]["value"]) == ("fail-closed", None)
    assert "unreachable" in fail_closed[0]["inconclusive"]

    # back, but the sample is stale on a clock 5 minutes ahead (a lagging Prometheus): still inconclusive, paused
    monkeypatch.setenv("BACKFILLCTL_PROMETHEUS_URL", prometheus_server.url)
    ahead = reconciler(bench, lambda: datetime.now(UTC) + timedelta(minutes=5)).run_once()
    stale = one(ahead)
    assert (stale.kind.value, stale.phase.value) == ("noop", "Paused")
    assert "old > max_sample_age 1m" in stale.reason, stale.reason  # 4m59s or 5m: Prometheus stamps its own time
    assert is_paused(bench)

    # on time again: the fresh low value resumes it
    back = bench.run()
    assert [(i.kind.value, o) for i, o in back.applied] == [("unpause", "done")]
    assert not is_paused(bench)
    assert bench.store.verify().ok
    print(f"first pass with analysis: {first_pass:.3f} s")
