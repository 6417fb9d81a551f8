"""Bad days: one broken file never stops a pause or a stop; an edited spec is never "in sync"; an invalid policy
holds what starts work and nothing else (fake Airflow, SQLite store)."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from controller.adapters.monitor import Health
from controller.adapters.ping import ping
from controller.commands.loop import passhooks
from controller.commands.loop.passhooks import MonitorOptions, PassHooks
from controller.commands.runtime import session
from controller.commands.verbs.status import report_document, status_view
from controller.commands.verbs.stop import BREAK_GLASS, lift_with_settings, stop_with_settings
from controller.core.model.guards import Guard, GuardKind
from controller.core.model.oidc import GITHUB_ISSUER
from controller.core.model.secret import Secret
from controller.core.model.spec import format_utc
from controller.core.model.stops import EVERYTHING, EmergencyStopKind, StopSource
from controller.errors import Refused, StoreError
from tests.commands.reconcile.harness import Bench, fake, mutating
from tests.commands.reconcile.test_spec_index_git import commit, git
from tests.fakes.airflow import FakeAirflow
from tests.support.oidc_issuer import REPOSITORY, WORKFLOW, claims, rsa_key, token

TYPO = "dagid: demo_daily\n"  # a typo'd key: the schema refuses the whole file
LONG = "2025-03-31"  # 90 daily runs, one at a time: still running after a few passes


@pytest.fixture
def bench(tmp_path: Path) -> Bench:
    b = Bench(tmp_path, fake=FakeAirflow())
    yield b  # type: ignore[misc]
    b.close()


def started(bench: Bench, *names_dags: tuple[str, str]) -> None:
    for name, dag in names_dags:
        bench.spec(name, dag=dag, end=LONG, mar=1)
    result = bench.run()
    assert sorted(i.spec for i, o in result.applied if o == "created") == sorted(n for n, _ in names_dags)
    fake(bench).tick()


def items(bench: Bench) -> dict[str, tuple[str, str]]:
    return {i.spec: (i.kind.value, i.phase.value) for i in bench.run().plan.items}


def test_a_typo_beside_a_merged_pause_and_a_cli_stop_blocks_only_itself(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session, "make_client", lambda _settings, **_kw: bench.client())
    started(bench, ("a", "demo_daily"), ("b", "demo_tz"))
    path = bench.spec("typo", dag="demo_flaky")
    path.write_text(path.read_text() + TYPO)
    bench.spec("a", dag="demo_daily", end=LONG, mar=1, state="paused")
    fake(bench).requests.clear()
    result = bench.run()
    (typo,) = [i for i in result.plan.items if i.spec == "typo"]
    assert (typo.kind.value, typo.phase.value, typo.error, typo.dag_id) == ("blocked", "Blocked", True, "demo_flaky")
    assert typo.reason == (
        f"invalid spec: {path}:12:1: $.dagid: unknown field 'dagid'; fix the file "
        "(`backfillctl validate` lists every error)"
    )
    assert [(i.spec, o) for i, o in result.applied] == [("a", "done")]
    assert mutating(fake(bench).requests) == [("PUT", "/api/v2/backfills/1/pause")]
    assert result.errors == [f"typo: {typo.reason}"]  # the pass still says something is wrong (exit 1)
    stop = stop_with_settings(bench.settings(), EmergencyStopKind.SPEC, "b", "warehouse at 95%", StopSource.CLI, None)
    assert stop.paused == (("b", 2),)
    assert fake(bench).backfills[2]["is_paused"] is True
    assert [e.entry.outcome for e in bench.events("typo")] == ["invalid-spec"]
    bench.run()
    assert [e.entry.outcome for e in bench.events("typo")] == ["invalid-spec"]  # audited once, not every pass


def test_an_invalid_policy_holds_creates_and_resumes_but_pauses_go_through(bench: Bench) -> None:
    started(bench, ("a", "demo_daily"), ("b", "demo_tz"))
    bench.spec("b", dag="demo_tz", end=LONG, mar=1, state="paused")
    bench.run()  # b paused by its spec
    bench.policy("version: 1\nmax_active_runs_limit: many\n")
    bench.spec("a", dag="demo_daily", end=LONG, mar=1, state="paused")
    bench.spec("b", dag="demo_tz", end=LONG, mar=1)  # active again: a resume, held
    bench.spec("c", dag="demo_flaky", mar=1)  # new: a create, held
    fake(bench).requests.clear()
    result = bench.run()
    assert [(i.spec, o) for i, o in result.applied] == [("a", "done")]
    assert mutating(fake(bench).requests) == [("PUT", "/api/v2/backfills/1/pause")]
    held = {i.spec: i for i in result.plan.items if i.spec in ("b", "c")}
    assert {n: (i.kind.value, i.phase.value, i.error) for n, i in held.items()} == {
        "b": ("blocked", "Paused", True),  # its resume is held: it stays paused
        "c": ("blocked", "Blocked", True),  # its create is held
    }
    for item in held.values():
        assert item.reason.startswith(f"held: {bench.specs / 'policy.yaml'} is invalid (")
        assert item.reason.endswith("); nothing new starts until it is fixed")
    (finding,) = [f for f in result.plan.findings if f.kind == "invalid-policy"]
    assert "max_active_runs_limit" in finding.message
    bench.policy("version: 1\n")
    result = bench.run()
    assert sorted((i.spec, i.kind.value, o) for i, o in result.applied) == [
        ("b", "unpause", "done"),
        ("c", "create", "created"),
    ]


def finish(bench: Bench, name: str) -> None:
    for _ in range(20):
        if bench.phases(bench.run())[name] == "Succeeded":
            return
        fake(bench).tick()
    raise AssertionError(f"{name} did not finish")


def test_a_spec_edited_in_place_is_blocked_finished_or_running_and_nothing_more_is_created(bench: Bench) -> None:
    bench.spec("done", dag="demo_daily", end="2025-01-02", mar=2)
    finish(bench, "done")
    bench.spec("live", dag="demo_hourly", end="2025-01-03", mar=1)
    bench.run()
    fake(bench).tick()
    bench.spec("done", dag="demo_daily", end="2025-01-09", mar=2)
    bench.spec("live", dag="demo_hourly", end="2025-01-05", mar=1)
    fake(bench).requests.clear()
    result = bench.run()
    shown = {i.spec: i for i in result.plan.items}
    for name, before, after in (("done", "2025-01-02", "2025-01-09"), ("live", "2025-01-03", "2025-01-05")):
        item = shown[name]
        assert (item.kind.value, item.phase.value, item.error) == ("blocked", "Blocked", True)
        assert item.reason.startswith(
            f"edited in place by the working tree: to_date '{before}T00:00:00Z' → '{after}T00:00:00Z'; nothing "
            "more is created for it"
        )
    assert (shown["done"].true_phase.value, shown["live"].true_phase.value) == ("Succeeded", "Running")
    assert mutating(fake(bench).requests) == []
    assert bench.store.binding("done").phase.value == "Succeeded"  # the record keeps what ran
    assert bench.store.binding("done").applied.identity["to_date"] == "2025-01-02T00:00:00Z"
    kinds = [e.entry.outcome for e in bench.events() if e.entry.action == "finding"]
    assert kinds.count("edited-in-place") == 2
    for _ in range(12):  # the running backfill finishes as approved; its outcome is recorded, still no create
        fake(bench).tick()
        bench.run()
    assert bench.store.binding("live").phase.value == "Succeeded"
    assert mutating(fake(bench).requests) == []
    kinds = [e.entry.outcome for e in bench.events() if e.entry.action == "finding"]
    assert kinds.count("edited-in-place") == 2  # audited once each
    bench.spec("done", dag="demo_daily", end="2025-01-02", mar=2)  # reverted: in sync again
    assert items(bench)["done"] == ("noop", "Succeeded")


def test_a_spec_state_paused_in_an_edited_file_still_pauses(bench: Bench) -> None:
    bench.spec("live", dag="demo_hourly", end="2025-01-03", mar=1)
    bench.run()
    bench.spec("live", dag="demo_hourly", end="2025-01-05", mar=1, state="paused")
    result = bench.run()
    assert [(i.spec, o) for i, o in result.applied] == [("live", "done")]
    (finding,) = [f for f in result.plan.findings if f.kind == "edited-in-place"]
    assert finding.spec == "live"
    assert fake(bench).backfills[1]["is_paused"] is True


def test_a_direct_commit_widening_a_finished_and_a_running_spec_blocks_both_and_the_record_keeps_what_ran(
    tmp_path: Path,
) -> None:
    """Branch protection let a direct push through: reconcile compares each spec with what was applied."""
    bench = Bench(tmp_path, fake=FakeAirflow())
    (tmp_path / ".gitignore").write_text("state.db*\n")
    git(tmp_path, "init", "-q", "-b", "main")
    try:
        bench.spec("done", dag="demo_daily", end="2025-01-02", mar=2)
        commit(bench, "done")
        finish(bench, "done")
        bench.spec("live", dag="demo_tz", end=LONG, mar=1)
        commit(bench, "live")
        bench.run()
        bench.spec("done", dag="demo_daily", end="2025-01-09", mar=2)
        bench.spec("live", dag="demo_tz", end="2025-04-30", mar=1)
        commit(bench, "widen both, pushed straight to main")
        sha = git(tmp_path, "rev-parse", "HEAD")[:12]
        result = bench.run()
        shown = {i.spec: i for i in result.plan.items}
        assert {n: (shown[n].kind.value, shown[n].phase.value) for n in ("done", "live")} == {
            "done": ("blocked", "Blocked"),
            "live": ("blocked", "Blocked"),
        }
        assert shown["done"].reason.startswith(
            f"edited in place by commit {sha}: to_date '2025-01-02T00:00:00Z' → '2025-01-09T00:00:00Z' (applied at "
        )
        record = report_document(bench.settings(), "done", datetime.now(UTC))
        assert (format_utc(record.spec.from_date), format_utc(record.spec.to_date)) == (
            "2025-01-01T00:00:00Z",
            "2025-01-02T00:00:00Z",
        )
        assert record.outcome.value == "Succeeded"
        assert record.edited is not None
        assert record.edited.startswith(f"edited in place by commit {sha}: to_date")
        assert record.as_json()["to_date"] == "2025-01-02T00:00:00Z"
    finally:
        bench.close()


def test_status_online_and_offline_shows_the_invalid_file_and_the_edit_blocked(bench: Bench) -> None:
    started(bench, ("a", "demo_daily"))
    path = bench.spec("typo", dag="demo_flaky")
    path.write_text(path.read_text() + TYPO)
    bench.spec("a", dag="demo_daily", end="2025-04-30", mar=1)
    now = datetime(2026, 12, 6, tzinfo=UTC)
    offline = status_view(replace(bench.settings(), airflow_url=None), now)
    online_plan = bench.run(dry_run=True).plan
    rows = {r.spec: (r.phase, r.backfill_id, r.note) for r in offline.rows}
    assert offline.incomplete  # exit 1: something is wrong
    assert rows["typo"] == (
        "Blocked",
        None,
        f"invalid spec: {path}:12:1: $.dagid: unknown field 'dagid'; fix the file (`backfillctl validate` lists "
        "every error)",
    )
    assert rows["a"][:2] == ("Blocked", 1)
    assert rows["a"][2].startswith("edited in place by the working tree: to_date '2025-03-31T00:00:00Z' → ")
    online = {i.spec: (i.phase.value, i.backfill_id, i.reason) for i in online_plan.items}
    assert online == rows  # the two views agree


def test_stop_all_pauses_every_managed_backfill_at_once_with_one_stop_record(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session, "make_client", lambda _settings, **_kw: bench.client())
    started(bench, ("a", "demo_daily"), ("b", "demo_tz"))
    path = bench.spec("a", dag="demo_daily", end=LONG, mar=1)
    path.write_text(path.read_text() + TYPO)  # its file broke after it was applied: it is still stopped
    result = stop_with_settings(
        bench.settings(), EmergencyStopKind.ALL, EVERYTHING, "incident 42: warehouse on fire", StopSource.CLI, None
    )
    assert result.paused == (("a", 1), ("b", 2))
    assert [fake(bench).backfills[i]["is_paused"] for i in (1, 2)] == [True, True]
    stops = [e for e in bench.events() if e.entry.action == "stop"]
    assert [e.entry.message for e in stops] == [
        "stop #1 of all everything by ci-bot (cli): incident 42: warehouse on fire"
    ]
    bench.spec("c", dag="demo_flaky", mar=1)
    fake(bench).requests.clear()
    plan = bench.run().plan
    assert mutating(fake(bench).requests) == []  # nothing is created or unpaused while it holds
    (c,) = [i for i in plan.items if i.spec == "c"]
    assert (c.phase.value, c.reason) == (
        "Paused",
        "stop #1: stopped by ci-bot (cli): incident 42: warehouse on fire",
    )


def test_an_oncall_login_stops_through_the_workflow_and_cannot_lift(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(session, "make_client", lambda _settings, **_kw: bench.client())
    bench.policy(
        f"""\
        version: 1
        oncall: [Pager-Bob]
        downstream:
          warehouse: {{max_active_runs: 8, owners: [wh-owner]}}
        stop_workflow: {{repository: {REPOSITORY}, workflow: {WORKFLOW}}}
        """
    )
    started(bench, ("a", "demo_daily"))  # the pass records the policy: the workflow's proof is judged by it
    bench.spec("a", dag="demo_daily", end=LONG, mar=1, downstream="[warehouse]")
    key = rsa_key("github-1")
    keys = {"keys": [key.jwk()]}

    def run_by(login: str) -> Any:
        body = claims(GITHUB_ISSUER, at=int(time.time()), actor=login, triggering_actor=login)
        return replace(bench.settings(), actor="whoever-the-env-says", oidc_token=Secret(token(key, body)))

    pager = run_by("pager-bob")
    result = stop_with_settings(
        pager, EmergencyStopKind.DOWNSTREAM, "warehouse", "load", StopSource.WORKFLOW, None, lambda _issuer: keys
    )
    assert result.paused == (("a", 1),)
    assert (result.stop.actor, result.stop.source, result.unproven) == ("pager-bob", StopSource.WORKFLOW, None)
    with pytest.raises(Refused) as refused:
        lift_with_settings(replace(pager, actor="pager-bob"), "warehouse", "all good")
    assert refused.value.message == "lift stop #1: only wh-owner may; the actor is pager-bob"
    with pytest.raises(Refused) as refused:
        stop_with_settings(
            run_by("mallory"),
            EmergencyStopKind.DOWNSTREAM,
            "warehouse",
            "x",
            StopSource.WORKFLOW,
            None,
            lambda _issuer: keys,
        )
    assert refused.value.message == "stop downstream warehouse: only wh-owner, pager-bob may; the actor is mallory"
    lifted = lift_with_settings(replace(bench.settings(), actor="WH-Owner"), "warehouse", "all good")
    assert lifted.id == 1


def test_a_hand_pause_during_a_store_outage_holds_after_recovery(bench: Bench, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(session, "make_client", lambda _settings, **_kw: bench.client())
    started(bench, ("a", "demo_daily"))
    down = replace(bench.settings(), store_url="postgresql://backfillctl@127.0.0.1:1/state")
    with pytest.raises(StoreError) as failed:
        stop_with_settings(down, EmergencyStopKind.SPEC, "a", "warehouse at 95%", StopSource.CLI, None)
    assert failed.value.hint == BREAK_GLASS
    assert fake(bench).backfills[1]["is_paused"] is False  # nothing was paused without a record
    fake(bench).backfills[1]["is_paused"] = True  # the break-glass step: paused by hand in Airflow
    fake(bench).requests.clear()
    for _ in range(3):  # the store is back: the pass records the pause as a stop made by hand, and keeps it
        plan = bench.run().plan
        fake(bench).tick()
    (a,) = plan.items
    assert (a.kind.value, a.phase.value, a.guard) == ("noop", "Paused", Guard(GuardKind.STOP))
    assert a.reason.startswith("paused by hand in Airflow (who: not recorded) at ")
    assert mutating(fake(bench).requests) == []
    assert fake(bench).backfills[1]["is_paused"] is True


def test_the_dead_mans_check_in_status_and_healthz_and_the_ping_after_a_good_pass(bench: Bench) -> None:
    bench.policy("version: 1\nliveness: {expect_every: 15m}\n")
    bench.spec("a", dag="demo_daily", mar=1)
    bench.run()
    last = bench.store.last_reconciled()
    assert last is not None
    offline = replace(bench.settings(), airflow_url=None)
    fresh = status_view(offline, last.last_pass_at + timedelta(minutes=30))
    assert fresh.liveness is not None
    assert fresh.liveness.warning() is None
    late = status_view(offline, last.last_pass_at + timedelta(minutes=31))
    assert late.liveness is not None
    warning = late.liveness.warning()
    assert warning is not None
    assert warning.startswith("the last good reconcile pass was 31m ago (")
    tighter = status_view(offline, last.last_pass_at + timedelta(minutes=11), expect_every=timedelta(minutes=5))
    assert tighter.liveness is not None
    assert tighter.liveness.overdue  # --expect-every overrides the policy


def test_healthz_is_unhealthy_when_no_good_pass_came_for_two_intervals() -> None:
    now = [datetime(2026, 12, 6, 12, tzinfo=UTC)]
    health = Health(expect_every=timedelta(minutes=1), clock=lambda: now[0])
    health.record(True)
    now[0] += timedelta(minutes=2)
    assert health.state() == (True, "ok")
    now[0] += timedelta(seconds=1)
    ok, text = health.state()
    assert not ok
    assert text.startswith("unhealthy: the last good reconcile pass was 2m ago (2026-12-06T12:00:00Z)")
    health.record(False, "Airflow down")  # a failed pass is no good pass
    assert health.state()[0] is False
    health.record(True)
    assert health.state() == (True, "ok")


def test_the_ping_is_a_get_whose_errors_never_name_the_secret_url() -> None:
    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path}")
        return httpx.Response(200 if request.url.path.endswith("/ok") else 503)

    transport = httpx.MockTransport(handler)
    assert ping("https://hc-ping.example/SECRET-uuid/ok", transport=transport) is None
    failed = ping("https://hc-ping.example/SECRET-uuid/down", transport=transport)
    assert failed == "the ping answered HTTP 503"
    assert seen == ["GET /SECRET-uuid/ok", "GET /SECRET-uuid/down"]

    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError(f"cannot connect to {request.url}")

    assert ping("https://hc-ping.example/SECRET-uuid", transport=httpx.MockTransport(refuse)) == (
        "the ping failed: ConnectError"
    )


def test_the_pass_hooks_ping_after_each_good_pass_and_warn_without_the_url(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    pinged: list[str] = []
    monkeypatch.setattr(passhooks, "ping", lambda url: pinged.append(url) or "the ping answered HTTP 503")
    bench.policy("version: 1\nliveness: {expect_every: 15m, ping_url_env: BACKFILLCTL_PING_URL}\n")
    bench.spec("a", dag="demo_daily", mar=1)
    env = {"BACKFILLCTL_PING_URL": "https://hc-ping.example/SECRET-uuid"}
    with PassHooks(bench.settings(), MonitorOptions(), deliver=True, env=env) as hooks:
        reconciler = bench.reconciler()
        with hooks.around(reconciler) as after:
            after(reconciler.run_once())
        assert hooks.health.expect_every == timedelta(minutes=15)
    assert pinged == ["https://hc-ping.example/SECRET-uuid"]
    assert "dead-man's ping (BACKFILLCTL_PING_URL): the ping answered HTTP 503" in caplog.text
    assert "SECRET" not in caplog.text


def test_an_invalid_file_notifies_once_naming_the_file(bench: Bench) -> None:
    bench.policy(
        """\
        version: 1
        notify:
          receivers: {team: {webhook_env: BACKFILLCTL_WEBHOOK_TEAM, format: json}}
          default_receivers: [team]
        """
    )
    path = bench.spec("typo", dag="demo_flaky")
    path.write_text(path.read_text() + TYPO)
    bench.run()
    bench.run()
    (row,) = bench.store.undelivered_notifications()
    assert (row.receiver, row.event, row.spec) == ("team", "invalid", "typo")
    (finding,) = [e for e in bench.events() if e.seq == row.audit_seq]
    assert finding.entry.message is not None
    assert finding.entry.message.startswith(f"{path}: invalid spec: {path}:12:1: $.dagid: unknown field 'dagid'")
