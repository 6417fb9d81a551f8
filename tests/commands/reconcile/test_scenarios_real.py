"""Reconcile end to end against the real Apache Airflow 3.3.2 (PostgreSQL metadata DB, LocalExecutor).

Exact Airflow state and audit rows are asserted. Every test uses its own dates (2023) and DAGs so that
it shares the session's Airflow with the contract tests without interference.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from controller.adapters.store import Store
from controller.core.model.airflow import BackfillRequest
from tests.adapters.airflow.test_contract import day
from tests.commands.reconcile.harness import Bench
from tests.fakes.calls import record_calls

pytestmark = pytest.mark.airflow
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def bench(tmp_path: Path, airflow_url: str) -> Iterator[Bench]:
    b = Bench(tmp_path, url=airflow_url)
    yield b
    with b.client() as client:
        for dag in ("demo_daily", "demo_flaky", "demo_tz", "demo_hourly", "demo_finance_ledger", "demo_slow"):
            for backfill in client.list_backfills(dag):
                if backfill.active:
                    client.cancel(backfill.id)
    b.close()


def pause(seconds: float = 3.0) -> None:
    time.sleep(seconds)


def test_lifecycle_succeeded_failures_and_queue(bench: Bench) -> None:
    bench.spec("ok", dag="demo_finance_ledger", start="2023-01-01", end="2023-01-05", mar=2)
    bench.spec("flaky", dag="demo_flaky", start="2023-01-01", end="2023-01-06", mar=3, reprocess="failed")
    bench.spec("q1", dag="demo_daily", start="2023-01-01", end="2023-01-03", mar=3)
    bench.spec("q2", dag="demo_daily", start="2023-01-04", end="2023-01-05", mar=3)
    first = bench.run()
    assert sorted((i.spec, o) for i, o in first.applied) == [("flaky", "created"), ("ok", "created"), ("q1", "created")]
    assert [i.reason for i in first.plan.items if i.spec == "q2"] == ["queued behind q1"]
    done = bench.until_terminal(passes=60, wait=pause)
    assert bench.phases(done) == {
        "ok": "Succeeded",
        "flaky": "CompletedWithFailures",
        "q1": "Succeeded",
        "q2": "Succeeded",
    }
    assert [i.reason for i in done.plan.items if i.spec == "flaky"] == ["failed: 2023-01-01, 2023-01-03, 2023-01-05"]
    with bench.client() as client:
        backfills = client.list_backfills("demo_daily")
        ours = [b for b in backfills if b.from_date.year == 2023]
        assert [(b.from_date.day, b.to_date.day, b.completed_at is not None) for b in ours] == [
            (1, 3, True),
            (4, 5, True),
        ]
        runs = client.dag_runs("demo_flaky", ours[0].from_date, ours[0].to_date)
        assert sorted((r.logical_date.day, r.state) for r in runs) == [(1, "failed"), (2, "success"), (3, "failed")]
    assert bench.trail("q2")[:3] == [
        ("observe", "observation", "Queued"),
        ("create", "intent", None),
        ("create", "outcome", "created"),
    ]
    assert bench.store.verify().ok


def test_pause_active_cancel_and_drift(bench: Bench) -> None:
    bench.spec("steer", dag="demo_tz", start="2023-02-01", end="2023-03-30", mar=1)
    bench.run()
    backfill_id = bench.store.binding("steer").backfill_id  # type: ignore[union-attr]
    with bench.client() as client:
        client.pause(backfill_id)  # by hand, in the UI (as admin): a stop, never healed
        bench.policy("version: 1\ndrift: heal\n")
        reported = bench.run()
        assert reported.applied == []
        (finding,) = reported.plan.findings
        assert finding.kind == "drift"
        assert re.fullmatch(rf"backfill #{backfill_id} was paused by hand in Airflow by admin at \S+Z", finding.message)
        (stop,) = bench.store.stops()
        assert (stop.target, stop.actor, stop.source.value) == ("steer", "admin", "airflow")
        held = bench.run()
        assert held.applied == []
        assert held.plan.items[0].reason.startswith("paused by hand in Airflow by admin at ")
        assert f"(stop #{stop.id})" in held.plan.items[0].reason
        assert client.get_backfill(backfill_id).is_paused is True
        client.unpause(backfill_id)  # unpaused in Airflow: the stop is lifted, audited
        bench.run()
        assert bench.store.stops() == ()
        assert client.get_backfill(backfill_id).is_paused is False
        bench.spec("steer", dag="demo_tz", start="2023-02-01", end="2023-03-30", mar=1, state="paused")
        assert [(i.kind.value, o) for i, o in bench.run().applied] == [("pause", "done")]
        assert client.get_backfill(backfill_id).is_paused is True
        bench.spec("steer", dag="demo_tz", start="2023-02-01", end="2023-03-30", mar=1, state="cancelled")
        assert [(i.kind.value, o) for i, o in bench.run().applied] == [("cancel", "done")]
        assert client.get_backfill(backfill_id).completed_at is not None
        begin, end = day("2023-02-01"), day("2023-03-30")
        # a run that was running when the backfill was cancelled goes on: the outcome waits for it
        wait_for("no run running", lambda: all(r.state != "running" for r in client.dag_runs("demo_tz", begin, end)))
        runs = client.dag_runs("demo_tz", begin, end)
    never_started = sum(1 for r in runs if r.state == "failed" and r.start_date is None)
    assert never_started >= 1  # the backfill was paused (max_active_runs 1) when it was cancelled
    final = bench.run()
    assert [(i.phase.value, i.reason) for i in final.plan.items] == [
        ("Cancelled", f"cancelled; {never_started} queued run(s) never started")
    ]


def wait_for(what: str, check: Callable[[], bool], timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after {timeout:.0f}s")
        time.sleep(1)


def test_cancel_fails_only_queued_runs_and_says_a_running_one_will_finish(bench: Bench) -> None:
    """demo_slow's task sleeps 25 s: cancel while the first of 4 runs is running (max_active_runs 1)."""
    bench.spec("slow", dag="demo_slow", start="2023-03-01", end="2023-03-04", mar=1)
    first = bench.run()
    assert [(i.spec, i.kind.value, o) for i, o in first.applied] == [("slow", "create", "created")]
    backfill_id = bench.store.binding("slow").backfill_id  # type: ignore[union-attr]
    with bench.client() as client:
        begin, end = day("2023-03-01"), day("2023-03-04")

        def states() -> list[str]:
            return [r.state for r in client.dag_runs("demo_slow", begin, end)]

        wait_for("one run running", lambda: states() == ["running", "queued", "queued", "queued"])
        bench.spec("slow", dag="demo_slow", start="2023-03-01", end="2023-03-04", mar=1, state="cancelled")
        cancelled = bench.run()
        assert [(i.kind.value, o) for i, o in cancelled.applied] == [("cancel", "done")]
        assert [(f.kind, f.spec, f.backfill_id, f.message) for f in cancelled.plan.findings] == [
            (
                "still-running",
                "slow",
                backfill_id,
                "cancel fails only queued runs; 1 running run(s) will finish",
            )
        ]
        assert client.get_backfill(backfill_id).completed_at is not None
        assert states() == ["running", "failed", "failed", "failed"]  # the running run goes on
        wait_for("the running run finishes", lambda: states()[0] != "running", timeout=60)
        runs = client.dag_runs("demo_slow", begin, end)
        assert [(r.state, r.start_date is None) for r in runs] == [
            ("success", False),
            ("failed", True),
            ("failed", True),
            ("failed", True),
        ]
    final = bench.run()
    assert [(i.spec, i.kind.value, i.phase.value, i.reason) for i in final.plan.items] == [
        ("slow", "noop", "Cancelled", "cancelled; 3 queued run(s) never started")
    ]
    assert bench.trail("slow") == [
        ("create", "intent", None),
        ("create", "outcome", "created"),
        ("cancel", "intent", None),
        ("cancel", "outcome", "done"),
        ("finding", "observation", "still-running"),  # audited once; the outcome waits for the running run
        ("observe", "observation", "Cancelled"),
    ]


