"""A queued spec reconcile will refuse at the head looks the same in every view: `plan` judges afresh
(tests/commands/reconcile/test_lookahead_real.py); reconcile judges each spec version once and keeps it; `status`
(text and JSON) and the watch's status page say what it kept, with the time of its dry run, and make none of their
own."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from controller.commands.reconcile.lookahead import limit_of
from controller.commands.runtime import session
from controller.commands.verbs.status import status_view
from controller.core.model.binding import Ahead
from controller.core.model.policy import Policy, Rule
from tests.commands.reconcile.harness import Bench, fake
from tests.core.plan.test_plan import spec

QUEUED = "queued behind a-head (backfill #1)"
DRY_RUN = ("POST", "/api/v2/backfills/dry_run")


def refusal(at: str) -> str:
    return (
        f"the dry run counts 3 runs; expected_runs is 1 (dry run at {at}; the specs ahead may change the count by then)"
    )


def _queue(bench: Bench) -> None:
    bench.spec("a-head", start="2025-01-01", end="2025-01-03", reprocess="completed", mar=1, expected_runs=3)
    bench.run()  # a-head is created and runs (the fake's scheduler is off)
    bench.spec("b-behind", start="2025-01-10", end="2025-01-12", reprocess="completed", mar=1, expected_runs=1)


def _dry_runs(bench: Bench, since: int) -> int:
    return fake(bench).requests[since:].count(DRY_RUN)


def test_status_says_what_reconcile_kept_and_makes_no_dry_run(bench: Bench, monkeypatch: pytest.MonkeyPatch) -> None:
    fake(bench).scheduler_running = False
    _queue(bench)
    monkeypatch.setattr(session, "make_client", lambda _settings, **_kw: bench.client())
    before = len(fake(bench).requests)
    (row,) = [r for r in status_view(bench.settings(), datetime.now(UTC)).rows if r.spec == "b-behind"]
    assert (row.phase, row.note, row.refused_at_head, _dry_runs(bench, before)) == ("Queued", QUEUED, None, 0)
    bench.run()  # reconcile judges b-behind once, and keeps it
    ahead = bench.store.bindings()["b-behind"].ahead
    assert ahead is not None
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", ahead.at)
    assert (ahead.runs_to_create, ahead.runs_in_range, ahead.sub_ranges) == (3, 3, None)
    before = len(fake(bench).requests)
    view = status_view(bench.settings(), datetime.now(UTC))
    (row,) = [r for r in view.rows if r.spec == "b-behind"]
    why = refusal(ahead.at)
    assert (row.phase, row.note, row.refused_at_head) == (
        "Queued",
        f"{QUEUED}; reconcile will refuse it at the head: {why}",
        why,
    )
    assert row.as_json()["refused_at_head"] == why
    assert _dry_runs(bench, before) == 0
    (head,) = [r for r in view.rows if r.spec == "a-head"]
    assert head.refused_at_head is None


def test_reconcile_judges_each_spec_version_once(bench: Bench) -> None:
    fake(bench).scheduler_running = False
    _queue(bench)
    dry_runs = []
    for _ in range(3):  # a process each time, as `reconcile --once` from a schedule: what is kept is in the store
        before = len(fake(bench).requests)
        result = bench.reconciler().run_once()
        dry_runs.append(_dry_runs(bench, before))
        (item,) = [i for i in result.current.items if i.spec == "b-behind"]
        at = bench.store.bindings()["b-behind"].ahead.at  # type: ignore[union-attr]
        assert (item.phase.value, item.refused_at_head) == ("Queued", refusal(at))
    assert dry_runs == [1, 0, 0]
    first = bench.store.bindings()["b-behind"].ahead.digest  # type: ignore[union-attr]
    bench.spec("b-behind", start="2025-01-10", end="2025-01-12", reprocess="completed", mar=1, expected_runs=3)
    before = len(fake(bench).requests)
    (item,) = [i for i in bench.reconciler().run_once().current.items if i.spec == "b-behind"]
    assert (item.reason, item.refused_at_head, _dry_runs(bench, before)) == (QUEUED, None, 1)  # a new version
    kept = bench.store.bindings()["b-behind"].ahead
    assert kept is not None
    assert (kept.digest != first, kept.runs_to_create) == (True, 3)  # the new version's dry run replaces the old


def test_the_limit_is_the_policy_of_now_and_a_selection_counts_its_sub_ranges() -> None:
    """A kept dry run is judged by the policy of the moment (a tightened max_runs is said without a new dry run),
    and a `select` spec by its selected intervals and its sub-ranges, as at the head."""
    counted = Ahead("sha256:ab", "2026-12-06T12:00:00Z", 3, 4)
    queued = spec(expected_runs=3)
    assert limit_of(counted, queued, Policy()) is None
    tight = Policy(rules=(Rule(dags=("*",), max_runs=2),))
    assert limit_of(counted, queued, tight) == "the dry run counts 3 runs; the policy allows at most 2 for *"
    assert limit_of(Ahead("sha256:ab", "2026-12-06T12:00:00Z"), queued, tight) is None  # its count not known
    selected = Ahead("sha256:cd", "2026-12-06T12:00:00Z", 2, 7, 2)
    one_range = Policy(rules=(Rule(dags=("*",), max_backfills=1),))
    assert limit_of(selected, spec(expected_runs=2), one_range) == (
        "select makes 2 backfills (contiguous sub-ranges of the 2 selected intervals); the policy allows at most 1 "
        "(max_backfills): narrow the range, or raise max_backfills in a reviewed policy change"
    )
    assert limit_of(selected, spec(expected_runs=2), Policy()) is None  # 2 selected of 7 in range: within
    assert limit_of(selected, spec(expected_runs=1), Policy()) == "the dry run counts 2 runs; expected_runs is 1"
    joinable = Ahead("sha256:ef", "2026-12-06T12:00:00Z", 2, 7, 2, mergeable=1)
    merging = Policy(rules=(Rule(dags=("*",), max_backfills=1, merge_sub_ranges=True),))
    assert limit_of(joinable, spec(expected_runs=2), merging) is None  # the head joins the two sub-ranges
    assert limit_of(joinable, spec(expected_runs=2), one_range) is not None  # without merge_sub_ranges: refused
    held = Ahead("sha256:ef", "2026-12-06T12:00:00Z", 3, 9, 3, mergeable=1)  # one gap holds a run in flight
    assert limit_of(held, spec(expected_runs=3), merging) == (
        "select makes 3 backfills (contiguous sub-ranges of the 3 selected intervals); the policy allows at most 1 "
        "(max_backfills): narrow the range, or raise max_backfills in a reviewed policy change"
    )
    assert Ahead.from_json(joinable.as_json()) == joinable
    assert "mergeable" not in selected.as_json()


def test_a_policy_tightened_after_the_dry_run_is_said_by_status_without_a_new_one(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake(bench).scheduler_running = False
    bench.spec("a-head", start="2025-01-01", end="2025-01-03", reprocess="completed", mar=1, expected_runs=3)
    bench.run()
    bench.spec("b-behind", start="2025-01-10", end="2025-01-12", reprocess="completed", mar=1)
    bench.run()  # b-behind's dry run counts 3 runs: within every limit (none), kept
    ahead = bench.store.bindings()["b-behind"].ahead
    assert ahead is not None
    assert ahead.runs_to_create == 3
    bench.policy("version: 1\nrequire_reviewed_merge: false\nrules:\n  - dags: ['*']\n    max_runs: 2\n")
    monkeypatch.setattr(session, "make_client", lambda _settings, **_kw: bench.client())
    before = len(fake(bench).requests)
    (row,) = [r for r in status_view(bench.settings(), datetime.now(UTC)).rows if r.spec == "b-behind"]
    assert row.refused_at_head == (
        f"the dry run counts 3 runs; the policy allows at most 2 for * (dry run at {ahead.at}; the specs ahead may "
        "change the count by then)"
    )
    assert _dry_runs(bench, before) == 0


def test_a_failed_look_ahead_is_kept_and_tried_again_after_ten_minutes_not_every_pass(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake(bench).scheduler_running = False
    _queue(bench)
    fake(bench).fault("POST", DRY_RUN[1], lambda _r: httpx.Response(400, json={"detail": "Bad request"}))
    start = datetime.now(UTC).replace(microsecond=0)
    dry_runs, reasons = [], []
    for minutes in (0, 1, 9, 10):  # `reconcile --once` from a schedule, minutes after the first
        reconciler = bench.reconciler()
        reconciler.clock = lambda m=minutes: start + timedelta(minutes=m)  # type: ignore[misc]
        before = len(fake(bench).requests)
        (item,) = [i for i in reconciler.run_once().current.items if i.spec == "b-behind"]
        dry_runs.append(_dry_runs(bench, before))
        reasons.append(item.reason)
    assert dry_runs == [1, 0, 0, 1]
    at = start.strftime("%Y-%m-%dT%H:%M:%SZ")
    failed = f"{QUEUED}; its look-ahead dry run at {at} failed (tried again 10 min after it): Bad request"
    assert reasons[:3] == [failed] * 3
    later = start + timedelta(minutes=10)
    assert (
        reasons[3] == f"{QUEUED}; reconcile will refuse it at the head: {refusal(later.strftime('%Y-%m-%dT%H:%M:%SZ'))}"
    )
    ahead = bench.store.bindings()["b-behind"].ahead
    assert ahead is not None
    assert (ahead.failed, ahead.runs_to_create) == ("", 3)


def test_status_says_a_kept_failed_look_ahead_without_a_dry_run(bench: Bench, monkeypatch: pytest.MonkeyPatch) -> None:
    fake(bench).scheduler_running = False
    _queue(bench)
    fake(bench).fault("POST", DRY_RUN[1], lambda _r: httpx.Response(400, json={"detail": "Bad request"}))
    bench.run()
    ahead = bench.store.bindings()["b-behind"].ahead
    assert ahead is not None
    assert ahead.failed == "Bad request"
    assert Ahead.from_json(ahead.as_json()) == ahead
    monkeypatch.setattr(session, "make_client", lambda _settings, **_kw: bench.client())
    before = len(fake(bench).requests)
    (row,) = [r for r in status_view(bench.settings(), datetime.now(UTC)).rows if r.spec == "b-behind"]
    assert row.note == (
        f"{QUEUED}; its look-ahead dry run at {ahead.at} failed (tried again 10 min after it): {ahead.failed}"
    )
    assert (row.refused_at_head, _dry_runs(bench, before)) == (None, 0)


def test_offline_status_says_the_kept_judgement_by_the_policy_of_now(bench: Bench) -> None:
    fake(bench).scheduler_running = False
    _queue(bench)
    bench.run()
    at = bench.store.bindings()["b-behind"].ahead.at  # type: ignore[union-attr]
    offline = replace(bench.settings(), airflow_url=None)
    view = status_view(offline, datetime.now(UTC))
    (row,) = [r for r in view.rows if r.spec == "b-behind"]
    assert view.offline is True
    assert row.note.endswith(f") {QUEUED}; reconcile will refuse it at the head: {refusal(at)}"), row.note
    assert row.refused_at_head == refusal(at)
    assert row.as_json()["refused_at_head"] == refusal(at)
    bench.spec("b-behind", start="2025-01-10", end="2025-01-12", reprocess="completed", mar=1, expected_runs=9)
    (edited,) = [r for r in status_view(offline, datetime.now(UTC)).rows if r.spec == "b-behind"]
    assert (edited.note.endswith(f") {QUEUED}"), edited.refused_at_head) == (True, None)  # another version: not judged
