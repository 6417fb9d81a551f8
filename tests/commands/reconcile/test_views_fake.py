"""Every view tells the same truth (fake Airflow, SQLite store): an Airflow outage looks like an outage — the last
known phase and counts kept and marked stale, never Blocked — in the pass's status rows and in `status`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from controller.cli import main
from controller.commands.verbs.status import status_view
from controller.core.render.status import status_rows
from controller.errors import UsageError
from tests.commands.reconcile.harness import Bench, fake
from tests.fakes.airflow import FakeAirflow

UNREACHABLE = "http://127.0.0.1:1"  # nothing listens: every call is refused at once


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[Bench]:
    b = Bench(tmp_path, fake=FakeAirflow())
    b.spec("a", dag="demo_daily", end="2025-03-31", mar=1)
    b.run()
    fake(b).tick()
    b.run()  # observed running, with one run done
    yield b
    b.close()


def test_a_dag_not_observed_keeps_its_last_phase_and_counts_marked_stale(bench: Bench) -> None:
    for _ in range(4):  # every attempt of the listing, retries included
        fake(bench).fault("GET", "/api/v2/backfills", lambda _r: httpx.Response(503, json={"detail": "maintenance"}))
    result = bench.run(dry_run=True)
    (item,) = result.plan.items
    assert (item.phase.value, item.unobserved) == ("Blocked", True)  # the plan: nothing decided for it
    (row,) = status_rows(result.plan, bench.store.bindings())
    binding = bench.store.binding("a")
    assert binding is not None
    assert binding.runs is not None
    stored = (binding.runs.count("success"), binding.runs.count("queued"))
    assert (row.phase, row.backfill_id, (row.success, row.queued), row.stale, row.observed_at) == (
        "Running",
        1,
        stored,  # the counts the store last recorded, not zeros
        True,
        binding.updated_at,
    )
    assert sum(stored) == 90
    assert row.note.startswith("stale: not observed now (")
    assert row.note.endswith(f"last observed {binding.updated_at[:19]}Z: {binding.reason}")


def test_status_falls_back_to_the_stored_view_when_airflow_is_unreachable(
    bench: Bench, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    view = status_view(replace(bench.settings(), airflow_url=UNREACHABLE), datetime.now(UTC))
    assert view.outage is not None
    assert view.outage.startswith("cannot reach Airflow at BACKFILLCTL_AIRFLOW_URL=http://127.0.0.1:1")
    assert [(r.spec, r.phase, r.backfill_id, r.total, r.stale) for r in view.rows] == [("a", "Running", 1, 90, True)]
    env = bench.cli_env(BACKFILLCTL_AIRFLOW_URL=UNREACHABLE, BACKFILLCTL_SPECS_DIR=str(bench.specs))
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert main(["status", "--format", "json"]) == 1  # a script must never take stale data for live data
    document = json.loads(capsys.readouterr().out)
    assert document["stale"] is True
    assert [(s["spec"], s["phase"], s["stale"], s["observed_at"] is not None) for s in document["specs"]] == [
        ("a", "Running", True, True)
    ]
    assert main(["status", "--format", "json", "--allow-stale"]) == 0
    captured = capsys.readouterr()
    assert "warning: Airflow is unreachable (cannot reach Airflow at BACKFILLCTL_AIRFLOW_URL=" in captured.err
    assert captured.err.count("warning: Airflow is unreachable") == 1
    assert main(["status"]) == 1
    assert main(["status", "--allow-stale"]) == 0


def test_the_change_record_of_a_spec_whose_file_is_gone(tmp_path: Path) -> None:
    """A finished spec tidied away keeps its change record: from the store, and the spec as git held it."""
    from controller.commands.verbs.status import report_document  # noqa: PLC0415
    from tests.commands.reconcile.test_spec_index_git import commit, git  # noqa: PLC0415

    b = Bench(tmp_path / "repo", fake=FakeAirflow())
    (b.root / ".gitignore").write_text("state.db*\n")
    git(b.root, "init", "-q", "-b", "main")
    try:
        b.spec("tidied", dag="demo_flaky", end="2025-01-04", mar=2)
        commit(b, "add tidied")
        sha = git(b.root, "rev-parse", "HEAD")[:12]
        b.until_terminal(wait=fake(b).tick)
        (b.specs / "tidied.yaml").unlink()
        commit(b, "tidy the folder")
        record = report_document(b.settings(), "tidied", datetime.now(UTC))
        assert (record.spec.name, record.outcome.value, record.intervals.failed) == (
            "tidied",
            "CompletedWithFailures",
            2,
        )
        assert record.file_gone == (
            f"{b.specs / 'tidied.yaml'} is no longer in the specs folder: this record is the store's, the spec as of "
            f"commit {sha}"
        )
        assert record.as_json()["file_gone"] == record.file_gone
        shown = b.cli("audit", "show", "--spec", "tidied")  # its audit trail too, saying the file is gone
        assert shown.returncode == 0, shown.stderr
        assert shown.stdout.count("\n") == sum(1 for _ in b.events("tidied")) > 0
        assert all(" spec=tidied " in line for line in shown.stdout.splitlines())
        assert shown.stderr == (
            "note: tidied's file is gone from specs: these are the store's records (`backfillctl report tidied` "
            "shows its change record)\n"
        )
        narrowed = b.cli("audit", "show", "--spec", "tidied", "--action", "cancel")  # none: no mistake either
        assert (narrowed.returncode, narrowed.stdout, narrowed.stderr) == (0, "", "")
        never = b.cli("audit", "show", "--spec", "never-was")
        assert (never.returncode, never.stdout, never.stderr) == (
            2,
            "",
            "error: audit show --spec never-was: no spec named 'never-was' under specs, and the store has no record "
            "of it\n  hint: `backfillctl status` lists the specs\n",
        )
        with pytest.raises(UsageError) as unknown:
            report_document(b.settings(), "never-was", datetime.now(UTC))
        assert unknown.value.message == f"no spec named 'never-was' under {b.specs}, and the store has no record of it"
    finally:
        b.close()


def test_stop_and_lift_records_name_their_specs_and_the_change_record_has_a_stops_section(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    from controller.commands.runtime import session  # noqa: PLC0415
    from controller.commands.verbs.status import report_document  # noqa: PLC0415
    from controller.commands.verbs.stop import lift_with_settings, stop_with_settings  # noqa: PLC0415
    from controller.core.plan.stops import EmergencyStopKind, StopSource  # noqa: PLC0415

    monkeypatch.setattr(session, "make_client", lambda _settings, **_kw: bench.client())
    bench.policy("version: 1\ndownstream:\n  lake: {max_active_runs: 4}\n")
    bench.spec("a", dag="demo_daily", end="2025-03-31", mar=1, downstream="[lake]")
    settings = replace(bench.settings(), actor="oncall-ann")
    stop_with_settings(settings, EmergencyStopKind.SPEC, "a", "bad rows", StopSource.CLI, None)
    stop_with_settings(settings, EmergencyStopKind.DOWNSTREAM, "lake", "lake at 95%", StopSource.CLI, None)
    lift_with_settings(settings, "#1", "rows fixed")
    trail = [(e.entry.outcome, e.entry.message) for e in bench.events("a") if e.entry.action == "stop"]
    assert trail == [
        ("stopped", "stop #1 of spec a by oncall-ann (cli): bad rows"),
        ("lifted", "stop #1 of spec a lifted by oncall-ann: rows fixed"),
    ]
    (system,) = [e for e in bench.events() if e.entry.action == "stop" and e.entry.spec_name is None]
    assert system.entry.message == "stop #2 of downstream lake by oncall-ann (cli): lake at 95%; holds a"
    record = report_document(bench.settings(), "a", datetime.now(UTC))
    assert [h.text().split(" at ")[0] for h in record.stops] == [
        "stop #1 of spec a by oncall-ann (cli)",
        "stop #2 of downstream lake by oncall-ann (cli)",
    ]
    assert record.stops[0].text().endswith(" by oncall-ann: rows fixed")
    assert (record.stops[0].lifted_by, record.stops[0].lift_reason) == ("oncall-ann", "rows fixed")
    assert record.stops[1].text().endswith(": lake at 95%; in force")
    assert [s["target"] for s in record.as_json()["stops"]] == ["a", "lake"]


def test_an_acknowledged_failure_passes_fail_on_failures_and_the_record_says_who_and_why(tmp_path: Path) -> None:
    from controller.cli.reconcile import _pass_exit  # noqa: PLC0415
    from controller.commands.verbs.status import report_document  # noqa: PLC0415
    from tests.commands.reconcile.test_spec_index_git import commit, git  # noqa: PLC0415

    b = Bench(tmp_path / "repo", fake=FakeAirflow())
    (b.root / ".gitignore").write_text("state.db*\n")
    git(b.root, "init", "-q", "-b", "main")
    try:
        b.spec("flaky", dag="demo_flaky", end="2025-01-04", mar=2)
        commit(b, "flaky")
        result = b.until_terminal(wait=fake(b).tick)
        assert _pass_exit(result, fail_on_failures=True) == 1
        b.spec("flaky", dag="demo_flaky", end="2025-01-04", mar=2, acknowledged='"CHG-9: odd days have no data"')
        commit(b, "acknowledge")
        sha = git(b.root, "rev-parse", "HEAD")[:12]
        result = b.run()
        assert [i.phase.value for i in result.current.items] == ["CompletedWithFailures"]  # still what it was
        assert _pass_exit(result, fail_on_failures=True) == 0
        record = report_document(b.settings(), "flaky", datetime.now(UTC))
        assert record.acknowledged == f"CHG-9: odd days have no data (committed by alice@x in {sha})"
    finally:
        b.close()


def test_status_json_the_page_and_the_report_link_each_backfill_in_airflows_ui(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    from controller.commands.runtime import session  # noqa: PLC0415
    from controller.commands.verbs.status import report_document  # noqa: PLC0415
    from controller.core.render.status_page import status_page  # noqa: PLC0415

    monkeypatch.setattr(session, "make_client", lambda _settings, **_kw: bench.client())
    settings = replace(bench.settings(), airflow_url="https://user:SECRET@airflow.example/")
    view = status_view(settings, datetime.now(UTC))
    (row,) = view.rows
    assert row.link == "https://airflow.example/dags/demo_daily/runs?run_type=backfill"  # 3.3.2: no backfill page
    assert row.as_json()["link"] == row.link
    page = status_page(view.rows, [], datetime.now(UTC))
    assert '<a href="https://airflow.example/dags/demo_daily/runs?run_type=backfill" rel="noopener noreferrer"' in page
    assert "SECRET" not in page
    offline = status_view(replace(settings, airflow_url=None), datetime.now(UTC))
    assert [r.link for r in offline.rows] == [None]
    assert report_document(bench.settings(), "a", datetime.now(UTC)).link is None  # the CLI's report adds it
    from controller.commands.verbs import report  # noqa: PLC0415

    monkeypatch.setattr(report, "make_client", lambda _settings, **_kw: bench.client())
    record, _observed = report.observed_record(settings, "a", datetime.now(UTC))
    assert record.link == "https://airflow.example/dags/demo_daily/runs?run_type=backfill"
    assert record.as_json()["link"] == record.link


def test_between_a_lift_and_the_pass_every_view_says_lift_recorded_while_airflow_is_still_paused(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Status text, `--format json` and the page say `Paused — lift recorded; unpause at the next pass` (never
    `resumed` or Running) until the pass unpauses the backfill."""
    from controller.commands.runtime import session  # noqa: PLC0415
    from controller.commands.verbs.stop import lift_with_settings, stop_with_settings  # noqa: PLC0415
    from controller.core.plan.stops import EmergencyStopKind, StopSource  # noqa: PLC0415
    from controller.core.render.status_page import status_page  # noqa: PLC0415

    monkeypatch.setattr(session, "make_client", lambda _settings, **_kw: bench.client())
    for key, value in bench.cli_env(BACKFILLCTL_SPECS_DIR=str(bench.specs), COLUMNS="200").items():
        monkeypatch.setenv(key, value)
    settings = replace(bench.settings(), actor="oncall-ann")
    stop_with_settings(settings, EmergencyStopKind.SPEC, "a", "bad rows", StopSource.CLI, None)
    lift_with_settings(settings, "a", "rows fixed")
    with bench.client() as client:
        assert client.get_backfill(1).is_paused is True  # the lift changed nothing in Airflow yet
    lifted = "lift recorded; unpause at the next pass"
    (row,) = status_view(bench.settings(), datetime.now(UTC)).rows
    assert (row.phase, row.note) == ("Paused", lifted)
    assert main(["status", "--format", "json"]) == 0
    (shown,) = json.loads(capsys.readouterr().out)["specs"]
    assert (shown["phase"], shown["note"]) == ("Paused", lifted)
    assert main(["status"]) == 0
    text = capsys.readouterr().out
    assert "Paused" in text
    assert lifted in text
    assert "resumed" not in text
    page = status_page([row], [], datetime.now(UTC))
    assert lifted in page
    resumed = bench.run()
    assert [(i.kind.value, o) for i, o in resumed.applied] == [("unpause", "done")]
    (row,) = status_view(bench.settings(), datetime.now(UTC)).rows
    assert (row.phase, lifted in row.note) == ("Running", False)