def test_unmanaged_orphan_and_lost_store(bench: Bench, tmp_path: Path) -> None:
    with bench.client() as client:
        foreign = client.create(BackfillRequest("demo_hourly", day("2023-04-01"), day("2023-04-03"), max_active_runs=1))
        client.pause(foreign.id)
        bench.spec("blocked", dag="demo_hourly", start="2023-05-01", end="2023-05-02")
        bench.spec("orphan", dag="demo_tz", start="2023-06-01", end="2023-07-30", mar=1)
        first = bench.run()
        assert [i.reason for i in first.plan.items if i.spec == "blocked"] == [
            f"queued behind unmanaged backfill #{foreign.id} (backfill #{foreign.id})"
        ]
        assert client.get_backfill(foreign.id).is_paused is True  # untouched
        orphan_id = bench.store.binding("orphan").backfill_id  # type: ignore[union-attr]
        bench.store.close()
        (tmp_path / "state.db").unlink()  # the store is lost mid-run
        bench.store = Store(bench.store_url)
        adopted = bench.run()
        assert [(i.spec, i.kind.value, i.backfill_id) for i, _ in adopted.applied] == [("orphan", "adopt", orphan_id)]
        assert [b.id for b in client.list_backfills("demo_tz") if b.active] == [orphan_id]
        (bench.specs / "orphan.yaml").unlink()  # the spec is deleted mid-run
        orphaned = bench.run()
        assert [(i.spec, i.phase.value) for i in orphaned.plan.items if i.spec == "orphan"] == [("orphan", "Orphaned")]
        assert client.get_backfill(orphan_id).completed_at is None  # a deleted spec cancels nothing
        client.cancel(foreign.id)


