"""Outcome derivation (pure): run summaries, status rows, ETA, and the change report."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

import pytest

from controller.core.audit.chain import AuditEntry, seal
from controller.core.model.airflow import (
    Backfill,
    BackfillRequest,
    DagRun,
    Rerun,
    RunSummary,
    summarise,
    summary_from_json,
)
from controller.core.model.binding import Binding, CreateFacts, Phase
from controller.core.model.chunks import Chunk, Progress
from controller.core.model.ranges import compact
from controller.core.model.spec import DesiredState, ReprocessBehavior
from controller.core.plan.values import Item, Kind, Plan
from controller.core.render.change_record import change_record
from controller.core.render.report_markdown import report_markdown, rerun_text
from controller.core.render.status import (
    StatusRow,
    eta_text,
    status_rows,
    status_text,
    stored_rows,
)
from tests.core.plan.test_plan import JAN1, spec

START = datetime(2026, 11, 1, 10, 0, tzinfo=UTC)


def run(day: int, state: str, started: int | None = None, took: int | None = None) -> DagRun:
    begin = None if started is None else START + timedelta(seconds=started)
    end = None if begin is None or took is None else begin + timedelta(seconds=took)
    return DagRun(f"backfill__{day}", JAN1 + timedelta(days=day), state, begin, end)


def test_summarise_counts_states_failed_dates_never_started_and_mean_duration() -> None:
    summary = summarise(
        [
            run(0, "success", 0, 10),
            run(1, "failed", 5, 30),
            run(2, "failed"),
            run(3, "failed"),
            run(4, "running", 40),
            run(5, "queued"),
            run(6, "success", 0, 20),
        ]
    )
    assert summary == RunSummary(
        {"success": 2, "failed": 3, "running": 1, "queued": 1}, (JAN1 + timedelta(days=1),), 2, 20.0
    )
    assert (summary.total, summary.unfinished, summary.count("skipped")) == (7, 2, 0)
    assert summary.as_json() == {
        "counts": {"failed": 3, "queued": 1, "running": 1, "success": 2},
        "total": 7,
        "failed_dates": ["2025-01-02T00:00:00+00:00"],
        "failed_partitions": [],
        "never_started": 2,
        "superseded": 0,
        "mean_duration": 20.0,
        "reruns": [],
    }
    assert list(summary.as_json()["counts"]) == ["failed", "queued", "running", "success"]


def test_a_summarys_reruns_round_trip_and_count_the_unknown_outcomes() -> None:
    lost = Rerun(JAN1, "spec fix (#4)", "success")
    beside = Rerun(JAN1 + timedelta(days=1), "hand", "failed", "success")
    summary = RunSummary({"success": 1}, reruns=(lost, beside))
    assert summary.as_json()["reruns"] == [
        {"date": "2025-01-01T00:00:00+00:00", "by": "spec fix (#4)", "state": "success", "own": None},
        {"date": "2025-01-02T00:00:00+00:00", "by": "hand", "state": "failed", "own": "success"},
    ]
    assert summary_from_json(summary.as_json()) == summary
    assert (summary.unknown, summary.total, RunSummary({}).unknown) == (1, 1, 0)
    assert [lost.text(), beside.text()] == [
        "2025-01-01 re-run by spec fix (#4), now success",
        "2025-01-02 re-run by hand, now failed",
    ]


def test_summarise_nothing() -> None:
    assert summarise([]) == RunSummary({}, (), 0, None)
    assert summarise([run(0, "queued")]).mean_duration is None
    assert summarise([run(0, "success", 0, 0)]).mean_duration == 0.0


def test_phase_terminality() -> None:
    assert {p for p in Phase if p.terminal} == {
        Phase.SUCCEEDED,
        Phase.COMPLETED_WITH_FAILURES,
        Phase.CANCELLED,
        Phase.VERIFICATION_FAILED,
    }
    assert [p.value for p in Phase] == [
        "Pending",
        "Queued",
        "Running",
        "Paused",
        "Succeeded",
        "CompletedWithFailures",
        "Cancelled",
        "Blocked",
        "Orphaned",
        "AwaitingPromotion",
        "Halted",
        "AwaitingRehearsal",
        "VerificationFailed",
    ]


def test_backfill_active_and_conf_json() -> None:
    b = Backfill(1, "d", JAN1, JAN1, "none", 1, False, None, START, None)
    assert (b.active, b.conf_json()) == (True, None)
    done = Backfill(1, "d", JAN1, JAN1, "none", 1, False, {"b": 1, "a": [1, "é"]}, START, START)
    assert (done.active, done.conf_json()) == (False, '{"a":[1,"é"],"b":1}')
    assert Backfill(1, "d", JAN1, JAN1, "none", 1, False, {}, START, None).conf_json() is None


def test_backfill_request_from_spec_sends_only_what_is_set() -> None:
    plain = BackfillRequest.from_spec(spec())
    assert plain.body() == {
        "dag_id": "d",
        "from_date": "2025-01-01T00:00:00Z",
        "to_date": "2025-01-07T00:00:00Z",
        "reprocess_behavior": "none",
        "max_active_runs": 2,
    }
    full = BackfillRequest.from_spec(
        spec(
            run_backwards=True,
            run_on_latest_version=False,
            dag_run_conf=MappingProxyType({"full": True, "n": (1, 2)}),
            reprocess_behavior=ReprocessBehavior.FAILED,
        ),
        reprocess="completed",
    )
    assert full.body() == {
        "dag_id": "d",
        "from_date": "2025-01-01T00:00:00Z",
        "to_date": "2025-01-07T00:00:00Z",
        "reprocess_behavior": "completed",
        "max_active_runs": 2,
        "run_backwards": True,
        "run_on_latest_version": False,
        "dag_run_conf": {"full": True, "n": [1, 2]},
    }
    assert BackfillRequest.from_spec(spec(reprocess_behavior=ReprocessBehavior.FAILED)).reprocess_behavior == "failed"
    assert BackfillRequest.from_spec(spec(dag_run_conf=MappingProxyType({}))).dag_run_conf is None
    assert BackfillRequest("d", JAN1, JAN1).body() == {
        "dag_id": "d",
        "from_date": "2025-01-01T00:00:00Z",
        "to_date": "2025-01-01T00:00:00Z",
    }


def item(phase: Phase = Phase.RUNNING, runs: dict[str, Any] | None = None, max_active_runs: int | None = None) -> Item:
    source = None if max_active_runs is None else spec("s", max_active_runs=max_active_runs)
    return Item("s", "d", Kind.NOOP, phase, "in sync", 4, source=source, runs=summary_from_json(runs or {}))


def stored(name: str, phase: Phase = Phase.PENDING, backfill_id: int | None = None, **fields: Any) -> Binding:
    """What the store keeps of a spec (runs given as the JSON the store holds)."""
    runs = fields.pop("runs", None)
    return Binding(name, "d", backfill_id, phase, runs=None if runs is None else summary_from_json(runs), **fields)


def counts(**c: int) -> dict[str, Any]:
    return {"counts": c, "total": sum(c.values()), "mean_duration": 60.0}


@pytest.mark.parametrize(
    ("runs", "mar", "eta"),
    [
        (counts(success=2, running=2, queued=3), 2, 180.0),  # ceil(5 / 2) = 3 waves of 60 s
        (counts(success=2, running=1, queued=3), 2, 120.0),
        (counts(queued=1), 4, 60.0),
        (counts(running=1, queued=1), 2, 60.0),
        (counts(success=5), 2, None),  # nothing left
        ({"counts": {"queued": 3}, "total": 3, "mean_duration": None}, 2, None),  # no finished run yet
        (counts(queued=2, running=1), None, 180.0),  # max_active_runs unknown: one at a time
    ],
)
def test_status_row_eta(runs: dict[str, Any], mar: int | None, eta: float | None) -> None:
    (row,) = status_rows(Plan((item(runs=runs, max_active_runs=mar),)), {})
    assert row.eta_seconds == eta


def test_status_row_from_the_plan_item_and_progress() -> None:
    (row,) = status_rows(Plan((item(runs=counts(success=3, failed=1, running=1, queued=3), max_active_runs=2),)), {})
    assert row == StatusRow("s", "d", "Running", 4, 3, 1, 1, 3, 8, 120.0, "in sync")
    assert row.progress == 50.0
    assert row.as_json() == {
        "spec": "s",
        "dag_id": "d",
        "phase": "Running",
        "backfill_id": 4,
        "runs": {"success": 3, "failed": 1, "running": 1, "queued": 3, "total": 8},
        "progress": 50.0,
        "eta_seconds": 120.0,
        "note": "in sync",
        "chunk": None,
        "backfills": [],
        "refused": False,
        "stale": False,
        "observed_at": None,
        "link": None,
    }
    third = StatusRow("s", "d", "Running", 4, 1, 0, 0, 2, 3, None, "")
    assert third.as_json()["progress"] == 33.3
    assert StatusRow("s", "d", "Pending", None, 0, 0, 0, 0, 0, None, "").progress == 0.0


def test_status_row_falls_back_to_what_the_store_recorded() -> None:
    pending = Item("s", "d", Kind.WAIT, Phase.QUEUED, "queued behind a")
    (row,) = status_rows(Plan((pending,)), {"s": stored("s", Phase.QUEUED, 9, runs=counts(success=7))})
    assert (row.success, row.total, row.backfill_id, row.phase, row.note) == (7, 7, 9, "Queued", "queued behind a")
    (bare,) = status_rows(Plan((pending,)), {})
    assert (bare.success, bare.failed, bare.running, bare.queued, bare.total, bare.backfill_id) == (0, 0, 0, 0, 0, None)


def test_stored_rows_for_offline_status() -> None:
    recorded = {
        "a": stored(
            "a",
            Phase.SUCCEEDED,
            3,
            runs=counts(success=6, failed=1),
            reason="7 run(s) succeeded",
            updated_at="2026-11-01T10:00:00Z",
        )
    }
    rows = stored_rows([spec("a"), spec("b")], recorded)
    assert rows == [
        StatusRow(
            "a",
            "d",
            "Succeeded",
            3,
            6,
            1,
            0,
            0,
            7,
            None,
            "(stored 2026-11-01T10:00:00Z) 7 run(s) succeeded",
            stale=True,
            observed_at="2026-11-01T10:00:00Z",
        ),
        StatusRow("b", "d", "Pending", None, 0, 0, 0, 0, 0, None, "(stored -) not reconciled yet", stale=True),
    ]
    partial = stored_rows([spec("c")], {"c": stored("c", Phase.QUEUED, reason="queued behind a")})
    assert partial == [
        StatusRow("c", "d", "Queued", None, 0, 0, 0, 0, 0, None, "(stored None) queued behind a", stale=True)
    ]
    counted = stored_rows([spec("e")], {"e": stored("e", runs=counts(running=2, queued=1))})
    assert (counted[0].running, counted[0].queued, counted[0].total) == (2, 1, 3)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(None, "-"), (0.0, "0s"), (59.4, "59s"), (59.6, "1m00s"), (60.0, "1m00s"), (61.0, "1m01s"), (3725.0, "62m05s")],
)
def test_eta_text(seconds: float | None, text: str) -> None:
    assert eta_text(seconds) == text


def test_status_text_columns() -> None:
    """Columns are as wide as their content (a pipe gets one line a row, the note last)."""
    rows = [
        StatusRow("orders-fix", "orders_daily", "Running", 12, 3, 1, 1, 3, 8, 240.0, "in sync"),
        StatusRow("queued-one", "orders_daily", "Queued", None, 0, 0, 0, 0, 0, None, "queued behind orders-fix"),
    ]
    assert status_text(rows).splitlines() == [
        "SPEC        DAG           PHASE    BACKFILL  OK  FAIL  RUN  QUE  TOTAL  DONE    ETA  NOTE",
        "orders-fix  orders_daily  Running        12   3     1    1    3      8   50%  4m00s  in sync",
        "queued-one  orders_daily  Queued          -   0     0    0    0      0    0%      -  queued behind orders-fix",
    ]
    assert status_text([]) == status_text([]).splitlines()[0] + "\n"


LONG = "orders-2025q1-rounding-fix-for-the-finance-warehouse-reload"  # 59 characters: no table column cuts it


def test_status_fits_80_columns_without_cutting_a_name() -> None:
    rows = [
        StatusRow(LONG, "orders_daily", "Running", 12, 3, 1, 1, 3, 8, 240.0, "in sync; chunk 2 of 4 with a note"),
        StatusRow("queued-one", "orders_daily", "Queued", None, 0, 0, 0, 0, 0, None, f"queued behind {LONG}"),
    ]
    assert status_text(rows, 80).splitlines() == [
        "SPEC                                                         PHASE    DONE",
        f"{LONG}  Running   50%",
        "    in sync; chunk 2 of 4 with a note",
        "queued-one                                                   Queued     0%",
        f"    queued behind {LONG}",
        "(DAG, BACKFILL, OK, FAIL, RUN, QUE, TOTAL, ETA left out to fit 80 columns;",
        "--format json has every field)",
    ]
    wide = status_text(rows, 200).splitlines()
    assert wide[1] == (
        f"{LONG}  orders_daily  Running        12   3     1    1    3      8   50%  4m00s  "
        "in sync; chunk 2 of 4 with a note"
    )
    assert max(len(line) for line in wide) <= 200


def events() -> list[Any]:
    entries = [
        AuditEntry("observe", "observation", "ci", "0.1", outcome="Queued", spec_name="r"),
        AuditEntry("create", "intent", "ci", "0.1", spec_name="r"),
        AuditEntry("create", "outcome", "ci", "0.1", outcome="created", spec_name="r", backfill_id=None),
        AuditEntry("create", "outcome", "ci", "0.1", outcome="created", spec_name="r", backfill_id=5),
        AuditEntry("observe", "observation", "ci", "0.1", outcome="Running", spec_name="r", backfill_id=5),
        AuditEntry("observe", "observation", "ci", "0.1", outcome="CompletedWithFailures", spec_name="r"),
        AuditEntry("observe", "observation", "ci", "0.1", outcome="Succeeded", spec_name="r"),
        AuditEntry("note", "observation", "ci", "0.1", outcome="Running", spec_name="r"),
    ]
    out, prev = [], "0" * 64
    for seq, entry in enumerate(entries, start=1):
        record = seal(seq, f"2026-11-01T10:0{seq}:00Z", entry, prev)
        out.append(record)
        prev = record.hash
    return out


def test_report_json() -> None:
    s = spec("r", run_backwards=True, state=DesiredState.PAUSED, approvers=("b", "c"))
    recorded = stored(
        "r",
        Phase.COMPLETED_WITH_FAILURES,
        5,
        git_commit="abc123",
        runs={
            "counts": {"success": 5, "failed": 2},
            "failed_dates": ["2025-01-02T00:00:00+00:00"],
            "never_started": 1,
            "reruns": [{"date": "2025-01-05T00:00:00+00:00", "by": "spec x (#9)", "state": "success", "own": None}],
        },
        created=CreateFacts(runs_to_create=6, runs_in_range=7, dates=compact([JAN1, JAN1 + timedelta(days=4)])),
    )
    trail = events()
    report = change_record(s, recorded, trail).as_json()
    assert {k: v for k, v in report.items() if k != "audit"} == {
        "format_version": 1,
        "spec": "r",
        "path": "specs/r.yaml",
        "digest": "sha256:r",
        "git_commit": "abc123",
        "ticket": "CHG-1",
        "reason": "unit test",
        "requested_by": "a",
        "approvers": ["b", "c"],
        "approval": None,  # reconcile ran without the merged pull request's reviews
        "approved_by": "approval not recorded (the spec lists b, c)",
        "dag_id": "d",
        "from_date": "2025-01-01T00:00:00Z",
        "to_date": "2025-01-07T00:00:00Z",
        "reprocess_behavior": "none",
        "max_active_runs": 2,
        "direction": "backwards",
        "desired_state": "paused",
        "backfill_id": 5,
        "outcome": "CompletedWithFailures",
        "created_at": "2026-11-01T10:04:00Z",
        "completed_at": "2026-11-01T10:07:00Z",
        "intervals": {
            "complete": 5,
            "failed": 2,
            "failed_dates": ["2025-01-02T00:00:00+00:00"],
            "failed_partitions": [],
            "never_started": 1,
            "skipped": 1,
            "in_range": 7,
            "reruns": [{"date": "2025-01-05T00:00:00+00:00", "by": "spec x (#9)", "state": "success", "own": None}],
        },
        "own_dates": [["2025-01-01T00:00:00+00:00", "2025-01-05T00:00:00+00:00", 2]],
        "partitions": None,
        "chunks": None,
        "retry_of": None,
        "retried_by": [],
    }
    assert report["audit"] == [e.as_json() for e in trail]
    lines = report_markdown(change_record(s, recorded, trail)).splitlines()
    assert (
        "- **Re-run before its outcome was read**: 2025-01-05 re-run by spec x \\(\\#9\\), now success "
        "\\(what its own run did is not known\\)"
    ) in lines
    known = {"date": "2025-01-05T00:00:00+00:00", "by": "hand", "state": "failed", "own": "success"}
    assert rerun_text(Rerun.from_json(known)) == "2025-01-05 re-run by hand, now failed (its own run: success)"


def test_report_json_before_anything_happened() -> None:
    report = change_record(spec("r"), None, []).as_json()
    assert (report["outcome"], report["backfill_id"], report["git_commit"], report["direction"]) == (
        "Pending",
        None,
        None,
        "forward",
    )
    assert (report["created_at"], report["completed_at"], report["audit"]) == (None, None, [])
    assert report["intervals"] == {
        "complete": 0,
        "failed": 0,
        "failed_dates": [],
        "failed_partitions": [],
        "never_started": 0,
        "skipped": None,
        "in_range": None,
        "reruns": [],
    }
    assert report["own_dates"] is None
    only_range = change_record(spec("r"), stored("r", created=CreateFacts(runs_in_range=7)), []).as_json()
    assert only_range["intervals"]["skipped"] is None
    only_create = change_record(spec("r"), stored("r", created=CreateFacts(runs_to_create=7)), []).as_json()
    assert only_create["intervals"]["skipped"] is None


def test_report_markdown() -> None:
    s = spec("r", approvers=("b", "c"))
    recorded = stored(
        "r",
        Phase.CANCELLED,
        5,
        git_commit="abc123",
        runs={
            "counts": {"success": 1, "failed": 4},
            "failed_dates": ["2025-01-02T00:00:00+00:00", "2025-01-04T00:00:00+00:00"],
            "never_started": 3,
        },
        created=CreateFacts(runs_to_create=7, runs_in_range=7),
    )
    trail = events()[:2]
    text = report_markdown(change_record(s, recorded, trail))
    lines = text.splitlines()
    assert lines[:10] == [
        "# Change record: r",
        "",
        "- **Outcome**: Cancelled (backfill #5)",
        "- **Ticket**: CHG-1",
        "- **Reason**: unit test",
        r"- **Requested by**: a; **approved by**: approval not recorded \(the spec lists b, c\)",
        "- **Spec**: `specs/r.yaml` digest `sha256:r` at commit `abc123`",
        "- **DAG**: `d`, 2025-01-01T00:00:00Z → 2025-01-07T00:00:00Z, reprocess `none`, max_active_runs 2, forward",
        "- **Created**: -; **completed**: -",
        "- **Intervals**: 1 complete, 4 failed (2025-01-02, 2025-01-04), 0 skipped of 7 in range, "
        "3 never started (cancelled)",
    ]
    assert lines[10:14] == ["", "## Audit trail", "", "```"]
    assert len(lines) == 17
    assert lines[-1] == "```"
    assert text.endswith("```\n")
    empty = report_markdown(change_record(spec("r"), None, []))
    assert "- **Outcome**: Pending\n" in empty
    assert "at commit `unknown`" in empty
    assert "- **Intervals**: 0 complete, 0 failed (none), ? skipped of ? in range\n" in empty


@pytest.mark.parametrize("outcome", ["Succeeded", "CompletedWithFailures", "Cancelled"])
def test_report_completed_at_is_the_last_terminal_outcome(outcome: str) -> None:
    entries = [
        AuditEntry("observe", "observation", "ci", "0.1", outcome="Running", spec_name="r"),
        AuditEntry("observe", "observation", "ci", "0.1", outcome=outcome, spec_name="r"),
        AuditEntry("observe", "observation", "ci", "0.1", outcome="Blocked", spec_name="r"),
    ]
    trail, prev = [], "0" * 64
    for seq, entry in enumerate(entries, start=1):
        trail.append(seal(seq, f"2026-11-01T10:0{seq}:00Z", entry, prev))
        prev = trail[-1].hash
    assert change_record(spec("r"), None, trail).as_json()["completed_at"] == "2026-11-01T10:02:00Z"


def test_status_without_dry_runs_shows_what_reconcile_last_refused_or_blocked() -> None:
    s = spec("big", expected_runs=2)
    waiting = Plan((Item("big", "d", Kind.WAIT, Phase.PENDING, "awaiting dry run", source=s, awaiting_dry_run=True),))
    why = "the dry run counts 25 runs; expected_runs is 2"
    refused = Binding(
        "big", "d", None, Phase.BLOCKED, spec_digest=s.digest, reason=why, updated_at="2026-12-01T22:39:26.9Z"
    )
    (row,) = status_rows(waiting, {"big": replace(refused, refused=True)})
    assert (row.phase, row.note) == ("Blocked", f"refused by reconcile at 2026-12-01T22:39:26Z: {why}")
    (row,) = status_rows(waiting, {"big": refused})  # a dry run's error, or a block before the flag was kept
    assert (row.phase, row.note) == ("Blocked", f"blocked by reconcile at 2026-12-01T22:39:26Z: {why}")
    (row,) = status_rows(waiting, {"big": replace(refused, refused=True, spec_digest="sha256:edited")})
    assert (row.phase, row.note) == ("Pending", "awaiting dry run")  # edited since: the next pass decides again


def test_a_last_decision_without_a_time_and_the_rows_that_keep_their_own() -> None:
    s = spec("big", expected_runs=2)
    waiting = Item("big", "d", Kind.WAIT, Phase.PENDING, "awaiting dry run", source=s, awaiting_dry_run=True)
    blocked = Binding("big", "d", None, Phase.BLOCKED, spec_digest=s.digest, reason="DAG d is paused", refused=True)
    (row,) = status_rows(Plan((waiting,)), {"big": blocked})
    assert (row.phase, row.note, row.refused) == ("Blocked", "refused by reconcile: DAG d is paused", True)
    (row,) = status_rows(Plan((waiting,)), {"big": replace(blocked, refused=False)})
    assert (row.phase, row.refused) == ("Blocked", False)
    kept = [
        (waiting, replace(blocked, phase=Phase.RUNNING)),  # reconcile last saw it running
        (replace(waiting, awaiting_dry_run=False), blocked),  # decided this pass
        (replace(waiting, source=None), blocked),  # an orphan
    ]
    for it, binding in kept:
        (row,) = status_rows(Plan((it,)), {"big": binding})
        assert (row.phase, row.note, row.refused) == ("Pending", "awaiting dry run", False)


def test_a_refused_item_and_a_finished_items_total() -> None:
    refused = Item("s", "d", Kind.REFUSE, Phase.BLOCKED, "expected_runs is 2")
    (row,) = status_rows(Plan((refused,)), {})
    assert row.refused is True
    done = Item(
        "s", "d", Kind.NOOP, Phase.SUCCEEDED, "7 run(s) succeeded", 4, runs=summary_from_json(counts(success=7))
    )
    (row,) = status_rows(Plan((done,)), {})
    assert (row.total, row.progress, row.refused) == (7, 100.0, False)
    first = Chunk(1, JAN1, JAN1 + timedelta(days=3), 4, 2)
    cancelled = replace(done, phase=Phase.CANCELLED, progress=Progress(10, (first,)))  # 6 runs never created
    (row,) = status_rows(Plan((cancelled,)), {})
    assert (row.total, row.backfills) == (7, (1,))
    (row,) = status_rows(Plan((replace(cancelled, phase=Phase.RUNNING),)), {})
    assert row.total == 13  # while it runs, the later chunks' runs count


def test_stored_rows_are_refused_only_while_blocked() -> None:
    refused = stored("a", Phase.BLOCKED, refused=True, reason="over expected_runs")
    rows = stored_rows([spec("a"), spec("b")], {"a": refused, "b": stored("b", Phase.RUNNING, 3, refused=True)})
    assert [(r.spec, r.phase, r.refused) for r in rows] == [("a", "Blocked", True), ("b", "Running", False)]


def test_a_lift_recorded_and_not_acted_on_yet_shows_the_backfill_paused_until_the_next_pass() -> None:
    """After `stop lift` and before the next pass, Airflow's backfill is still paused: status says so."""
    from controller.core.plan.values import LIFTED, Item, Kind, Plan  # noqa: PLC0415

    unpause = Item("s", "d", Kind.UNPAUSE, Phase.RUNNING, LIFTED, 4)
    (row,) = status_rows(Plan((unpause,)), {})
    assert (row.phase, row.note) == ("Paused", "lift recorded; unpause at the next pass")
    resume = replace(unpause, reason="resumed: stop #2: fixed (lifts stop #2)")  # a reviewed resume: its own words
    (row,) = status_rows(Plan((resume,)), {})
    assert (row.phase, row.note) == ("Paused", "unpause at the next pass: resumed: stop #2: fixed (lifts stop #2)")
