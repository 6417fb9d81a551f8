"""Spec health rolled up like Argo CD's Degraded: counts per phase first, every blocked or refused spec a finding;
and the change record's links between a spec and its retry."""

from __future__ import annotations

from controller.core.render.change_record import change_record
from controller.core.render.report_markdown import _retry_lines
from controller.core.render.status import (
    StatusRow,
    phase_counts,
    phase_line,
    spec_findings,
    status_report,
    status_text,
)
from tests.core.plan.test_plan import spec


def row(spec: str, phase: str, note: str = "", *, refused: bool = False) -> StatusRow:
    return StatusRow(spec, "demo_daily", phase, None, 0, 0, 0, 0, 0, None, note, refused=refused)


ROWS = [
    row("a", "Running", "2 of 4"),
    row("b", "Blocked", "DAG 'x' does not exist; did you mean demo_daily?"),
    row("c", "Blocked", "the dry run counts 25 runs; expected_runs is 2", refused=True),
    row("d", "Succeeded"),
    row("e", "Running"),
]


def test_counts_per_phase_in_the_phases_order_without_empty_ones() -> None:
    assert phase_counts(ROWS) == {"Running": 2, "Succeeded": 1, "Blocked": 2}
    assert list(phase_counts(ROWS)) == ["Running", "Succeeded", "Blocked"]
    assert phase_counts([]) == {}


def test_the_phase_line_says_counts_and_degraded() -> None:
    assert phase_line(ROWS) == "5 specs: 2 Running, 1 Succeeded, 2 Blocked (degraded: 2 blocked or refused)"
    assert phase_line([row("d", "Succeeded")]) == "1 spec: 1 Succeeded"
    assert phase_line([row("b", "Blocked", "x")]) == "1 spec: 1 Blocked (degraded: 1 blocked or refused)"
    assert phase_line([]) == "0 specs"


def test_every_blocked_spec_is_a_finding_of_its_kind() -> None:
    assert spec_findings(ROWS) == [
        ("blocked", "b: DAG 'x' does not exist; did you mean demo_daily?"),
        ("refused", "c: the dry run counts 25 runs; expected_runs is 2"),
    ]
    assert spec_findings([row("a", "Running", refused=True)]) == []


def test_the_report_leads_with_the_counts_and_ends_with_the_findings() -> None:
    assert status_report(ROWS) == (
        "5 specs: 2 Running, 1 Succeeded, 2 Blocked (degraded: 2 blocked or refused)\n"
        + status_text(ROWS)
        + "! blocked: b: DAG 'x' does not exist; did you mean demo_daily?\n"
        + "! refused: c: the dry run counts 25 runs; expected_runs is 2\n"
    )
    healthy = [row("d", "Succeeded")]
    assert status_report(healthy) == "1 spec: 1 Succeeded\n" + status_text(healthy)


def test_a_long_finding_wraps_within_the_width() -> None:
    long = [row("b", "Blocked", "word " * 30)]
    report = status_report(long, width=40)
    findings = report.split(status_text(long, 40), 1)[1].splitlines()
    assert findings[0].startswith("! blocked: b: word")
    assert len(findings) > 1
    assert all(len(line) <= 40 for line in findings)


def test_the_retry_links_of_a_change_record() -> None:
    assert _retry_lines(change_record(spec("s"), None, [])) == []
    assert _retry_lines(change_record(spec("s", retry_of="orders-2025q1"), None, [])) == [
        "- **Retries the failed runs of**: `orders-2025q1`"
    ]
    retries = [spec("r1"), spec("r 2", path="specs/r2.yaml")]
    assert _retry_lines(change_record(spec("s"), None, [], retries)) == [
        "- **Failed runs retried by**: `r1` (`specs/r1.yaml`), r 2 (`specs/r2.yaml`)"
    ]