CRASH_AFTER_CREATE = """
import os, signal, sys
from controller.adapters.store import Store
from controller.cli import main
real_append = Store.append
def append(self, entry):
    if entry.action == "create" and entry.phase == "outcome":
        os.kill(os.getpid(), signal.SIGKILL)  # dies after the POST, before its outcome is recorded
    return real_append(self, entry)
Store.append = append
sys.exit(main(["reconcile", "--once"]))
"""


def run_cli(bench: Bench, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller", *args], env=bench.cli_env(), capture_output=True, text=True, check=False
    )


def test_sigkill_between_create_and_outcome_then_adopt(bench: Bench) -> None:
    bench.spec("crash", dag="demo_daily", start="2023-08-01", end="2023-08-03")
    killed = subprocess.run(
        [sys.executable, "-c", CRASH_AFTER_CREATE], env=bench.cli_env(), capture_output=True, text=True, check=False
    )
    assert killed.returncode == -signal.SIGKILL
    assert bench.trail("crash") == [("create", "intent", None)]
    with bench.client() as client:
        created = [
            b for b in client.list_backfills("demo_daily") if b.from_date.year == 2023 and b.from_date.month == 8
        ]
        assert len(created) == 1
        stuck = bench.store.current_lease()
        assert stuck is not None  # SIGKILL left the lease behind: an operator releases it by its exact id
        bench.store.unlock(stuck.lease_id)
        second = run_cli(bench, "reconcile", "--once")
        assert second.returncode == 0, second.stderr
        assert "~ adopt crash: adopted" in second.stdout
        again = [b for b in client.list_backfills("demo_daily") if b.from_date.year == 2023 and b.from_date.month == 8]
        assert [b.id for b in again] == [created[0].id]
    assert bench.store.verify().ok


