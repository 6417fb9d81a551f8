"""Golden files for every renderer of a plan, status and report: one fixed plan with every kind of item and
finding, rendered as text, Markdown and JSON, compared byte for byte with tests/core/render/golden/.

Regenerate after an intended change with `BACKFILLCTL_UPDATE_GOLDEN=1 pytest tests/core/render/test_render_golden.py`
and review the diff like any other change.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from controller.core.audit.chain import AuditEntry, seal
from controller.core.model.airflow import BackfillRequest, RunSummary
from controller.core.model.binding import Binding, CreateFacts, Phase
from controller.core.model.spec import DesiredState
from controller.core.plan.values import Finding, FindingKind, Item, Kind, Plan
from controller.core.render import plan as plan_render
from controller.core.render.change_record import change_record
from controller.core.render.report_markdown import report_markdown
from controller.core.render.status import status_rows, status_text
from tests.core.plan.test_plan import JAN1, spec

GOLDEN = Path(__file__).parent / "golden"


def plan() -> Plan:
    new, queued = spec("new-one", expected_runs=7), spec("queued-two")
    running, paused = spec("running", dag="e"), spec("paused", dag="f", state=DesiredState.PAUSED)
    runs = RunSummary({"success": 3, "failed": 1, "running": 1, "queued": 2}, (JAN1,), 0, 60.0)
    items = (
        Item(
            "new-one",
            "d",
            Kind.CREATE,
            Phase.PENDING,
            "",
            None,
            7,
            7,
            JAN1,
            JAN1 + timedelta(days=6),
            source=new,
            request=BackfillRequest.from_spec(new),
        ),
        Item("queued-two", "d", Kind.WAIT, Phase.QUEUED, "queued behind new-one", source=queued),
        Item("running", "e", Kind.NOOP, Phase.RUNNING, "in sync", 12, source=running, runs=runs),
        Item("paused", "f", Kind.PAUSE, Phase.PAUSED, "spec says paused", 13, source=paused, runs=runs),
        Item(
            "big",
            "g",
            Kind.REFUSE,
            Phase.BLOCKED,
            "the dry run counts 9 runs; expected_runs is 5",
            error=True,
            source=spec("big", dag="g"),
        ),
        Item("gone", "h", Kind.NOOP, Phase.ORPHANED, "spec gone was deleted; backfill #9 keeps running", 9),
    )
    findings = (
        Finding(FindingKind.DRIFT, "e", "backfill #12 was paused outside backfillctl", "running", 12),
        Finding(FindingKind.UNMANAGED, "d", "unmanaged active backfill #2 blocks this DAG's queue", None, 2),
        Finding(FindingKind.INCOMPLETE, "x", "DAG x was not fully observed: <b>503</b> | boom", cause="<b>503</b>"),
    )
    return Plan(items, findings)


def complete_plan() -> Plan:
    return Plan(plan().items, plan().findings[:2])


def report() -> str:
    s = spec("running", dag="e")
    binding = Binding(
        "running",
        "e",
        12,
        Phase.COMPLETED_WITH_FAILURES,
        DesiredState.ACTIVE,
        "sha256:running",
        "failed: 2025-01-01",
        RunSummary({"success": 6, "failed": 1}, (JAN1,)),
        CreateFacts(7, 7, JAN1, JAN1),
        (12,),
        "abc123",
    )
    events, prev = [], "0" * 64
    for seq, entry in enumerate(
        [
            AuditEntry("create", "intent", "ci", "0.1", spec_name="running"),
            AuditEntry("create", "outcome", "ci", "0.1", outcome="created", spec_name="running", backfill_id=12),
            AuditEntry("observe", "observation", "ci", "0.1", outcome="CompletedWithFailures", spec_name="running"),
        ],
        start=1,
    ):
        record = seal(
            seq,
            (datetime(2026, 11, 1, 10, tzinfo=UTC) + timedelta(minutes=seq)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            entry,
            prev,
        )
        events.append(record)
        prev = record.hash
    return report_markdown(change_record(s, binding, events))


RENDERED = {
    "plan.txt": lambda: plan_render.plan_text(complete_plan()),
    "plan-incomplete.txt": lambda: plan_render.plan_text(plan()),
    "plan.md": lambda: plan_render.plan_markdown(plan()),
    "plan.json": lambda: plan_render.plan_json(complete_plan()),
    "status.txt": lambda: status_text(status_rows(complete_plan(), {})),
    "report.md": report,
}


@pytest.mark.parametrize("name", sorted(RENDERED))
def test_rendered_output_matches_its_golden_file(name: str) -> None:
    text = RENDERED[name]()
    path = GOLDEN / name
    if os.environ.get("BACKFILLCTL_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


LONG = "orders-2025q1-rounding-fix-for-the-finance-warehouse-reload"


def hourly_plan() -> Plan:
    """A long name on an hourly DAG (its range ends at 23:00) beside a short one on a DAG with a longer id."""
    hourly = spec(LONG, dag="demo_hourly", to_date=JAN1 + timedelta(hours=23))
    short = spec("b", dag="orders_daily_with_a_long_id")
    items = (
        Item(LONG, "demo_hourly", Kind.CREATE, Phase.PENDING, "", None, 24, 24, source=hourly),
        Item("b", "orders_daily_with_a_long_id", Kind.WAIT, Phase.QUEUED, f"queued behind {LONG}", source=short),
    )
    return Plan(items, ())


def test_plan_text_aligns_its_columns_and_shows_an_hourly_range_to_the_hour() -> None:
    lines = plan_render.plan_text(hourly_plan()).splitlines()
    assert lines[:2] == [
        f"+ create    {LONG}  demo_hourly                  2025-01-01T00:00:00Z → 2025-01-01T23:00:00Z  "
        "reprocess none  max_active_runs 2  forward  runs 24 of 24 in range  approvers b  ticket CHG-1  [Pending]",
        f"… queued    b{' ' * (len(LONG) - 1)}  orders_daily_with_a_long_id  2025-01-01 → 2025-01-07  reprocess none  "
        f"max_active_runs 2  forward  approvers b  ticket CHG-1  — queued behind {LONG}  [Queued]",
    ]


def test_plan_text_fits_80_columns_without_cutting_a_name() -> None:
    lines = plan_render.plan_text(hourly_plan(), 80).splitlines()
    assert max(map(len, lines)) <= 80
    assert lines == [
        f"+ create    {LONG}",
        "    [Pending]  DAG demo_hourly  2025-01-01T00:00:00Z → 2025-01-01T23:00:00Z",
        "    reprocess none  max_active_runs 2  forward  runs 24 of 24 in range",
        "    approvers b  ticket CHG-1",
        "… queued    b  orders_daily_with_a_long_id  [Queued]",
        "    2025-01-01 → 2025-01-07  reprocess none  max_active_runs 2  forward",
        "    approvers b  ticket CHG-1",
        f"    — queued behind {LONG}",
        "Plan: 1 to create, 0 to pause, 0 to cancel, 1 queued, 0 blocked.",
        f"Checksum: {hourly_plan().checksum()}",
    ]


def test_the_plan_lists_changes_and_one_line_for_the_specs_in_sync() -> None:
    """Terraform shows only changes: the specs in sync are counted by phase; --show-unchanged lists them."""
    full = plan_render.plan_text(complete_plan()).splitlines()
    short = plan_render.plan_text(complete_plan(), show_unchanged=False).splitlines()
    assert [line for line in full if line not in short] == [
        line for line in full if line.startswith("= in sync   running")
    ]
    assert len(short) == len(full)  # the one line in sync gone, its summary line added
    assert short[-3] == "1 spec unchanged (1 Running): --show-unchanged lists them"
    assert [line for line in short if line.startswith("= in sync   gone")]  # an orphan is still something to see
