"""The HTML report's heat map and the status page in headless Chromium, from known runs (no Airflow): what a
reviewer sees, under each page's Content-Security-Policy."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from controller.adapters.monitor import Health, Metrics, MonitorServer
from controller.core.audit.chain import AuditEntry, seal
from controller.core.model.airflow import DagRun, RunSummary
from controller.core.model.binding import Approval, ApprovedReview, Binding, CreateFacts, Phase
from controller.core.model.spec import ReprocessBehavior
from controller.core.render.change_record import change_record
from controller.core.render.heatmap import from_runs
from controller.core.render.report_html import COLOURS, report_html
from controller.core.render.status import StatusRow
from controller.core.render.status_page import status_page
from tests.core.plan.test_plan import spec
from tests.support.browser import dump_dom, hex_rgb, screenshot

CELL = 14 * 14
SPEC = spec(
    "orders-<fix>",
    dag="orders_daily",
    reason="Revenue rounding <b>bug</b>",
    requested_by="carol",
    approvers=("dave",),
    to_date=datetime(2025, 2, 9, tzinfo=UTC),
    reprocess_behavior=ReprocessBehavior.FAILED,
    max_active_runs=3,
    path="specs/orders-fix.yaml",
    digest="sha256:x",
)
APPROVAL = Approval(41, None, (ApprovedReview("dave", 9001, "c", "2026-11-01T10:00:00Z"),))
STORED = Binding(
    "orders-<fix>",
    "orders_daily",
    7,
    Phase.COMPLETED_WITH_FAILURES,
    runs=RunSummary({"success": 30, "failed": 5}, never_started=2),
    created=CreateFacts(37, 40),
    approval=APPROVAL,
)


CSP_META = (
    '<meta http-equiv="Content-Security-Policy" '
    "content=\"default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'\">"
)


def forty_days() -> list[tuple[DagRun, str]]:
    start = datetime(2025, 1, 1, tzinfo=UTC)
    runs = []
    for n in range(40):  # 40 days: 5 failed, 2 never started, 3 skipped (scheduled runs kept), 30 succeeded
        when = start + timedelta(days=n)
        state, started, run_type = "success", True, "backfill"
        if n in (3, 9, 17, 25, 33):
            state = "failed"
        elif n in (36, 37):
            state, started = "failed", False
        elif n in (0, 1, 2):
            run_type = "scheduled"
        runs.append((DagRun(f"r{n}", when, state, when if started else None, None), run_type))
    return runs


def report() -> str:
    record = seal(1, "2025-03-01T00:00:00.000000Z", AuditEntry("create", "intent", "ci", "0"), "0" * 64)
    return report_html(change_record(SPEC, STORED, [record]), from_runs(forty_days()))


def test_heat_map_cells_and_colours_as_rendered(tmp_path: Path) -> None:
    """Under its Content-Security-Policy (inline style only) the page renders as before."""
    page = tmp_path / "report.html"
    page.write_text(report())
    dom = dump_dom(page.as_uri())
    assert CSP_META in dom
    assert 'id="heatmap" data-cells="40" data-unit="day"' in dom
    counts = {s: dom.count(f'data-state="{s}"') for s in COLOURS}
    assert counts == {"succeeded": 30, "failed": 5, "skipped": 3, "never_started": 2, "in_progress": 0}
    assert "orders-&lt;fix&gt;" in dom
    assert "<b>bug</b>" not in dom
    shot = screenshot(page.as_uri(), tmp_path / "report.png", height=900)
    seen = {s: shot[hex_rgb(c)] for s, c in COLOURS.items()}
    # each cell and each legend swatch is a 14 x 14 square of its colour
    assert seen == {s: (n + 1) * CELL for s, n in counts.items()}


def test_a_script_slipped_into_the_report_does_not_run(tmp_path: Path) -> None:
    """What an escaping bug would let through: the page's policy stops it (the report itself has no script)."""
    slipped = '<script>document.body.setAttribute("data-ran", "yes")</script><img id="beacon" src="data:,x">'
    page = tmp_path / "report.html"
    page.write_text(report().replace("<h1>", slipped + "<h1>", 1))
    dom = dump_dom(page.as_uri())
    assert 'id="beacon"' in dom  # the slipped text is in the page
    assert "<body>" in dom  # and its script did not run (it would have set data-ran on the body)


def test_the_status_page_renders_as_served_under_its_security_headers(tmp_path: Path) -> None:
    rows = [
        StatusRow("orders-fix", "orders_daily", "Running", 7, 12, 3, 3, 12, 30, 600.0, ""),
        StatusRow("billing-fix", "billing_daily", "Blocked", None, 0, 0, 0, 0, 0, None, "DAG not found"),
    ]
    server = MonitorServer(Metrics(), Health(), port=0)
    try:
        server.set_page(status_page(rows, [], datetime(2026, 12, 1, tzinfo=UTC)))
        dom = dump_dom(server.address + "/")
        shot = screenshot(server.address + "/", tmp_path / "status.png", height=500)
    finally:
        server.close()
    assert 'data-spec="orders-fix" data-phase="Running"' in dom
    # inline styles apply: the phase badges (a style attribute each) and the bar's green and red parts
    assert shot[hex_rgb("#0969da")] > 200  # Running
    assert shot[hex_rgb("#cf222e")] > 200  # Blocked, and the bar's failed part
    assert shot[hex_rgb("#1a7f37")] > 12 * 50  # 40 % of a 160 x 12 bar, less its rounded corners
