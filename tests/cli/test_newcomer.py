"""What a newcomer meets at the command line, in process (no Airflow, or the fake one): output that fits the
terminal, blocked specs that do not look healthy, log lines with a time."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import typer

from controller import cli
from controller.adapters.files import display
from controller.adapters.logsetup import TextFormatter
from controller.adapters.store import Store
from controller.cli import main
from controller.commands.reconcile.reconciler import PassResult
from controller.core.model.airflow import RunSummary
from controller.core.model.binding import Binding, Phase
from controller.core.plan.values import Plan
from controller.core.render.change_record import ChunkRow
from controller.core.render.report_html import chunks_html
from controller.core.render.status import status_rows
from controller.core.render.status_page import status_page
from controller.core.rules.follow_up import retry_of
from tests.commands.reconcile.harness import SPEC, Bench, in_process
from tests.core.plan.test_plan import JAN1, spec
from tests.fakes.airflow import FakeAirflow

LONG = "orders-2025q1-rounding-fix-for-the-finance-warehouse-reload"


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    specs = tmp_path / "specs"
    specs.mkdir()
    text = SPEC.format(
        name=LONG, dag="demo_hourly", start="2025-02-01", end="2025-02-01T23:00:00Z", reprocess="none", mar=1
    )
    (specs / f"{LONG}.yaml").write_text(text)
    store = f"sqlite:///{tmp_path}/state.db"
    Store(store).close()
    monkeypatch.delenv("BACKFILLCTL_AIRFLOW_URL", raising=False)
    monkeypatch.setenv("BACKFILLCTL_STORE_URL", store)
    monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", str(specs))
    return specs


def test_status_fits_columns_80_and_keeps_the_name_whole(
    tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["status"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert max(map(len, out)) <= 80
    assert out[:4] == [
        "1 spec: 1 Pending",
        "SPEC                                                         PHASE    DONE",
        f"{LONG}  Pending    0%",
        "    (stored -) not reconciled yet",
    ]


MISSING = "DAG demo_dayly does not exist in Airflow; did you mean demo_daily?"
MANUAL = (
    "DAG demo_manual has no schedule (schedule=None): it runs only when triggered, so there are no dates to "
    "backfill; Airflow cannot backfill it"
)


@pytest.fixture
def blocked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Bench]:
    """Two Blocked specs (a DAG id typo, a schedule=None DAG) and a healthy one, on the fake Airflow."""
    bench = Bench(tmp_path, fake=FakeAirflow())
    assert bench.fake is not None
    bench.fake.scheduler_running = False  # `fine` stays Running
    bench.spec("typo", dag="demo_dayly")
    bench.spec("manual", dag="demo_manual")
    bench.spec("fine", dag="demo_daily")
    in_process(bench, monkeypatch)
    yield bench
    bench.close()


def test_an_unknown_dag_suggests_the_closest_ids_from_the_listing_already_read(blocked: Bench) -> None:
    result = blocked.run()
    assert [(i.spec, i.phase.value, i.reason) for i in result.plan.items if i.spec != "fine"] == [
        ("typo", "Blocked", MISSING),
        ("manual", "Blocked", MANUAL),
    ]
    assert blocked.fake is not None
    assert blocked.fake.requests.count(("GET", "/api/v2/dags")) == 1  # the pass's own listing: no extra call


def test_one_missing_dag_costs_one_listing_for_its_suggestion(tmp_path: Path) -> None:
    bench = Bench(tmp_path, fake=FakeAirflow())
    bench.spec("typo", dag="demo_dayly")
    try:
        (item,) = bench.run().plan.items
        assert item.reason == MISSING
        assert bench.fake is not None
        assert bench.fake.requests.count(("GET", "/api/v2/dags")) == 1
    finally:
        bench.close()


def test_status_leads_with_counts_per_phase_and_lists_every_blocked_spec(
    blocked: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    blocked.run()
    capsys.readouterr()
    assert main(["status"]) == 1  # a spec's DAG cannot be used: not a clean bill of health
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "3 specs: 1 Running, 2 Blocked (degraded: 2 blocked or refused)"
    assert out[-2:] == [f"! blocked: typo: {MISSING}", f"! blocked: manual: {MANUAL}"]
    assert main(["status", "--format", "json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["phases"] == {"Running": 1, "Blocked": 2}
    assert document["findings"] == [
        {"kind": "blocked", "message": f"typo: {MISSING}"},
        {"kind": "blocked", "message": f"manual: {MANUAL}"},
    ]


def test_the_status_page_leads_with_the_specs_health_and_keeps_healthz_about_the_process(blocked: Bench) -> None:
    plan = blocked.run().current
    page = status_page(status_rows(plan, {}), [], datetime(2026, 12, 1, tzinfo=UTC), health="ok")
    assert 'reconciler: <span id="health">ok</span>' in page
    assert '<p class="summary" id="summary">3 specs: 1 Running, 2 Blocked (degraded: 2 blocked or refused)</p>' in page
    assert (
        f'<ul class="findings" id="findings"><li><span class="kind">blocked</span> typo: {MISSING}</li>\n'
        f'<li><span class="kind">blocked</span> manual: {MANUAL}</li></ul>'
    ) in page


def test_text_log_lines_carry_their_time_in_utc() -> None:
    record = logging.LogRecord("controller.x", logging.WARNING, __file__, 1, "pass error: %s", ("boom",), None)
    record.created = datetime(2026, 12, 1, 23, 40, 5, tzinfo=UTC).timestamp()
    assert TextFormatter().format(record) == "2026-12-01T23:40:05Z warning: pass error: boom"


def test_the_watch_log_stamps_each_line_and_says_an_error_again_only_when_it_changed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    moments = iter(datetime(2026, 12, 1, 23, 40, n, tzinfo=UTC) for n in range(10))
    monkeypatch.setattr(cli.output, "utc_now", lambda: next(moments))
    view = cli.PassView(dry_run=False, mode="text", watch=True)
    same = PassResult(Plan((), ()), errors=["typo: DAG demo_dayly does not exist in Airflow"])
    for result in (same, same, PassResult(Plan((), ()))):
        view.show(result)
    assert capsys.readouterr().err == "2026-12-01T23:40:01Z error: typo: DAG demo_dayly does not exist in Airflow\n"


REPO = Path(__file__).resolve().parents[2]


def test_airflow_local_down_says_nothing_runs_in_a_folder_without_an_airflow(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "airflow-local"), "down", "--dir", str(tmp_path)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "BACKFILLCTL_AIRFLOW_VENV": str(tmp_path / "no-venv")},
    )
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"airflow-local: nothing is running in {tmp_path} "
        "(another Airflow? pass its --dir or BACKFILLCTL_AIRFLOW_DIR)\n"
    )


def test_the_demos_keep_hint_names_the_demos_airflow_folder() -> None:
    demo = (REPO / "scripts" / "demo").read_text()
    assert 'export BACKFILLCTL_AIRFLOW_DIR="$PWD/.airflow-local/demo"' in demo
    (hint,) = [line for line in demo.splitlines() if "Airflow keeps running" in line]
    assert "airflow-local env --dir $BACKFILLCTL_AIRFLOW_DIR" in hint
    assert "airflow-local down --dir $BACKFILLCTL_AIRFLOW_DIR" in hint


def test_a_create_names_its_backfill_and_chunk(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = Bench(tmp_path, fake=FakeAirflow())
    try:
        assert bench.fake is not None
        bench.fake.scheduler_running = False
        bench.spec("big", start="2025-01-01", end="2025-01-10", execution="{chunk_runs: 3}")
        cli.PassView(dry_run=False, mode="text").show(bench.run())
    finally:
        bench.close()
    assert capsys.readouterr().out.splitlines()[0] == "+ create big: created backfill #1 (chunk 1 of 4)"


def every_command(command: Any = None, path: tuple[str, ...] = ()) -> Iterator[list[str]]:
    """The path of the application, each group and each command under it (hidden ones too: their --help works)."""
    command = command or typer.main.get_command(cli.app)  # typer's own (vendored) click command
    yield list(path)
    for name, sub in sorted(getattr(command, "commands", {}).items()):
        yield from every_command(sub, (*path, name))


# what typer writes where a metavar is missing: the Python type (`<str>`, `<list[Path]>`, `<int range>`) or, on
# the usage line, a required argument in braces (`{directory}`)
PYTHON_TYPES = re.compile(r"<(str|int|float|bool|path|uuid|datetime)>|<list\[|range>|\{[\w|.-]+\}")


@pytest.mark.parametrize("command", list(every_command()), ids=lambda c: " ".join(c) or "backfillctl")
def test_help_shows_no_python_types_and_every_option_has_help(
    command: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main([*command, "--help"]) == 0
    text = capsys.readouterr().out
    assert [line for line in text.splitlines() if PYTHON_TYPES.search(line)] == []
    found: Any = typer.main.get_command(cli.app)
    for name in command:
        found = found.commands[name]
    assert [p.name for p in found.params if not getattr(p, "help", None)] == []


def test_every_command_is_walked_and_the_placeholders_are_caught() -> None:
    walked = list(every_command())
    names = {" ".join(c) for c in walked}
    assert {"", "init", "new", "validate", "plan", "reconcile", "stop", "audit show", "store unlock"} <= names
    shown = [
        "  --base <str>  Compare with this git ref.",
        "Usage: backfillctl init [OPTIONS] {directory}",
        "  PATH <list[Path]>",
        "  --interval <float range>",
        "  --limit <int>",
        "  --output <path>",
    ]
    assert [line for line in shown if PYTHON_TYPES.search(line)] == shown
    assert not PYTHON_TYPES.search("  --reprocess <none|failed|completed>  --ref REF  [PATH]...  (default {})")


def test_init_and_new_name_what_they_take(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["init", "--help"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("Usage: backfillctl init [OPTIONS] DIR\n")
    assert [line.split()[:2] for line in text.splitlines() if line.startswith("  --") and "--help" not in line] == [
        ["--workflows-repo", "OWNER/REPO"],
        ["--ref", "SHA"],
        ["--environment", "NAME"],
        ["--runner", "LABEL"],
        ["--force", "Overwrite"],
    ]
    assert main(["new", "--help"]) == 0
    text = capsys.readouterr().out
    assert text.startswith("Usage: backfillctl new [OPTIONS] NAME\n")
    assert [line.split()[:2] for line in text.splitlines() if line.startswith("  --") and "--help" not in line] == [
        ["--dag-id", "DAG_ID"],
        ["--from", "DATE"],
        ["--to", "DATE"],
        ["--reprocess", "<none|failed|completed>"],
        ["--ticket", "TICKET"],
        ["--reason", "TEXT"],
        ["--approver", "LOGIN"],
        ["--requested-by", "LOGIN"],
        ["--downstream", "SYSTEM"],
        ["--max-active-runs", "N"],
        ["--expected-runs", "N"],
        ["--select-latest", "Re-run"],
        ["--retry-failed-of", "SPEC"],
    ]


def test_store_migrate_help_says_which_commands_migrate(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["store", "migrate", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "automatically on every open" not in text
    assert (
        "reconcile and store unlock create or upgrade the store when they open it; the read-only commands (plan, "
        "status, report, audit, notify status) never do: they refuse a missing or older store and name this command."
    ) in text


def test_the_html_report_has_a_chunks_section() -> None:
    first, last = datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 1, 3, tzinfo=UTC)
    chunk = ChunkRow(7, first, last, 3, 2, finished=True, succeeded=2, failed=1)
    assert chunks_html([chunk, replace(chunk, backfill_id=8, finished=False, succeeded=None)]) == (
        "<h2>Chunks (2 Airflow backfills, one after another)</h2>\n"
        '<table class="audit" id="chunks"><tr><th>backfill</th><th>from</th><th>to</th><th>runs</th>'
        "<th>max_active_runs</th><th>succeeded</th><th>failed</th><th>state</th></tr>"
        "<tr><td>#7</td><td>2025-01-01T00:00:00Z</td><td>2025-01-03T00:00:00Z</td><td>3</td><td>2</td><td>2</td>"
        "<td>1</td><td>finished</td></tr>"
        "<tr><td>#8</td><td>2025-01-01T00:00:00Z</td><td>2025-01-03T00:00:00Z</td><td>3</td><td>2</td><td>?</td>"
        "<td>1</td><td>active</td></tr></table>\n"
    )
    assert chunks_html(None) == ""


def test_retry_failed_of_writes_a_follow_up_over_exactly_the_failed_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = Bench(tmp_path, fake=FakeAirflow())
    try:
        bench.spec("flaky", dag="demo_flaky", reprocess="none")  # the odd days of 2025-01-01..07 fail
        assert bench.phases(bench.until_terminal()) == {"flaky": "CompletedWithFailures"}
        in_process(bench, monkeypatch)
        assert main(["new", "flaky-retry", "--retry-failed-of", "flaky"]) == 0
        assert capsys.readouterr().out.splitlines()[:3] == [
            f"wrote {display(bench.specs / 'flaky-retry.yaml')}",
            "requested_by: ci-bot (from BACKFILLCTL_ACTOR; --requested-by says otherwise)",
            "retries the 4 failed run(s) of flaky",
        ]
        text = (bench.specs / "flaky-retry.yaml").read_text()
        assert text.splitlines()[1] == (
            "# Re-runs the failed runs of flaky, from the first to the last failed run; reprocess_behavior failed "
            "keeps the successful ones."
        )
        for line in (
            "retry_of: flaky             # its change record links to this spec",
            'dag_id: "demo_flaky"',
            'from_date: "2025-01-01"',
            'to_date: "2025-01-07"',
            "reprocess_behavior: failed ",
            "max_active_runs: 3 ",
            "expected_runs: 4             # the failed runs flaky ended with (the store's final counts): reconcile "
            "refuses more",
            'ticket: "CHG-1"',
            'reason: "Retry the 4 failed run(s) of flaky (CompletedWithFailures: 2025-01-01, 2025-01-03, 2025-01-05, '
            '2025-01-07)"',
            'approvers: ["bob"]',
        ):
            assert f"\n{line}" in text, line
        monkeypatch.delenv("BACKFILLCTL_AIRFLOW_URL")  # the change record from the store alone
        assert main(["report", "flaky"]) == 0
        assert (
            f"- **Failed runs retried by**: `flaky-retry` (`{display(bench.specs / 'flaky-retry.yaml')}`)\n"
            in capsys.readouterr().out
        )
        again = bench.run()  # the dry run counts exactly the failed runs: not refused
        assert [(i.spec, o) for i, o in again.applied] == [("flaky-retry", "created")]
    finally:
        bench.close()


def test_retry_failed_of_refuses_a_spec_that_has_not_finished(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = Bench(tmp_path, fake=FakeAirflow())
    try:
        assert bench.fake is not None
        bench.fake.scheduler_running = False
        bench.spec("slow", dag="demo_flaky")
        bench.run()
        in_process(bench, monkeypatch)
        assert main(["new", "slow-retry", "--retry-failed-of", "slow"]) == 2
        assert capsys.readouterr().err == (
            "error: slow is Running: only a finished spec's failed runs can be retried\n"
            "  hint: wait until `backfillctl status slow` shows CompletedWithFailures\n"
        )
        assert main(["new", "x", "--retry-failed-of", "slow", "--dag-id", "demo_daily"]) == 2
        assert capsys.readouterr().err.startswith(
            "error: --dag-id cannot be combined with --retry-failed-of: the follow-up takes them from slow\n"
        )
        assert not (bench.specs / "slow-retry.yaml").exists()
    finally:
        bench.close()


@pytest.mark.parametrize(
    ("runs", "span", "whole"),
    [
        (
            RunSummary({"failed": 2, "success": 5}, (JAN1 + timedelta(hours=29), JAN1 + timedelta(hours=5))),
            (
                "2025-01-01T05:00:00Z",
                "2025-01-02T05:00:00Z",
            ),
            False,
        ),
        (RunSummary({"failed": 3, "success": 4}, (JAN1,)), ("2025-01-01", "2025-01-07"), True),  # 2 not listed
        (RunSummary({"failed": 2}, (JAN1,), never_started=1), ("2025-01-01", "2025-01-07"), True),
        (RunSummary({"failed": 1}, (), failed_partitions=("p1",)), ("2025-01-01", "2025-01-07"), True),
    ],
)
def test_the_retry_range_is_the_failed_span_when_the_store_lists_every_failure(
    runs: RunSummary, span: tuple[str, str], whole: bool
) -> None:
    binding = Binding("s", "d", 3, Phase.COMPLETED_WITH_FAILURES, runs=runs)
    retry = retry_of(spec("s"), binding)
    assert ((retry.from_date, retry.to_date), retry.whole_range, retry.failed) == (span, whole, runs.count("failed"))


def test_new_takes_downstream_and_says_where_requested_by_came_from(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", "specs")
    monkeypatch.delenv("BACKFILLCTL_AIRFLOW_URL", raising=False)
    monkeypatch.delenv("BACKFILLCTL_ACTOR", raising=False)
    args = ["new", "x", "--dag-id", "d", "--from", "2025-01-01", "--to", "2025-01-02", "--reprocess", "none"]
    args += ["--ticket", "CHG-1", "--reason", "a reason for it", "--approver", "bob", "--downstream", "warehouse"]
    assert main(args) == 2  # outside git, no actor: who asks is never a silent guess
    assert capsys.readouterr().err.startswith(
        "error: new needs --requested-by: neither BACKFILLCTL_ACTOR nor git config github.user or user.name says who "
        "asks\n"
    )
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    subprocess.run(["git", "config", "user.name", "Carol Example"], cwd=tmp_path, check=True)
    subprocess.run(["git", "config", "github.user", "carol"], cwd=tmp_path, check=True)
    assert main(args) == 0
    assert capsys.readouterr().out.splitlines()[1] == (
        "requested_by: carol (from git config github.user; --requested-by says otherwise)"
    )
    text = (specs / "x.yaml").read_text()
    assert 'requested_by: "carol"' in text
    assert 'downstream: ["warehouse"]   # systems that will feel the load (owners approve)' in text


def test_new_select_latest_says_what_it_needs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "specs").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", "specs")
    monkeypatch.setenv("BACKFILLCTL_ACTOR", "carol")
    monkeypatch.delenv("BACKFILLCTL_AIRFLOW_URL", raising=False)
    args = ["new", "x", "--dag-id", "d", "--from", "2025-01-01", "--to", "2025-01-02", "--select-latest"]
    args += ["--ticket", "CHG-1", "--reason", "a reason for it", "--approver", "bob"]
    assert main([*args, "--reprocess", "failed"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "error: --select-latest needs --reprocess completed (not failed): a selection narrows a spec that re-runs "
        "every interval to those other code made",
        "  hint: pass --reprocess completed",
    ]
    assert main([*args, "--reprocess", "completed"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "error: --select-latest needs BACKFILLCTL_AIRFLOW_URL: the target is the DAG's latest version in Airflow",
        "  hint: set BACKFILLCTL_AIRFLOW_URL (and its credentials), or write `select: {code_version: N}` yourself",
    ]
    assert not (tmp_path / "specs" / "x.yaml").exists()
    bad = [a if a != "x" else "Bad Name" for a in args]  # said before Airflow is asked
    assert main([*bad, "--reprocess", "completed"]) == 2
    assert capsys.readouterr().err.startswith("error: invalid spec name 'Bad Name': ")
    assert main(["new", "y", "--retry-failed-of", "x", "--select-latest"]) == 2
    assert capsys.readouterr().err.startswith(
        "error: --select-latest cannot be combined with --retry-failed-of: the follow-up takes them from x\n"
    )
