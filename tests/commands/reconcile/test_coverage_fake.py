"""Version coverage through reconcile, status, the notification and `report NAME --check` (fake Airflow whose DAG
names its latest version and the version each run ran on, as 3.3.2 does)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from controller.adapters.webhook import WebhookClient
from controller.cli import main
from controller.commands.loop.notify import deliver
from controller.commands.verbs import report as report_cmd
from controller.commands.verbs.status import status_view
from controller.core.model.airflow import DagVersion
from controller.core.model.coverage import Coverage, TargetSource
from tests.commands.loop.test_notify_fake import POLICY  # one receiver, `ops`, JSON, every event
from tests.commands.reconcile.harness import Bench, in_process
from tests.fakes.airflow import DEMO_DAGS, FakeAirflow

V4 = DagVersion(4)
LATER = "2099-01-01T00:00:00Z"  # a queue time after the spec ended
DISCLAIMER = (
    "Version coverage is evidence from Airflow's metadata about which code ran, not proof that the outputs are correct."
)


@pytest.fixture
def bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Bench]:
    # copies of the demo DAGs: the fake's defaults are shared by every test
    fake = FakeAirflow(dags=[replace(d, version=4 if d.dag_id == "demo_daily" else None) for d in DEMO_DAGS])
    b = Bench(tmp_path, fake=fake)
    b.policy(POLICY)
    in_process(b, monkeypatch)
    monkeypatch.setattr(report_cmd, "make_client", lambda settings: b.client())
    yield b
    b.close()


def _ended(bench: Bench) -> None:
    bench.spec("s1", end="2025-01-03")
    bench.until_terminal()


def _run(bench: Bench, day: str) -> dict[str, object]:
    assert bench.fake is not None
    return bench.fake.runs[("demo_daily", datetime.fromisoformat(day).replace(tzinfo=UTC))]


def test_a_spec_that_ends_keeps_its_coverage_and_status_and_the_notification_say_it(bench: Bench) -> None:
    _ended(bench)
    binding = bench.store.binding("s1")
    assert binding is not None
    assert binding.phase.value == "Succeeded"
    assert binding.coverage == Coverage(V4, TargetSource.AT_END, intervals=3, covered=3, missed=())
    (row,) = status_view(bench.settings(), datetime.now(UTC), "s1").rows
    assert row.note.endswith(" · version coverage: 3 of 3 intervals on DAG version 4")
    assert row.as_json()["coverage"]["holds"] is True

    seen: list[httpx.Request] = []
    client = WebhookClient(transport=httpx.MockTransport(lambda r: seen.append(r) or httpx.Response(200)))
    policy = bench.reconciler().load().policy
    deliver(bench.store, policy, {"HOOK_OPS": "http://receiver.invalid/h"}, bench.settings(), client=client)
    bodies = [json.loads(r.content) for r in seen]
    (succeeded,) = [b for b in bodies if b["event"] == "succeeded"]
    assert succeeded["coverage"] == "version coverage: 3 of 3 intervals on DAG version 4"
    assert (
        "- **Version coverage**: version coverage: 3 of 3 intervals on DAG version 4; target: the DAG's"
        in (succeeded["report"])
    )


def test_check_exits_0_while_coverage_holds(bench: Bench, capsys: pytest.CaptureFixture[str]) -> None:
    _ended(bench)
    capsys.readouterr()
    assert main(["report", "s1", "--check"]) == 0
    assert capsys.readouterr().out == (
        "s1: coverage holds: version coverage: 3 of 3 intervals on DAG version 4; target: the DAG's latest version "
        f"when the spec ended\n{DISCLAIMER}\n"
    )


def test_check_exits_1_and_names_each_interval_that_changed(bench: Bench, capsys: pytest.CaptureFixture[str]) -> None:
    _ended(bench)
    rerun = _run(bench, "2025-01-02")
    rerun.update(queued_at=LATER, dag_versions=[{"version_number": 5, "bundle_version": None}])
    _run(bench, "2025-01-03").update(state="failed")
    capsys.readouterr()
    assert main(["report", "s1", "--check"]) == 1
    assert capsys.readouterr().out == (
        "s1: coverage does not hold: version coverage: 1 of 3 intervals on DAG version 4 (1 failed, 1 re-run since "
        "on other code); target: the DAG's latest version when the spec ended\n"
        "not covered since it ended: 2 intervals\n"
        "  2025-01-02T00:00:00+00:00 (re-run since on other code: DAG version 5)\n"
        "  2025-01-03T00:00:00+00:00 (failed: DAG version 4)\n"
        "not covered now: 2 intervals\n"
        "  2025-01-02T00:00:00+00:00 (re-run since on other code: DAG version 5)\n"
        "  2025-01-03T00:00:00+00:00 (failed: DAG version 4)\n"
        f"{DISCLAIMER}\n"
    )
    assert main(["report", "s1", "--check", "--format", "json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert (document["format_version"], document["holds"], document["coverage"]["covered"]) == (1, False, 1)
    assert [m["interval"] for m in document["changed_since_end"]] == [
        "2025-01-02T00:00:00+00:00",
        "2025-01-03T00:00:00+00:00",
    ]
    # the change record says it too, with the disclaimer
    assert main(["report", "s1", "--format", "json"]) == 0
    record = json.loads(capsys.readouterr().out)["coverage"]
    assert (record["covered"], record["intervals"], record["note"]) == (1, 3, DISCLAIMER)
    assert main(["report", "s1", "--format", "markdown"]) == 0
    markdown = capsys.readouterr().out
    shown = [line for line in markdown.splitlines() if line.startswith(("- **Version", "- **Not", "- **What"))]
    assert shown == [
        "- **Version coverage**: version coverage: 1 of 3 intervals on DAG version 4 \\(1 failed, 1 re-run since on "
        "other code\\); target: the DAG's latest version when the spec ended; information only \\(the spec has no "
        "\\`select\\`\\): its outcome comes from its own runs, as always",
        "- **Not covered**: 2025-01-02T00:00:00+00:00 \\(re-run since on other code: DAG version 5\\); "
        "2025-01-03T00:00:00+00:00 \\(failed: DAG version 4\\)",
        "- **Not covered since it ended**: 2025-01-02T00:00:00+00:00 \\(re-run since on other code: DAG version 5\\); "
        "2025-01-03T00:00:00+00:00 \\(failed: DAG version 4\\)",
        f"- **What coverage is**: {DISCLAIMER}",
    ]
    html = report_cmd.html_report(bench.settings(), "s1", datetime.now(UTC))
    assert "<dt>Not covered since it ended</dt><dd>2025-01-02T00:00:00+00:00 (re-run since on other code" in html


def test_a_later_dag_version_does_not_move_the_target_recorded_at_the_end(
    bench: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    _ended(bench)
    assert bench.fake is not None
    bench.fake.dags["demo_daily"].version = 5  # deployed after the spec ended: its history is still version 4's
    capsys.readouterr()
    assert main(["report", "s1", "--check"]) == 0


def test_check_is_refused_before_a_spec_ends_and_without_airflow(
    bench: Bench, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bench.spec("s1", end="2025-01-03")
    bench.run()
    capsys.readouterr()
    assert main(["report", "s1", "--check"]) == 1
    assert "error: s1 is Running: version coverage is measured when a spec ends" in capsys.readouterr().err
    bench.until_terminal()
    monkeypatch.delenv("BACKFILLCTL_AIRFLOW_URL")
    assert main(["report", "s1", "--check"]) == 1
    assert "report --check re-reads Airflow, and BACKFILLCTL_AIRFLOW_URL is not set" in capsys.readouterr().err
    assert main(["report", "s1", "--check", "--format", "html"]) == 2
