"""Reconcile scenarios and injected faults on the stateful fake Airflow (which passes the real contract).

The same lifecycle scenarios run against the real Airflow in test_scenarios_real.py; the faults here
(timeouts after commit, 503, 409 races, crashes between intent and outcome, failing pages) are the ones
a real server cannot be made to produce on demand.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from controller.adapters.files import display
from controller.adapters.store import Store
from controller.cli import main
from controller.commands.reconcile.reconciler import Reconciler
from controller.core.audit.chain import AuditEntry, AuditRecord
from controller.core.audit.notify import Notification
from controller.core.model.spec import format_utc
from controller.errors import StalePlan, StoreError
from tests.commands.reconcile.harness import Bench, count_calls, fake, in_process, mutating
from tests.fakes.airflow import Dag, FakeAirflow
from tests.fakes.calls import record_calls


def test_create_runs_to_succeeded(bench: Bench) -> None:
    bench.spec("jan", expected_runs=7)
    first = bench.run()
    assert [(i.spec, i.kind.value, o) for i, o in first.applied] == [("jan", "create", "created")]
    done = bench.until_terminal()
    assert bench.phases(done) == {"jan": "Succeeded"}
    (backfill,) = fake(bench).backfills.values()
    assert (backfill["dag_id"], backfill["from_date"], backfill["max_active_runs"]) == (
        "demo_daily",
        "2025-01-01T00:00:00Z",
        3,
    )
    assert bench.trail("jan") == [
        ("create", "intent", None),
        ("create", "outcome", "created"),
        ("observe", "observation", "Succeeded"),
    ]
    intent = bench.events("jan")[0]
    assert intent.entry.request == {
        "method": "POST",
        "path": "/api/v2/backfills",
        "body": {
            "dag_id": "demo_daily",
            "from_date": "2025-01-01T00:00:00Z",
            "to_date": "2025-01-07T00:00:00Z",
            "reprocess_behavior": "none",
            "max_active_runs": 3,
            "run_on_latest_version": True,  # explicit: the default differs per Airflow line
        },
        "airflow": "3.3.2",
        "dates": [["2025-01-01T00:00:00+00:00", "2025-01-07T00:00:00+00:00", 7]],  # what the dry run listed
    }
    assert bench.store.verify().ok


def test_failures_end_completed_with_failures_with_dates(bench: Bench) -> None:
    bench.spec("flaky", dag="demo_flaky")
    done = bench.until_terminal()
    (item,) = done.plan.items
    assert (item.phase.value, item.reason) == (
        "CompletedWithFailures",
        "failed: 2025-01-01, 2025-01-03, 2025-01-05, 2025-01-07",
    )
    stored = bench.store.binding("flaky")
    assert stored is not None
    assert stored.runs is not None
    assert stored.runs.counts == {"failed": 4, "success": 3}


def test_specs_on_one_dag_queue_and_both_finish(bench: Bench) -> None:
    bench.spec("a-first", start="2025-01-01", end="2025-01-20", mar=1)
    bench.spec("b-second", start="2025-02-01", end="2025-02-03")
    fake(bench).scheduler_running = False
    first = bench.run()
    assert [(i.spec, i.kind.value, i.reason) for i in first.plan.items] == [
        ("a-first", "create", ""),
        ("b-second", "wait", "queued behind a-first"),
    ]
    second = bench.run()
    assert [(i.spec, i.kind.value, i.reason) for i in second.plan.items] == [
        ("a-first", "noop", "in sync"),
        ("b-second", "wait", "queued behind a-first (backfill #1)"),
    ]
    fake(bench).scheduler_running = True
    done = bench.until_terminal()
    assert bench.phases(done) == {"a-first": "Succeeded", "b-second": "Succeeded"}
    assert sorted(b["from_date"] for b in fake(bench).backfills.values()) == [
        "2025-01-01T00:00:00Z",
        "2025-02-01T00:00:00Z",
    ]


def test_pause_then_unpause_by_spec(bench: Bench) -> None:
    bench.spec("p", mar=1, end="2025-01-20")
    fake(bench).scheduler_running = False
    bench.run()
    bench.spec("p", mar=1, end="2025-01-20", state="paused")
    paused = bench.run()
    assert [(i.kind.value, o) for i, o in paused.applied] == [("pause", "done")]
    assert fake(bench).backfills[1]["is_paused"] is True
    assert [(i.kind.value, i.phase.value) for i in bench.run().plan.items] == [("noop", "Paused")]
    bench.spec("p", mar=1, end="2025-01-20", state="active")
    resumed = bench.run()
    assert [(i.kind.value, o) for i, o in resumed.applied] == [("unpause", "done")]
    assert fake(bench).backfills[1]["is_paused"] is False
    assert [t for t in bench.trail("p") if t[0] in ("pause", "unpause")] == [
        ("pause", "intent", None),
        ("pause", "outcome", "done"),
        ("unpause", "intent", None),
        ("unpause", "outcome", "done"),
    ]


def test_cancel_by_spec(bench: Bench) -> None:
    bench.spec("c", mar=1, end="2025-01-20")
    fake(bench).scheduler_running = False
    bench.run()
    bench.spec("c", mar=1, end="2025-01-20", state="cancelled")
    result = bench.run()
    assert [(i.kind.value, o) for i, o in result.applied] == [("cancel", "done")]
    assert fake(bench).backfills[1]["completed_at"] is not None
    final = bench.run()
    assert [(i.phase.value, i.reason) for i in final.plan.items] == [
        ("Cancelled", "cancelled; 20 queued run(s) never started")
    ]


def test_a_hand_pause_is_a_stop_never_healed_and_lifted_by_unpausing_in_airflow(bench: Bench) -> None:
    bench.spec("d", mar=1, end="2025-01-20")
    fake(bench).scheduler_running = False
    bench.run()
    fake(bench).backfills[1]["is_paused"] = True  # paused by hand in the Airflow UI
    bench.policy("version: 1\ndrift: heal\n")
    reported = bench.run()
    assert reported.applied == []
    assert [f.kind for f in reported.plan.findings] == ["drift"]
    assert reported.plan.findings[0].message.startswith("backfill #1 was paused")
    (stop,) = bench.store.stops()
    assert (stop.kind.value, stop.target, stop.source.value) == ("spec", "d", "airflow")
    held = bench.run()
    assert held.applied == []
    assert held.plan.items[0].reason.startswith("paused by hand in Airflow") or "stop #1" in held.plan.items[0].reason
    assert fake(bench).backfills[1]["is_paused"] is True
    fake(bench).backfills[1]["is_paused"] = False  # unpaused in Airflow: the stop is lifted
    bench.run()
    assert bench.store.stops() == ()


def test_unmanaged_backfill_blocks_the_queue_and_is_never_touched(bench: Bench) -> None:
    fake(bench).scheduler_running = False
    fake(bench)._create(
        {"dag_id": "demo_daily", "from_date": "2024-01-01", "to_date": "2024-01-05", "max_active_runs": 1}
    )
    bench.spec("mine")
    for _ in range(2):
        result = bench.run()
        assert [(i.kind.value, i.reason) for i in result.plan.items] == [
            ("wait", "queued behind unmanaged backfill #1 (backfill #1)")
        ]
        assert [f.kind for f in result.plan.findings] == ["unmanaged"]
    assert mutating(fake(bench).requests) == []


def test_deleted_spec_is_orphaned_and_nothing_cancelled(bench: Bench) -> None:
    path = bench.spec("gone", mar=1, end="2025-01-20")
    fake(bench).scheduler_running = False
    bench.run()
    path.unlink()
    before = len(fake(bench).requests)
    result = bench.run()
    assert [(i.spec, i.phase.value) for i in result.plan.items] == [("gone", "Orphaned")]
    assert [f.kind for f in result.plan.findings] == ["orphaned"]
    assert mutating(fake(bench).requests[before:]) == []
    assert fake(bench).backfills[1]["completed_at"] is None


def test_lost_store_adopts_instead_of_duplicating(bench: Bench, tmp_path: Path) -> None:
    bench.spec("live", mar=1, end="2025-01-20")
    bench.spec("done", dag="demo_flaky")
    fake(bench).scheduler_running = False
    bench.run()
    fake(bench).scheduler_running = True
    for _ in range(5):
        fake(bench).tick()
    bench.store.close()
    (tmp_path / "state.db").unlink()
    bench.store = type(bench.store)(bench.store_url)
    fake(bench).scheduler_running = False
    result = bench.run()
    assert sorted((i.spec, i.kind.value, o) for i, o in result.applied) == [
        ("done", "adopt", "adopted"),
        ("live", "adopt", "adopted"),
    ]
    assert len(fake(bench).backfills) == 2
    assert bench.phases(result)["done"] == "CompletedWithFailures"


def test_crash_between_create_and_outcome_adopts_on_next_pass(bench: Bench) -> None:
    bench.spec("crash")
    fake(bench).scheduler_running = False

    def die(_request: httpx.Request) -> BaseException:
        return KeyboardInterrupt()  # stands for SIGKILL: the POST landed, the outcome was never written

    fake(bench).fault("POST", "/api/v2/backfills", die, after=True)
    with pytest.raises(KeyboardInterrupt):
        bench.run()
    assert bench.trail("crash") == [("create", "intent", None)]
    posts_before = count_calls(fake(bench).requests)["POST /api/v2/backfills"]
    result = bench.run()
    assert [(i.kind.value, i.reason) for i in result.plan.items] == [
        ("adopt", "adopt backfill #1 (intent without outcome)")
    ]
    assert count_calls(fake(bench).requests)["POST /api/v2/backfills"] == posts_before == 1
    assert len(fake(bench).backfills) == 1
    assert bench.store.verify().ok


def test_crash_after_intent_before_post_creates_once(bench: Bench) -> None:
    bench.spec("early")
    fake(bench).fault("POST", "/api/v2/backfills", lambda r: KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        bench.run()
    assert fake(bench).backfills == {}
    result = bench.run()
    assert [(i.kind.value, o) for i, o in result.applied] == [("create", "created")]
    assert bench.trail("early")[1:] == [
        ("create", "observation", "abandoned"),
        ("create", "intent", None),
        ("create", "outcome", "created"),
    ]
    assert len(fake(bench).backfills) == 1


def test_timeout_after_commit_is_observed_not_retried(bench: Bench) -> None:
    bench.spec("slow")
    fake(bench).fault("POST", "/api/v2/backfills", lambda r: httpx.ReadTimeout("slow", request=r), after=True)
    result = bench.run()
    assert [(i.kind.value, o) for i, o in result.applied] == [("create", "recovered-after-ambiguous")]
    assert count_calls(fake(bench).requests)["POST /api/v2/backfills"] == 1
    assert len(fake(bench).backfills) == 1


def test_503_twice_then_created_once(bench: Bench, caplog: pytest.LogCaptureFixture) -> None:
    bench.spec("locked")
    locked = httpx.Response(503, json={"detail": "Database is locked. Backfill creation is not supported on SQLite"})
    fake(bench).fault("POST", "/api/v2/backfills", lambda r: locked)
    fake(bench).fault("POST", "/api/v2/backfills", lambda r: locked)
    result = bench.run()
    assert [(i.kind.value, o) for i, o in result.applied] == [("create", "created")]
    assert len(fake(bench).backfills) == 1
    calls = [
        (m, p)
        for m, p in fake(bench).requests
        if p.startswith("/api/v2/backfills") and p != "/api/v2/backfills/dry_run"
    ]
    first_post = calls.index(("POST", "/api/v2/backfills"))
    assert calls[first_post:] == [
        ("POST", "/api/v2/backfills"),
        ("GET", "/api/v2/backfills"),
        ("POST", "/api/v2/backfills"),
        ("GET", "/api/v2/backfills"),
        ("POST", "/api/v2/backfills"),  # answered: the answer is the new backfill, the DAG is not listed again
    ]
    detail = "POST /api/v2/backfills -> 503: Database is locked. Backfill creation is not supported on SQLite"
    assert [r.getMessage() for r in caplog.records if "attempt" in r.getMessage()] == [
        f"attempt #1/3 failed; will retry after checking nothing was created: {detail}",
        f"attempt #2/3 failed; will retry after checking nothing was created: {detail}",
    ]


def test_conflict_on_create_queues_behind_the_other_backfill(bench: Bench) -> None:
    bench.spec("racer")
    fake(bench).scheduler_running = False

    def someone_else(request: httpx.Request) -> httpx.Response:
        fake(bench)._create({"dag_id": "demo_daily", "from_date": "2024-03-01", "to_date": "2024-03-02"})
        return httpx.Response(409, json={"detail": "There is already a running backfill for dag demo_daily"})

    fake(bench).fault("POST", "/api/v2/backfills", someone_else)
    result = bench.run()
    assert [(i.kind.value, o) for i, o in result.applied] == [("create", "conflict")]
    assert [(i.kind.value, i.reason) for i in bench.run().plan.items] == [
        ("wait", "queued behind unmanaged backfill #1 (backfill #1)")
    ]


def test_rejected_create_is_permanent_and_reported(bench: Bench) -> None:
    bench.spec("bad-conf", dag="demo_params", dag_run_conf="{region: mars}")
    result = bench.run()
    assert result.applied == []
    assert [(i.kind.value, i.reason.split(" not ")[0]) for i in result.plan.items] == [
        ("blocked", "Airflow refuses it: Invalid input for param region: 'mars' is")
    ]
    assert result.errors == [f"bad-conf: {result.plan.items[0].reason}"]
    assert mutating(fake(bench).requests) == []


def test_expected_runs_exceeded_is_refused(bench: Bench) -> None:
    bench.spec("big", expected_runs=5)
    result = bench.run()
    assert result.refused == ["big: the dry run counts 7 runs; expected_runs is 5"]
    assert mutating(fake(bench).requests) == []
    assert bench.trail("big") == [("observe", "observation", "Blocked")]


def test_nothing_to_reprocess_succeeds_without_a_backfill(bench: Bench) -> None:
    bench.spec("first")
    bench.until_terminal()
    bench.spec("again", reprocess="none")
    result = bench.run()
    assert [(i.spec, i.phase.value, i.reason) for i in result.plan.items if i.spec == "again"] == [
        ("again", "Succeeded", "nothing to reprocess")
    ]
    assert len(fake(bench).backfills) == 1


def test_rerun_at_same_state_makes_no_mutating_call_and_no_record(bench: Bench) -> None:
    """R04, with DESIGN §5's rule: a pass that changes or finds nothing writes no audit record."""
    bench.spec("steady")
    bench.until_terminal()
    before_requests, before_events = len(fake(bench).requests), len(bench.events())
    first, second = bench.run(), bench.run()
    assert first.plan.checksum() == second.plan.checksum()
    assert mutating(fake(bench).requests[before_requests:]) == []
    assert fake(bench).requests[before_requests:] == []  # finished specs cost no Airflow call at all
    assert bench.events()[before_events:] == []