def test_two_reconcilers_one_works_the_other_exits_5(bench: Bench) -> None:
    bench.spec("lease", dag="demo_daily", start="2023-09-01", end="2023-09-02")
    watcher = subprocess.Popen(
        [sys.executable, "-m", "controller", "reconcile", "--watch", "--interval", "60"],
        env=bench.cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while bench.store.current_lease() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        holder = bench.store.current_lease()
        assert holder is not None
        second = run_cli(bench, "reconcile", "--once")
        assert second.returncode == 5
        assert second.stderr.startswith(
            f"error: lock held by ci-bot@{holder.host} on {holder.host} (pid {watcher.pid})"
        )
    finally:
        watcher.send_signal(signal.SIGTERM)
        _out, err = watcher.communicate(timeout=60)
    assert watcher.returncode == 0, err
    assert bench.store.current_lease() is None
    assert [e.entry.outcome for e in bench.events("lease") if e.entry.action == "create"] == [None, "created"]


def test_rerun_without_changes_makes_no_mutating_call(bench: Bench) -> None:
    bench.spec("idle", dag="demo_daily", start="2023-10-01", end="2023-10-02")
    bench.until_terminal(passes=40, wait=pause)
    reconciler = bench.reconciler()
    calls = record_calls(reconciler.client)
    result = reconciler.run_once()
    assert result.applied == []
    assert calls == []  # the finished spec costs no Airflow call at all


def test_expected_runs_exceeded_is_refused_with_exit_5(bench: Bench) -> None:
    bench.spec("too-many", dag="demo_daily", start="2023-11-01", end="2023-11-10", expected_runs=5)
    result = run_cli(bench, "reconcile", "--once")
    assert result.returncode == 5
    assert "refused: too-many: the dry run counts 10 runs; expected_runs is 5\n" in result.stderr
    with bench.client() as client:
        assert [
            b for b in client.list_backfills("demo_daily") if b.from_date.month == 11 and b.from_date.year == 2023
        ] == []


def test_cli_plan_exit_codes_and_json_formats(bench: Bench) -> None:
    bench.spec("formats", dag="demo_finance_ledger", start="2023-12-01", end="2023-12-02", mar=2)
    planned = run_cli(bench, "plan", "--detailed-exitcode", "--format", "json")
    assert planned.returncode == 4, planned.stderr
    document = json.loads(planned.stdout)
    assert document["format_version"] == 1
    assert [(i["spec"], i["action"], i["runs_to_create"], i["runs_in_range"]) for i in document["items"]] == [
        ("formats", "create", 2, 2)
    ]
    assert document["summary"]["create"] == 1
    assert run_cli(bench, "reconcile", "--until-complete", "--interval", "3").returncode == 0
    assert run_cli(bench, "plan", "--detailed-exitcode").returncode == 0
    status = json.loads(run_cli(bench, "status", "formats", "--format", "json").stdout)
    assert status["specs"][0]["phase"] == "Succeeded"
    assert status["specs"][0]["runs"] == {"success": 2, "failed": 0, "running": 0, "queued": 0, "total": 2}
    report = json.loads(run_cli(bench, "report", "formats", "--format", "json").stdout)
    assert (report["format_version"], report["outcome"], report["ticket"]) == (1, "Succeeded", "CHG-1")
    assert report["intervals"] == {
        "complete": 2,
        "failed": 0,
        "failed_dates": [],
        "failed_partitions": [],
        "never_started": 0,
        "skipped": 0,
        "in_range": 2,
        "reruns": [],
    }
    assert report["partitions"] is None  # demo_finance_ledger is not partitioned
    assert [e["action"] for e in report["audit"]] == ["create", "create", "observe"]


def test_stop_pauses_at_once_holds_and_only_a_lift_expiry_or_resume_lifts_it(bench: Bench) -> None:
    bench.policy("version: 1\ndownstream:\n  warehouse: {max_active_runs: 8, owners: [warehouse-oncall]}\n")
    bench.spec("loaded", dag="demo_tz", start="2022-05-01", end="2022-06-29", mar=1, downstream=["warehouse"])
    first = bench.run()
    assert [(i.kind.value, o) for i, o in first.applied] == [("create", "created")], first.plan.items
    backfill_id = bench.store.binding("loaded").backfill_id  # type: ignore[union-attr]
    stopped = bench.cli("stop", "--downstream", "warehouse", "--reason", "CPU at 95%", "--expires", "4h")
    assert stopped.returncode == 0, stopped.stderr
    lines = stopped.stdout.splitlines()
    assert re.fullmatch(r"stop #1 of downstream warehouse by ci-bot \(cli\) until \S+Z", lines[0])
    assert lines[1:3] == [
        f"  paused loaded (backfill #{backfill_id})",
        "  held loaded: nothing is created, unpaused or next-chunked",
    ]
    with bench.client() as client:
        assert client.get_backfill(backfill_id).is_paused is True  # at once, before any pass
        client.unpause(backfill_id)  # someone unpauses it in Airflow: the stop holds, the pass pauses it again
        again = bench.run()
        assert [(i.kind.value, o) for i, o in again.applied] == [("pause", "done")]
        assert again.plan.items[0].reason.startswith("stop #1: stopped by ci-bot (cli): CPU at 95% (until ")
        assert bench.run().applied == []
        refused = bench.cli("stop", "lift", "warehouse")
        assert refused.returncode == 5
        assert refused.stderr.splitlines()[0] == "error: lift stop #1: only warehouse-oncall may; the actor is ci-bot"
        lifted = subprocess.run(
            [sys.executable, "-m", "controller", "stop", "lift", "warehouse", "--reason", "load is down"],
            cwd=bench.root,
            env=bench.cli_env(BACKFILLCTL_SPECS_DIR="specs", BACKFILLCTL_ACTOR="warehouse-oncall"),
            capture_output=True,
            text=True,
            check=False,
        )
        assert (lifted.returncode, lifted.stdout.splitlines()[0]) == (
            0,
            "lifted stop #1 of downstream warehouse (by warehouse-oncall: load is down)",
        )
        resumed = bench.run()
        assert [(i.kind.value, o) for i, o in resumed.applied] == [("unpause", "done")]
        assert client.get_backfill(backfill_id).is_paused is False
        # a spec stop, lifted by a reviewed resume naming it
        assert bench.cli("stop", "loaded", "--reason", "bad data").returncode == 0
        assert client.get_backfill(backfill_id).is_paused is True
        bench.spec(
            "loaded",
            dag="demo_tz",
            start="2022-05-01",
            end="2022-06-29",
            mar=1,
            downstream=["warehouse"],
            resume='"stop #2: data fixed (CHG-7)"',
        )
        by_resume = bench.run()
        assert [(i.kind.value, o) for i, o in by_resume.applied] == [("unpause", "done")]
        assert bench.store.stops() == ()
        assert client.get_backfill(backfill_id).is_paused is False
    lifts = [e.entry.message for e in bench.events() if e.entry.action == "stop"]
    assert (
        lifts[-1] == "stop #2 of spec loaded lifted by ci-bot: reviewed resume of loaded: stop #2: data fixed (CHG-7)"
    )
