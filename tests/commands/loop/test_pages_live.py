"""Metrics and the status page follow live work: finished specs leave the per-spec series and the page's table,
and are counted instead (10,000 finished specs made 50,000 samples and a 5.6 MB page)."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import httpx
from prometheus_client.metrics_core import Metric
from prometheus_client.parser import text_string_to_metric_families

from controller.adapters.monitor import Metrics
from controller.commands.loop.passhooks import MonitorOptions, PassHooks, publish_rows
from controller.commands.reconcile.reconciler import PassResult
from controller.core.render.status import StatusRow
from controller.core.render.status_page import status_page
from tests.commands.reconcile.harness import Bench
from tests.core.render.test_pages import DAY
from tests.fakes.airflow import FakeAirflow

FINISHED = {  # phase → (success, failed) of each finished spec of that phase
    "Succeeded": (30, 0),
    "CompletedWithFailures": (27, 3),
    "Cancelled": (10, 0),
    "VerificationFailed": (30, 0),
}
LIVE = [
    StatusRow("live-running", "orders_daily", "Running", 7, 12, 1, 3, 14, 30, 600.0, ""),
    StatusRow("live-paused", "orders_daily", "Paused", 8, 4, 0, 0, 6, 10, None, "state: paused"),
    StatusRow("live-blocked", "billing_daily", "Blocked", None, 0, 0, 0, 0, 0, None, "DAG billing_dayly not found"),
]


def finished_rows(count: int) -> list[StatusRow]:
    phases = list(FINISHED)
    rows = []
    for n in range(count):
        phase = phases[n % len(phases)]
        success, failed = FINISHED[phase]
        rows.append(StatusRow(f"done-{n:05d}", "orders_daily", phase, 100 + n, success, failed, 0, 0, 30, None, ""))
    return rows


def samples(metrics: Metrics) -> dict[str, list[tuple[dict[str, str], float]]]:
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(metrics.exposition().decode()):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


def test_ten_thousand_finished_specs_and_three_live_ones_make_per_spec_series_for_the_live_ones_only() -> None:
    metrics = Metrics()
    publish_rows(metrics, finished_rows(10_000) + LIVE)
    found = samples(metrics)
    runs = {(labels["spec"], labels["state"]): value for labels, value in found["backfillctl_runs"]}
    assert runs == {
        **{("live-running", s): v for s, v in {"success": 12, "failed": 1, "running": 3, "queued": 14}.items()},
        **{("live-paused", s): v for s, v in {"success": 4, "failed": 0, "running": 0, "queued": 6}.items()},
        **{("live-blocked", s): 0 for s in ("success", "failed", "running", "queued")},
    }
    progress = {labels["spec"]: value for labels, value in found["backfillctl_spec_progress_ratio"]}
    assert progress == {"live-running": 13 / 30, "live-paused": 0.4, "live-blocked": 0.0}
    assert {labels["state"]: v for labels, v in found["backfillctl_finished_runs"]} == {
        "success": 2_500 * (30 + 27 + 10 + 30),
        "failed": 2_500 * 3,
        "running": 0,
        "queued": 0,
    }
    specs = {labels["phase"]: v for labels, v in found["backfillctl_specs"]}
    assert {p: n for p, n in specs.items() if n} == {
        "Running": 1,
        "Paused": 1,
        "Blocked": 1,
        "Succeeded": 2_500,
        "CompletedWithFailures": 2_500,
        "Cancelled": 2_500,
        "VerificationFailed": 2_500,
    }
    assert len(specs) == 13  # every phase, 0 when none
    # 13 phases, 12 runs, 3 progress, 4 finished runs, the histogram's 15, three unlabelled gauges
    assert sum(len(v) for v in found.values()) == 50


def test_a_spec_that_finishes_leaves_the_per_spec_gauges() -> None:
    metrics = Metrics()
    publish_rows(metrics, finished_rows(4) + LIVE)
    done = StatusRow("live-running", "orders_daily", "Succeeded", 7, 29, 1, 0, 0, 30, None, "")
    publish_rows(metrics, [*finished_rows(4), done, *LIVE[1:]])
    found = samples(metrics)
    assert sorted({labels["spec"] for labels, _ in found["backfillctl_runs"]}) == ["live-blocked", "live-paused"]
    assert sorted(labels["spec"] for labels, _ in found["backfillctl_spec_progress_ratio"]) == [
        "live-blocked",
        "live-paused",
    ]
    assert {labels["state"]: v for labels, v in found["backfillctl_finished_runs"]} == {
        "success": 30 + 27 + 10 + 30 + 29,
        "failed": 3 + 1,
        "running": 0,
        "queued": 0,
    }


def test_the_status_page_lists_live_specs_and_the_fifty_that_finished_last() -> None:
    rows = finished_rows(10_000) + LIVE
    # the lower a finished spec's number, the later it finished (the names' order would pick the other end)
    finished_at = {r.spec: f"2026-11-01T00:00:00.{999_999 - n:06d}Z" for n, r in enumerate(rows)}
    page = status_page(rows, [], DAY, finished_at=finished_at)
    listed = re.findall(r'<tr class="spec" data-spec="([^"]+)"', page)
    assert listed == [f"done-{n:05d}" for n in range(50)] + ["live-running", "live-paused", "live-blocked"]
    assert (
        '<tr class="more" id="more-finished"><td colspan="8" class="note">9,950 more finished specs (2,487 Succeeded, '
        "2,487 CompletedWithFailures, 2,488 Cancelled, 2,488 VerificationFailed) not listed: the page shows every "
        "live spec and the 50 that finished last; <code>backfillctl status</code> lists them all.</td></tr>"
    ) in page
    assert (
        '<p class="summary" id="summary">10003 specs: 1 Running, 1 Paused, 2500 Succeeded, 2500 '
        "CompletedWithFailures, 2500 Cancelled, 1 Blocked, 2500 VerificationFailed (degraded: 1 blocked or refused)</p>"
    ) in page
    assert len(page.encode()) < 40_000


def test_a_page_with_few_finished_specs_lists_them_all_without_a_note() -> None:
    page = status_page(finished_rows(3) + LIVE, [], DAY)
    assert len(re.findall(r'<tr class="spec"', page)) == 6
    assert "more-finished" not in page


def test_a_finished_spec_leaves_the_served_metrics_after_the_pass_that_sees_it_finish(tmp_path: Path) -> None:
    """Through the pass hooks, on the fake Airflow: one spec finishes while the other still runs."""
    fake = FakeAirflow()
    fake.scheduler_running = False  # runs move only when this test says
    bench = Bench(tmp_path, fake=fake)
    bench.spec("short", start="2025-01-01", end="2025-01-02")
    bench.spec("long", dag="demo_hourly", start="2025-01-01", end="2025-01-01T10:00:00Z")
    try:
        with PassHooks(bench.settings(), MonitorOptions(port=0), deliver=False, env={}) as hooks:
            assert hooks.server is not None
            first = _pass(bench, hooks)
            before = _runs(hooks.server.address)
            ids = {i.spec: i.backfill_id for i in first.current.items}
            while fake.start_runs(ids["short"]) or fake.finish_run(ids["short"], "success"):
                pass
            fake.mark_complete()
            second = _pass(bench, hooks)
            after = _runs(hooks.server.address)
            finished = _finished(hooks.server.address)
    finally:
        bench.close()
    assert bench.phases(first) == {"long": "Running", "short": "Running"}
    assert bench.phases(second) == {"long": "Running", "short": "Succeeded"}
    assert sorted(before) == ["long", "short"]
    assert sorted(after) == ["long"]
    assert finished == {"success": 2.0, "failed": 0.0, "running": 0.0, "queued": 0.0}


def _pass(bench: Bench, hooks: PassHooks) -> PassResult:
    reconciler = bench.reconciler()
    hooks.attach(reconciler)
    with hooks.around(reconciler) as after:
        result = reconciler.run_once()
        after(result)
    return result


def _families(address: str) -> list[Metric]:
    return list(text_string_to_metric_families(httpx.get(f"{address}/metrics", timeout=10).text))


def _runs(address: str) -> dict[str, int]:
    found = Counter[str]()
    for family in _families(address):
        if family.name in ("backfillctl_runs", "backfillctl_spec_progress_ratio"):
            found.update(s.labels["spec"] for s in family.samples)
    return dict(found)


def _finished(address: str) -> dict[str, float]:
    return {
        s.labels["state"]: s.value
        for f in _families(address)
        if f.name == "backfillctl_finished_runs"
        for s in f.samples
    }