def test_an_idle_reconciler_writes_one_liveness_record_an_hour(bench: Bench) -> None:
    bench.spec("steady")
    bench.until_terminal()
    before = len(bench.events())

    def later() -> datetime:  # an hour and a minute on: the last record is older than an hour
        return datetime.now(UTC) + timedelta(minutes=61)

    hour_later = Store(bench.store_url, clock=later)
    try:
        reconciler = Reconciler(bench.settings(), hour_later, bench.client(), clock=later)
        first, second = reconciler.run_once(), reconciler.run_once()
    finally:
        hour_later.close()
    assert (first.applied, second.applied) == ([], [])
    assert [(e.entry.action, e.entry.phase, e.entry.outcome, e.entry.message) for e in bench.events()[before:]] == [
        ("reconcile", "observation", "idle", f"0 change(s); plan {first.plan.checksum()}")
    ]
    assert bench.store.verify().ok


def test_a_stop_with_expires_lifts_itself_in_the_first_pass_after_its_expiry(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """`stop --downstream warehouse --expires 4h` pauses the running backfill at once; passes before the expiry
    hold it; the first pass after it lifts the stop (audited: by the reconciler, "expired at …") and unpauses the
    backfill it paused, once."""
    bench.policy("version: 1\ndownstream:\n  warehouse: {max_active_runs: 8, owners: [warehouse-oncall]}\n")
    bench.spec("loaded", mar=1, end="2025-01-20", downstream="[warehouse]")
    fake(bench).scheduler_running = False  # the backfill stays running
    assert [(i.kind.value, o) for i, o in bench.run().applied] == [("create", "created")]
    in_process(bench, monkeypatch)
    monkeypatch.setenv("BACKFILLCTL_ACTOR", "warehouse-oncall")
    assert main(["stop", "--downstream", "warehouse", "--reason", "CPU at 95%", "--expires", "4h"]) == 0
    capsys.readouterr()
    (stop,) = bench.store.stops()
    assert stop.expires_at is not None
    assert fake(bench).backfills[1]["is_paused"] is True  # at once
    held = bench.run()
    assert held.applied == []
    assert held.plan.items[0].reason.startswith("stop #1: stopped by warehouse-oncall (cli): CPU at 95% (until ")

    def later() -> datetime:  # a second past the expiry
        assert stop.expires_at is not None
        return stop.expires_at + timedelta(seconds=1)

    requests, events = len(fake(bench).requests), len(bench.events())
    store = Store(bench.store_url, clock=later)
    try:
        reconciler = Reconciler(bench.settings(), store, bench.client(), clock=later, sleep=lambda _s: None)
        lifted, again = reconciler.run_once(), reconciler.run_once()
    finally:
        store.close()
    assert [(i.kind.value, o) for i, o in lifted.applied] == [("unpause", "done")]
    assert again.applied == []
    assert fake(bench).backfills[1]["is_paused"] is False
    assert count_calls(fake(bench).requests[requests:])["PUT /api/v2/backfills/1/unpause"] == 1
    assert mutating(fake(bench).requests[requests:]) == [("PUT", "/api/v2/backfills/1/unpause")]
    written = [(e.entry.actor, e.entry.action, e.entry.phase, e.entry.outcome) for e in bench.events()[events:]]
    assert written == [  # the second pass writes nothing
        ("ci-bot", "stop", "observation", "lifted"),
        ("ci-bot", "unpause", "intent", None),
        ("ci-bot", "unpause", "outcome", "done"),
        ("ci-bot", "finding", "observation", "stuck"),  # its runs queued for 4 h with the scheduler stopped
        ("ci-bot", "reconcile", "observation", "applied"),  # the pass's own record, after what it found
    ]
    (lift,) = [e.entry for e in bench.events() if e.entry.action == "stop" and e.entry.outcome == "lifted"]
    assert lift.message == (
        f"stop #1 of downstream warehouse lifted by ci-bot: expired at {format_utc(stop.expires_at)}; it held loaded"
    )
    assert bench.store.stops() == ()
    assert bench.store.verify().ok


def test_incomplete_observation_blocks_everything_on_that_dag(bench: Bench) -> None:
    bench.spec("x", mar=1, end="2025-01-20")
    fake(bench).scheduler_running = False
    bench.run()
    bench.spec("x", mar=1, end="2025-01-20", state="cancelled")
    for _ in range(4):
        fake(bench).fault("GET", "/api/v2/backfills", lambda r: httpx.Response(500, json={"detail": "boom"}))
    result = bench.run()
    assert result.applied == []
    assert [(i.kind.value, i.reason) for i in result.plan.items] == [
        ("blocked", "observation incomplete: GET /api/v2/backfills -> 500: boom")
    ]
    assert fake(bench).backfills[1]["completed_at"] is None


def test_stale_plan_checksum_is_refused_and_audited(bench: Bench) -> None:
    bench.spec("s")
    reviewed = bench.reconciler().run_once(dry_run=True).plan.checksum()
    bench.spec("s2", dag="demo_hourly", start="2025-01-01T00:00:00Z", end="2025-01-01T03:00:00Z")
    with pytest.raises(StalePlan) as stale:
        bench.run(plan_checksum=reviewed)
    assert stale.value.message.startswith(f"stale plan: checksum={reviewed} does not match computed=")
    assert mutating(fake(bench).requests) == []
    assert [(e.entry.action, e.entry.outcome) for e in bench.events()] == [("reconcile", "refused")]
    fresh = bench.reconciler().run_once(dry_run=True).plan.checksum()
    assert [(i.kind.value, o) for i, o in bench.run(plan_checksum=fresh).applied] == [
        ("create", "created"),
        ("create", "created"),
    ]


def test_steady_state_calls_for_50_specs_over_10_dags(tmp_path: Path) -> None:
    dags = [Dag(f"dag_{d}") for d in range(10)]
    bench = Bench(tmp_path, fake=FakeAirflow(dags=dags))
    try:
        for n in range(50):
            bench.spec(
                f"s{n:02d}",
                dag=f"dag_{n % 10}",
                start=f"2024-{n // 10 + 1:02d}-01",
                end=f"2024-{n // 10 + 1:02d}-20",
                mar=1,
            )
        fake(bench).scheduler_running = False
        bench.run()  # 10 creates: one head per DAG, 40 queued
        before = len(fake(bench).requests)
        result = bench.run()
        calls = count_calls(fake(bench).requests[before:])
        assert result.applied == []
        per_dag = {f"GET /api/v2/dags/dag_{d}/dagRuns": 1 for d in range(10)}
        # the 10 DAGs' infos come from one page of the DAG listing, not from 10 details calls
        assert calls == {"POST /auth/token": 1, "GET /api/v2/dags": 1, "GET /api/v2/backfills": 10, **per_dag}
        assert sum(calls.values()) == 22
    finally:
        bench.close()


def test_spec_paused_before_creation_creates_nothing_until_active(bench: Bench) -> None:
    bench.spec("staged", state="paused")
    result = bench.run()
    assert [(i.kind.value, i.phase.value, i.reason) for i in result.plan.items] == [
        ("noop", "Paused", "paused before it was created; set state: active to create it")
    ]
    assert mutating(fake(bench).requests) == []
    bench.spec("staged", state="active")
    assert [(i.kind.value, o) for i, o in bench.run().applied] == [("create", "created")]


class IntentFails(Store):
    """The store refuses the create intent (disk full, lock timeout): the POST must never be sent."""

    def append(
        self, entry: AuditEntry, notifications: Sequence[Notification] = (), *, downstream: Sequence[str] = ()
    ) -> AuditRecord:
        if entry.action == "create" and entry.phase == "intent":
            raise StoreError("store sqlite:///x: writing the audit event create/intent failed: OperationalError")
        return super().append(entry, notifications, downstream=downstream)


def test_fail_closed_when_the_intent_cannot_be_written(bench: Bench) -> None:
    bench.spec("closed")
    failing = IntentFails(bench.store_url)
    try:
        with pytest.raises(StoreError):
            bench.reconciler(store=failing).run_once()
    finally:
        failing.close()
    assert count_calls(fake(bench).requests)["POST /api/v2/backfills"] == 0
    assert fake(bench).backfills == {}


def test_finished_specs_keep_their_run_counts_without_airflow_calls(bench: Bench) -> None:
    bench.spec("kept", dag="demo_flaky")
    bench.until_terminal()
    reconciler = bench.reconciler()
    calls = record_calls(reconciler.client)
    (item,) = reconciler.run_once().plan.items
    assert calls == []
    assert item.facts["runs"]["counts"] == {"failed": 4, "success": 3}


def test_offline_status_shows_what_the_store_recorded(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bench.spec("offline", dag="demo_flaky")
    bench.spec("never-run", dag="demo_daily", state="paused")
    bench.until_terminal()
    monkeypatch.delenv("BACKFILLCTL_AIRFLOW_URL", raising=False)
    monkeypatch.setenv("BACKFILLCTL_STORE_URL", bench.store_url)
    monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", str(bench.specs))
    assert main(["status", "--format", "json"]) == 1  # stale rows: a script must say it may take them
    capsys.readouterr()
    assert main(["status", "--format", "json", "--allow-stale"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "offline: BACKFILLCTL_AIRFLOW_URL is not set; showing what the store last recorded\n"
    document = json.loads(captured.out)
    assert document["stale"] is True
    rows = {r["spec"]: r for r in document["specs"]}
    assert (rows["offline"]["phase"], rows["offline"]["runs"]["failed"], rows["offline"]["runs"]["total"]) == (
        "CompletedWithFailures",
        4,
        7,
    )
    assert rows["offline"]["note"].endswith(") failed: 2025-01-01, 2025-01-03, 2025-01-05, 2025-01-07")
    assert rows["never-run"]["phase"] == "Paused"


def git_commit(root: Path, message: str, when: str) -> None:
    env = {
        "GIT_AUTHOR_NAME": "alice",
        "GIT_AUTHOR_EMAIL": "alice@example.com",
        "GIT_COMMITTER_NAME": "alice",
        "GIT_COMMITTER_EMAIL": "alice@example.com",
        "GIT_AUTHOR_DATE": when,
        "GIT_COMMITTER_DATE": when,
        "PATH": "/usr/bin:/bin",
        "HOME": str(root),
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    for args in (["add", "-A"], ["commit", "-q", "-m", message]):
        subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


def test_first_merged_first_follows_git_history_not_names(bench: Bench) -> None:
    """`zz-early` was merged a day before `aa-late`: it heads the queue although its name sorts last."""
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=bench.root, check=True, capture_output=True)
    bench.spec("zz-early", start="2025-01-01", end="2025-01-03", mar=1)
    git_commit(bench.root, "add zz-early", "2026-11-01T10:00:00+00:00")
    bench.spec("aa-late", start="2025-02-01", end="2025-02-03", mar=1)
    git_commit(bench.root, "add aa-late", "2026-11-02T10:00:00+00:00")
    fake(bench).scheduler_running = False
    first = bench.run()
    assert [(i.spec, i.kind.value, i.reason) for i in first.plan.items] == [
        ("zz-early", "create", ""),
        ("aa-late", "wait", "queued behind zz-early"),
    ]
    fake(bench).scheduler_running = True
    done = bench.until_terminal()
    assert bench.phases(done) == {"zz-early": "Succeeded", "aa-late": "Succeeded"}
    created = [e.entry.spec_name for e in bench.events() if e.entry.action == "create" and e.entry.phase == "outcome"]
    assert created == ["zz-early", "aa-late"]


def committed_bench(bench: Bench) -> str:
    """`reviewed` committed at HEAD; then an untracked spec and an uncommitted edit of the reviewed one."""
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=bench.root, check=True, capture_output=True)
    (bench.root / ".gitignore").write_text("state.db*\n")
    bench.spec("reviewed", start="2025-01-01", end="2025-01-03", mar=1)
    git_commit(bench.root, "add reviewed", "2026-11-01T10:00:00+00:00")
    bench.spec("reviewed", start="2025-01-01", end="2025-01-05", mar=2)  # edited after the commit
    bench.spec("local-try", start="2025-02-01", end="2025-02-03", mar=1)  # never committed
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=bench.root, check=True, capture_output=True, text=True)
    return head.stdout.strip()


def shown(bench: Bench) -> str:
    return display(bench.specs)


def test_reconcile_applies_what_is_committed_and_names_the_rest(bench: Bench) -> None:
    head = committed_bench(bench)
    result = bench.run()
    assert [(i.spec, o) for i, o in result.applied] == [("reviewed", "created")]
    (backfill,) = fake(bench).backfills.values()
    assert (backfill["to_date"][:10], backfill["max_active_runs"]) == ("2025-01-03", 1)  # the committed version
    specs = shown(bench)
    assert result.source is not None
    tail = (
        f"; reconcile applies what is committed at HEAD {head[:12]}: commit it, or pass --allow-dirty for a local "
        "experiment"
    )
    assert result.source.lines() == [
        f"not applied: {specs}/local-try.yaml (untracked){tail}",
        f"not applied: {specs}/reviewed.yaml (modified, not committed){tail}",
    ]
    (intent, _outcome) = bench.events("reviewed")
    assert (intent.entry.git_commit, intent.entry.spec_commit) == (head, head)
    assert [e.entry.spec_name for e in bench.events() if e.entry.spec_name] == ["reviewed", "reviewed"]


def test_allow_dirty_applies_the_working_tree_loudly_and_audited(bench: Bench) -> None:
    head = committed_bench(bench)
    reconciler = Reconciler(bench.settings(), bench.store, bench.client(), allow_dirty=True)
    first = reconciler.run_once()
    assert [(i.spec, i.kind.value) for i in first.plan.items] == [("reviewed", "create"), ("local-try", "wait")]
    (backfill,) = fake(bench).backfills.values()
    second = reconciler.run_once()  # the fake's scheduler moves with each call: local-try may be created now
    assert (backfill["to_date"][:10], backfill["max_active_runs"]) == ("2025-01-05", 2)  # the edited file
    assert first.source is not None
    assert first.source.lines() == [
        f"--allow-dirty: applying {shown(bench)}/local-try.yaml (untracked), which HEAD {head[:12]} does not hold",
        f"--allow-dirty: applying {shown(bench)}/reviewed.yaml (modified, not committed), which HEAD {head[:12]} "
        "does not hold",
    ]
    dirty = [e.entry for e in bench.store.events() if e.entry.outcome == "allow-dirty"]
    assert len(dirty) == 1  # once for the set of files, not once per pass
    assert second.source == first.source
    assert dirty[0].git_commit is None
    assert dirty[0].message == (
        f"--allow-dirty: applying spec files that differ from HEAD: {shown(bench)}/local-try.yaml (untracked), "
        f"{shown(bench)}/reviewed.yaml (modified, not committed)"
    )


def test_a_folder_outside_git_is_applied_as_it_is_with_a_warning(bench: Bench) -> None:
    bench.spec("plain")
    result = bench.run()
    assert [(i.spec, o) for i, o in result.applied] == [("plain", "created")]
    assert result.source is not None
    assert result.source.lines() == [
        "not in a git repository: the spec files are applied as they are on disk, unreviewed"
    ]


def test_specs_queue_behind_a_refused_head(bench: Bench) -> None:
    bench.spec("a-big", expected_runs=5)  # the dry run counts 7: refused, and it keeps its place
    bench.spec("b-next", start="2025-02-01", end="2025-02-03")
    result = bench.run()
    assert [(i.spec, i.kind.value, i.phase.value, i.reason) for i in result.plan.items] == [
        ("a-big", "refuse", "Blocked", "the dry run counts 7 runs; expected_runs is 5"),
        ("b-next", "wait", "Queued", "queued behind a-big"),
    ]
    assert mutating(fake(bench).requests) == []
    assert result.settled  # b-next waits on a-big, and a-big waits on a human
    assert result.stuck_lines() == [
        "b-next is queued behind a-big, which is Blocked: the dry run counts 7 runs; expected_runs is 5"
    ]


def test_specs_queue_behind_a_blocked_head(bench: Bench) -> None:
    bench.spec("a-bad", dag="demo_params", dag_run_conf="{region: mars}")
    bench.spec("b-next", dag="demo_params", start="2025-02-01", end="2025-02-03")
    result = bench.run()
    assert [(i.spec, i.kind.value, i.phase.value) for i in result.plan.items] == [
        ("a-bad", "blocked", "Blocked"),
        ("b-next", "wait", "Queued"),
    ]
    assert result.plan.items[1].reason == "queued behind a-bad"
    assert mutating(fake(bench).requests) == []


def test_every_finding_is_audited(bench: Bench) -> None:
    """DESIGN §4: drift, unmanaged and orphaned backfills are reported, and each finding is audited."""
    fake(bench).scheduler_running = False
    path = bench.spec("gone", mar=1, end="2025-01-20")
    bench.run()
    path.unlink()  # its backfill (#1) runs on: orphaned
    fake(bench)._create({"dag_id": "demo_hourly", "from_date": "2024-01-01", "to_date": "2024-01-02"})  # unmanaged #2
    bench.spec("waits", dag="demo_hourly")  # queued behind the unmanaged backfill
    bench.spec("drifted", dag="demo_tz", mar=1, end="2025-01-20")
    bench.run()
    fake(bench).backfills[3]["is_paused"] = True  # paused by hand
    result = bench.run()
    assert sorted((f.kind, f.backfill_id) for f in result.plan.findings) == [
        ("drift", 3),
        ("orphaned", 1),
        ("unmanaged", 2),
    ]
    messages = [e.entry.message for e in bench.events()]
    assert [f.message for f in result.plan.findings if f.message not in messages] == []


def test_after_its_changes_a_pass_reads_again_only_what_they_touched(bench: Bench) -> None:
    """A pass's reads do not grow with what it did not change: the re-observation after a pass's changes reads
    only the changed DAGs, with the infos already read; a create Airflow answered is neither listed nor read
    again: its answer is the new backfill, and its runs are the ones its dry run listed, queued."""
    bench.spec("steady", dag="demo_hourly", start="2025-01-01T00:00:00Z", end="2025-01-01T05:00:00Z")
    fake(bench).scheduler_running = False
    bench.run()
    bench.spec("new", dag="demo_flaky")
    before = len(fake(bench).requests)
    result = bench.run()
    assert [(i.spec, o) for i, o in result.applied] == [("new", "created")]
    assert count_calls(fake(bench).requests[before:]) == {
        "POST /auth/token": 1,
        "GET /api/v2/dags": 1,  # both DAGs' infos, once for the pass
        "GET /api/v2/backfills": 2,  # each DAG listed once: before the changes
        "GET /api/v2/dags/demo_hourly/dagRuns": 1,  # the unchanged DAG is not read again
        "GET /api/v2/dags/demo_flaky/details": 1,  # the listing has no rerun_with_latest_version: the create's
        "POST /api/v2/backfills/dry_run": 1,  # runs to create
        "POST /api/v2/backfills": 1,
        # one read of the range (runs in range counted: no second dry run; the queued or running runs Airflow
        # will skip, which the plan subtracts); the new backfill's runs are its dry run's dates, not read again
        "GET /api/v2/dags/demo_flaky/dagRuns": 1,
    }
    assert result.after is not None
    assert [(i.spec, i.phase.value, i.runs.counts if i.runs else None) for i in result.after.items] == [
        ("new", "Running", {"queued": 7}),
        ("steady", "Running", {"queued": 6}),
    ]


def test_after_a_lost_store_a_dags_finished_backfills_are_read_as_one_range(bench: Bench, tmp_path: Path) -> None:
    """Reads do not grow with the specs: adopting many finished specs reads each DAG's runs once over their
    whole range (1 call here instead of 6), and every spec ends with the phase it had before the store was lost."""
    for n in range(6):
        bench.spec(f"m{n}", dag="demo_flaky", start=f"2025-02-{3 * n + 1:02d}", end=f"2025-02-{3 * n + 3:02d}")
    for _ in range(40):
        result = bench.run()
        if all(phase in ("Succeeded", "CompletedWithFailures") for phase in bench.phases(result).values()):
            break
        fake(bench).tick()
    before_loss = bench.phases(result)
    assert len(before_loss) == 6
    bench.store.close()
    (tmp_path / "state.db").unlink()
    bench.store = type(bench.store)(bench.store_url)
    start = len(fake(bench).requests)
    result = bench.run()
    assert sorted((i.spec, o) for i, o in result.applied) == [(f"m{n}", "adopted") for n in range(6)]
    assert bench.phases(result) == before_loss
    assert count_calls(fake(bench).requests[start:])["GET /api/v2/dags/demo_flaky/dagRuns"] == 1


def test_an_unchanged_finished_spec_is_read_not_validated_again(bench: Bench) -> None:
    """Finished specs cost no validation per pass. So a policy tightened after a spec finished
    does not stop reconciling the others (`validate` in CI still reports the old file)."""
    bench.spec("old", mar=3)
    for _ in range(20):
        result = bench.run()
        if bench.phases(result)["old"] == "Succeeded":
            break
        fake(bench).tick()
    (bench.specs / "policy.yaml").write_text("version: 1\nmax_active_runs_limit: 1\n")
    bench.spec("new", dag="demo_flaky", mar=1)
    result = bench.run()
    assert [(i.spec, o) for i, o in result.applied] == [("new", "created")]
    (bench.specs / "old.yaml").write_text((bench.specs / "old.yaml").read_text() + "# edited\n")
    bench.spec("newer", dag="demo_hourly", mar=3)
    result = bench.run()  # an edited file is validated again: the newer policy judges only what it can change
    assert bench.phases(result)["old"] == "Succeeded"
    (newer,) = [i for i in result.plan.items if i.spec == "newer"]
    assert (newer.kind.value, newer.phase.value) == ("blocked", "Blocked")
    assert newer.reason == (
        f"invalid spec: {bench.specs / 'newer.yaml'}:7:18: $.max_active_runs: max_active_runs 3 is over the limit "
        "of 1 set by policy; fix the file (`backfillctl validate` lists every error)"
    )
    assert result.errors == [f"newer: {newer.reason}"]


def test_a_lost_stores_pass_over_a_dags_history_compares_each_spec_with_the_backfills_of_its_dates(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a lost store every spec is paired with its backfill: pairing by a scan of the DAG's whole history per
    spec (the plan, the runs to read, the owners) made the pass O(specs × backfills): minutes at 10,000."""
    from controller.core.plan import matching  # noqa: PLC0415 - the comparisons are counted where they are made

    days = [datetime(2024, 1, 1, tzinfo=UTC) + timedelta(days=n) for n in range(150)]
    for n, day in enumerate(days):
        bench.spec(f"h{n:03d}", start=day.date().isoformat(), end=day.date().isoformat(), mar=1)
        body = {"dag_id": "demo_daily", "from_date": format_utc(day), "to_date": format_utc(day)}
        fake(bench).create_orphan({**body, "reprocess_behavior": "none", "max_active_runs": 1})
        assert len(fake(bench).mark_complete()) == 1  # finished (no runs) before the next one is created
    compared: list[int] = []
    match = matching.matches_request
    monkeypatch.setattr(matching, "matches_request", lambda r, b: compared.append(b.id) or match(r, b))
    result = bench.run()
    assert [(i.spec, i.kind.value, o) for i, o in result.applied] == [
        (f"h{n:03d}", "adopt", "adopted") for n in range(150)
    ]
    assert len(fake(bench).backfills) == 150
    # four looks per spec at its own date's backfill (the runs to read, the owners, the walk for dry runs, the plan);
    # a scan of the history compared 67,650 pairs here
    assert len(compared) == 4 * 150
