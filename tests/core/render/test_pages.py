"""The heat map model, its text and HTML renderings, the status page, metrics, health and JSON logs."""

from __future__ import annotations

import io
import json
import logging
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from controller.adapters.logsetup import PASS_ID, configure
from controller.adapters.monitor import Health, Metrics, MonitorServer, endpoint_template
from controller.adapters.prometheus import PrometheusClient
from controller.commands.loop.passhooks import MonitorOptions, PassHooks
from controller.commands.reconcile.analysis import Analyst
from controller.core.model.airflow import DagRun
from controller.core.render.change_record import Intervals
from controller.core.render.heatmap import calendar, from_runs, from_stored, heatmap_text
from controller.core.render.report_html import heatmap_html
from controller.core.render.status import StatusRow
from controller.core.render.status_page import status_page
from tests.commands.reconcile.harness import Bench
from tests.fakes.airflow import FakeAirflow

DAY = datetime(2025, 1, 1, tzinfo=UTC)


def run(day: int, state: str, *, started: bool = True, hours: int = 0) -> DagRun:
    when = DAY + timedelta(days=day - 1, hours=hours)
    return DagRun(f"r{day}-{hours}", when, state, when if started else None, None)


def test_cells_by_run_type_and_state_on_a_month_calendar() -> None:
    runs = [
        (run(1, "success"), "backfill"),
        (run(2, "failed"), "backfill"),
        (run(3, "success"), "scheduled"),
        (run(4, "failed", started=False), "backfill"),
        (run(5, "running"), "backfill"),
    ]
    themap = from_runs(runs)
    assert [c.state for c in themap.cells] == ["succeeded", "failed", "skipped", "never_started", "in_progress"]
    unit, rows = calendar(themap)
    assert (unit, [r.label for r in rows], len(rows[0].slots)) == ("day", ["2025-01"], 31)
    assert heatmap_text(themap).splitlines()[1:3] == [
        "           1234567890123456789012345678901",
        "2025-01    #X.o~",
    ]


def test_hourly_runs_get_a_row_per_day_and_a_column_per_hour() -> None:
    themap = from_runs([(run(1, "success", hours=h), "backfill") for h in range(30)])
    unit, rows = calendar(themap)
    assert (unit, [r.label for r in rows]) == ("hour", ["2025-01-01", "2025-01-02"])
    assert sum(1 for r in rows for c in r.slots if c) == 30


def test_offline_map_places_only_the_failed_dates_and_says_so() -> None:
    dates = (datetime(2025, 1, 3, tzinfo=UTC), datetime(2025, 1, 2, tzinfo=UTC))
    themap = from_stored(Intervals(5, 2, dates, (), 0, 1, 8, ()))
    assert [c.label for c in themap.cells] == ["2025-01-02", "2025-01-03"]
    assert dict(themap.unplaced) == {"succeeded": 5, "skipped": 1}
    html = heatmap_html(themap)
    assert 'data-cells="2"' in html
    assert html.count('data-state="failed"') == 2
    assert "Set BACKFILLCTL_AIRFLOW_URL" in html


def test_status_page_escapes_everything_and_shows_progress() -> None:
    row = StatusRow("s<script>", "d&d", "Running", 4, 3, 1, 2, 4, 10, 95.0, 'note "x" <b>')
    page = status_page([row], [("dag-paused", "DAG <d> is paused")], DAY, refresh_seconds=10)
    assert "<script>" not in page
    assert "<b>" not in page
    assert "s&lt;script&gt;" in page
    assert "d&amp;d" in page
    assert "DAG &lt;d&gt; is paused" in page
    assert 'aria-valuenow="40"' in page
    assert '<meta http-equiv="refresh" content="10">' in page


def prometheus_at(value: float) -> PrometheusClient:
    """A Prometheus whose instant query answers one fresh sample of `value`."""

    def answer(_request: httpx.Request) -> httpx.Response:
        sample = [datetime.now(UTC).timestamp(), str(value)]
        data = {"resultType": "vector", "result": [{"metric": {}, "value": sample}]}
        return httpx.Response(200, json={"status": "success", "data": data})

    return PrometheusClient("http://prometheus:9090", transport=httpx.MockTransport(answer))


