"""Analysis in a reconcile pass on the fake Airflow, with Prometheus answered by a MockTransport: one query per
system a spec lists, the state kept in the store (and seeded from the audit when the store lost it), a missing
URL variable inconclusive so fail-closed applies, the PR plan not querying Prometheus."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime

import httpx
import pytest

from controller.adapters.prometheus import PrometheusClient
from controller.adapters.store import NoStore
from controller.adapters.store.tables import analysis_state
from controller.commands.reconcile.analysis import Analyst, analysed_names
from controller.commands.reconcile.reconciler import PassResult, Reconciler
from controller.core.model.guards import Guard, GuardKind
from controller.core.render.analysis import analysis_text
from tests.commands.reconcile.harness import Bench, fake

QUERY = "max(warehouse_cpu_ratio)"
POLICY = f"""\
    version: 1
    downstream:
      warehouse:
        max_active_runs: 8
        analysis:
          prometheus: {{url_env: BACKFILLCTL_PROMETHEUS_URL, query: "{QUERY}"}}
          pause_above: 0.85
          max_sample_age: 2m
          min_pause_minutes: 30
          on_inconclusive: {{pause_after: 10m}}
      lake:
        max_active_runs: 8
        analysis: {{prometheus: {{url_env: LAKE_URL, query: "x"}}, pause_above: 1, max_sample_age: 2m}}
"""


class Gauge:
    def __init__(self) -> None:
        self.value, self.asked = 0.5, 0

    def transport(self) -> httpx.MockTransport:
        def answer(request: httpx.Request) -> httpx.Response:
            self.asked += 1
            stamp = datetime.now(UTC).timestamp()
            data = {"resultType": "vector", "result": [{"metric": {}, "value": [stamp, str(self.value)]}]}
            return httpx.Response(200, json={"status": "success", "data": data})

        return httpx.MockTransport(answer)

    def client(self) -> PrometheusClient:
        return PrometheusClient("http://prometheus:9090", transport=self.transport())


def run(bench: Bench, gauge: Gauge, env: Mapping[str, str] | None = None) -> PassResult:
    reconciler = bench.reconciler()

    def connect(_name: str, _env: Mapping[str, str]) -> PrometheusClient:
        return PrometheusClient("http://prometheus:9090", transport=gauge.transport())

    given = {"BACKFILLCTL_PROMETHEUS_URL": "http://prometheus:9090"} if env is None else env
    reconciler.analyst = Analyst(bench.store, given, connect if env is None else Analyst(bench.store).connect)
    return reconciler.run_once()


def test_one_query_a_pass_state_kept_and_a_lost_store_stays_paused(bench: Bench) -> None:
    bench.policy(POLICY)
    bench.spec("wh", downstream="[warehouse]")
    fake(bench).scheduler_running = False  # the backfill stays running
    gauge = Gauge()
    assert [o for _, o in run(bench, gauge).applied] == ["created"]
    assert gauge.asked == 1  # only systems a spec lists: lake is not asked
    gauge.value = 0.95
    paused = run(bench, gauge)
    assert [(i.kind.value, i.guard) for i, _ in paused.applied] == [("pause", Guard(GuardKind.ANALYSIS, "warehouse"))]
    assert gauge.asked == 2  # once a pass, the re-observation after the pause included
    (backfill,) = fake(bench).backfills.values()
    assert backfill["is_paused"] is True
    binding = bench.store.binding("wh")
    assert binding is not None
    assert (binding.guard, binding.applied_state.value) == (Guard(GuardKind.ANALYSIS, "warehouse"), "active")
    stored = bench.store.analysis_states()["warehouse"]
    assert stored.paused_since is not None
    with bench.store.engine.begin() as conn:  # the store loses the analysis state
        conn.execute(analysis_state.delete())
    gauge.value = 0.1  # low, but min_pause_minutes 30 counts from the audited pause: stays paused
    held = run(bench, gauge)
    assert held.applied == []
    (item,) = held.current.items
    assert item.reason.startswith("paused by analysis warehouse: waiting: warehouse load 0.1 < 0.765, paused at least")
    seeded = bench.store.analysis_states()["warehouse"].paused_since
    assert seeded is not None
    assert abs((seeded - stored.paused_since).total_seconds()) < 5  # the audited pause's time


def test_a_missing_url_is_inconclusive_with_a_warning(bench: Bench, caplog: pytest.LogCaptureFixture) -> None:
    bench.policy(POLICY)
    bench.spec("wh", downstream="[warehouse]")
    with caplog.at_level(logging.WARNING):
        result = run(bench, Gauge(), env={})
    (item,) = result.current.items
    assert (item.kind.value, item.phase.value, item.guard) == ("wait", "Queued", Guard(GuardKind.ANALYSIS, "warehouse"))
    assert item.reason.startswith("inconclusive: warehouse: BACKFILLCTL_PROMETHEUS_URL is not set; pausing at ")
    assert fake(bench).backfills == {}
    assert any("BACKFILLCTL_PROMETHEUS_URL is not set" in r.getMessage() for r in caplog.records)


def test_the_pr_plan_does_not_query_prometheus(bench: Bench) -> None:
    bench.policy(POLICY)
    bench.spec("wh", downstream="[warehouse]")
    reconciler = Reconciler(bench.settings(), NoStore(), bench.client())
    gauge = Gauge()
    reconciler.analyst = Analyst(NoStore(), {"BACKFILLCTL_PROMETHEUS_URL": "http://p"}, lambda *_: gauge.client())
    viewed = reconciler.plan()
    plan, specs, world = viewed.plan, viewed.specs, viewed.world
    assert (world.analysis, gauge.asked, plan.items[0].kind.value) == (None, 0, "create")
    assert analysis_text("text", analysed_names(specs, viewed.policy), world.analysis) == (
        "analysis of warehouse: analysis evaluated at reconcile (this plan does not query Prometheus)\n"
    )