def test_validate_judges_a_resume_by_the_stops_the_store_has(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The documented lift (`resume: "stop #1: …"`) stays quiet once merged and lifted; a stop that never held the
    spec is a warning listing those that did; a resume naming nothing lists the stops holding it now; without a
    store, validate says it did not check."""
    from controller.commands.runtime import session  # noqa: PLC0415
    from controller.commands.verbs.stop import stop_with_settings  # noqa: PLC0415
    from controller.core.plan.stops import EmergencyStopKind, StopSource  # noqa: PLC0415

    monkeypatch.setattr(session, "make_client", lambda _settings, **_kw: bench.client())
    for key, value in bench.cli_env(BACKFILLCTL_SPECS_DIR=str(bench.specs)).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("BACKFILLCTL_AIRFLOW_URL")  # validate offline: only the store judges the resume
    settings = replace(bench.settings(), actor="oncall-ann")
    stop_with_settings(settings, EmergencyStopKind.SPEC, "a", "bad rows", StopSource.CLI, None)
    bench.spec("a", dag="demo_daily", end="2025-03-31", mar=1, resume='"stop #1: rows fixed"')
    lifted = bench.run()  # the reviewed resume lifts stop #1 and unpauses
    assert [(i.kind.value, o) for i, o in lifted.applied] == [("unpause", "done")]
    assert main(["validate"]) == 0
    assert "warning:" not in capsys.readouterr().out  # it did lift the stop: no "resume has no effect"
    stop_with_settings(settings, EmergencyStopKind.SPEC, "a", "again", StopSource.CLI, None)
    bench.spec("a", dag="demo_daily", end="2025-03-31", mar=1, resume='"stop #9: typo"')
    assert main(["validate"]) == 0
    out = capsys.readouterr().out
    assert (
        "$.resume: warning: resume names stop #9, but no stop #9 ever held a: it lifts nothing\n"
        "  hint: name a stop that held it (the store's: #1 (spec a, lifted), #2 (spec a, in force)); "
        "`backfillctl stop list` shows the stops in force\n"
    ) in out
    bench.spec("a", dag="demo_daily", end="2025-03-31", mar=1, resume='"CHG-2 fixed"')
    assert main(["validate"]) == 0
    out = capsys.readouterr().out
    assert "warning: resume has no effect: it names no stop (`stop #N`)" in out
    assert "or remove it; stops holding a now: #2 (spec a, in force)\n" in out
    bench.spec("a", dag="demo_daily", end="2025-03-31", mar=1, resume='"stop #2: fixed"')
    monkeypatch.setenv("BACKFILLCTL_STORE_URL", f"sqlite:///{bench.root}/nowhere.db")
    assert main(["validate"]) == 0
    captured = capsys.readouterr()
    assert "warning:" not in captured.out
    assert "that the stop each resume names held its spec (no store at BACKFILLCTL_STORE_URL)" in captured.err


def test_reconcile_writes_its_result_for_the_pull_requests_behind_it(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """`reconcile --result-dir`: what the pass created and queued, with links and no credential, as result.json and
    one comment per pull request (a spec whose change is not recorded: told to this run's change)."""
    from controller.commands.runtime import session  # noqa: PLC0415
    from controller.core.render.pr_result import MARKER  # noqa: PLC0415

    monkeypatch.setattr(session, "make_client", lambda _settings, **_kw: bench.client())
    for key, value in bench.cli_env(BACKFILLCTL_SPECS_DIR=str(bench.specs)).items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("BACKFILLCTL_AIRFLOW_URL", "https://bot:SECRET@airflow.example/")
    bench.spec("b", dag="demo_daily", start="2025-04-01", end="2025-04-03", mar=1)  # queued behind a
    bench.spec("c", dag="demo_hourly", end="2025-01-01T02:00:00Z", mar=1)
    evidence = tmp_path / "pr-41.json"
    evidence.write_text(
        json.dumps(
            {
                "version": 1,
                "forge": "github",
                "change": {
                    "number": 41,
                    "url": "https://github.com/o/r/pull/41",
                    "author": "alice",
                    "base_sha": "a" * 40,
                    "head_sha": "b" * 40,
                    "merge_sha": "c" * 40,
                    "merge_method": "squash",
                },
                "reviews": [],
            }
        )
    )
    out = tmp_path / "result"
    code = main(["reconcile", "--once", "--result-dir", str(out), "--evidence", str(evidence)])
    document = json.loads((out / "result.json").read_text())
    assert document["format_version"] == 1
    assert document["changes"] == [41]
    shown = [(r["spec"], r["result"], r["phase"]) for r in document["results"]]
    assert shown == [("b", "queued", "Queued"), ("c", "created", "Running")]
    assert "SECRET" not in (out / "result.json").read_text()
    comment = (out / "pr-41.md").read_text()
    assert comment.startswith(f"{MARKER}\n### backfillctl reconcile: the result of this change\n")
    assert "| `b` | queued | Queued | — | queued behind a \\(backfill \\#1\\) |\n" in comment
    link = "https://airflow.example/dags/demo_hourly/runs?run_type=backfill"
    assert f"| `c` | created | Running | [#2]({link}) |" in comment
    assert sorted(p.name for p in out.iterdir()) == ["pr-41.md", "result.json"]
    assert code == 0