def test_the_page_shows_an_analysis_verdicts_note_escaped(tmp_path: Path) -> None:
    """A pass on the fake Airflow whose warehouse load is over its limit: the page served after it shows the held
    spec's note, the verdict with the query, once, its `>` and quotes escaped."""
    bench = Bench(tmp_path, fake=FakeAirflow())
    query = 'max(warehouse_cpu_ratio{env="prod"})'
    bench.policy(
        textwrap.dedent(f"""\
        version: 1
        downstream:
          warehouse:
            max_active_runs: 8
            analysis:
              prometheus: {{url_env: BACKFILLCTL_PROMETHEUS_URL, query: '{query}'}}
              pause_above: 0.85
              max_sample_age: 2m
        """)
    )
    bench.spec("wh", downstream="[warehouse]")
    reconciler = bench.reconciler()
    reconciler.analyst = Analyst(
        bench.store, {"BACKFILLCTL_PROMETHEUS_URL": "http://prometheus:9090"}, lambda *_: prometheus_at(0.95)
    )
    try:
        with PassHooks(bench.settings(), MonitorOptions(port=0), deliver=False, env={}) as hooks:
            with hooks.around(reconciler) as after:
                result = reconciler.run_once()
                after(result)
            assert hooks.server is not None
            page = httpx.get(f"{hooks.server.address}/", timeout=10).text
    finally:
        bench.close()
    (item,) = result.current.items
    note = f"waiting: warehouse load 0.95 > 0.85 ({query})"
    assert (item.phase.value, item.reason) == ("Queued", note)
    (row,) = [line for line in page.splitlines() if line.startswith('<tr class="spec"')]
    assert row.startswith('<tr class="spec" data-spec="wh" data-phase="Queued">')
    assert row.endswith(
        '<td class="note">waiting: warehouse load 0.95 &gt; 0.85 (max(warehouse_cpu_ratio{env=&quot;prod&quot;}))'
        "</td></tr>"
    )
    assert note not in page


def test_endpoint_templates_keep_label_values_bounded() -> None:
    assert endpoint_template("/api/v2/dags/orders_daily/dagRuns") == "/api/v2/dags/{dag_id}/dagRuns"
    assert endpoint_template("/api/v2/backfills/12/pause") == "/api/v2/backfills/{backfill_id}/pause"
    assert endpoint_template("/api/v2/backfills/dry_run") == "/api/v2/backfills/dry_run"


def test_server_serves_parseable_metrics_health_and_the_page() -> None:
    metrics, health = Metrics(), Health(max_failed=2)
    metrics.observe_request("GET", "/api/v2/dags/x/dagRuns", 200)
    metrics.observe_request("GET", "/api/v2/dags/x/dagRuns", None)
    server = MonitorServer(metrics, health, port=0)
    try:
        server.set_page("<p>hello</p>")
        with httpx.Client(base_url=server.address) as client:
            families = {f.name: f for f in text_string_to_metric_families(client.get("/metrics").text)}
            samples = {
                (s.labels.get("status_class"), s.value)
                for s in families["backfillctl_airflow_requests"].samples
                if s.name.endswith("_total")
            }
            assert samples == {("2xx", 1.0), ("error", 1.0)}
            assert client.get("/healthz").status_code == 200
            health.record(False, "Airflow unreachable")
            assert client.get("/healthz").status_code == 200
            health.record(False, "Airflow unreachable")
            answer = client.get("/healthz")
            assert (answer.status_code, answer.text) == (
                503,
                "unhealthy: 2 failed passes in a row (Airflow unreachable)\n",
            )
            health.record(True)
            assert client.get("/healthz").status_code == 200
            health.lease_lost = True
            assert client.get("/healthz").text == "unhealthy: the store's lease was lost\n"
            assert client.get("/").text == "<p>hello</p>"
            assert client.get("/nope").status_code == 404
            assert client.post("/").status_code == 405
    finally:
        server.close()


def test_json_logs_carry_the_fields_and_redact_secrets() -> None:
    stream = io.StringIO()
    handler = configure("json", secrets=["canary-token-123"], stream=stream)
    try:
        token = PASS_ID.set("p1")
        logging.getLogger("controller.test").info(
            "created with canary-token-123", extra={"spec": "s", "dag": "d", "backfill": 3}
        )
        PASS_ID.reset(token)
    finally:
        logging.getLogger("controller").removeHandler(handler)
        logging.getLogger("controller").propagate = True
    line = json.loads(stream.getvalue())
    assert {k: line[k] for k in ("level", "event", "spec", "dag", "backfill", "pass_id")} == {
        "level": "info",
        "event": "created with [secure]",
        "spec": "s",
        "dag": "d",
        "backfill": 3,
        "pass_id": "p1",
    }
    assert line["time"].endswith("Z")
