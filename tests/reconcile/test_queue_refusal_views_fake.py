"""A queued spec reconcile will refuse at the head looks the same in every view: `plan` judges afresh (tests/reconcile/
test_lookahead_real.py); reconcile judges each spec version once and keeps it; `status` (text and JSON) and the watch's
status page say what it kept, with the time of its dry run, and make none of their own."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest

from controller.commands.runtime import session
from controller.commands.verbs.status import status_view
from tests.reconcile.harness import Bench, fake

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
    assert (ahead.limit, ahead.runs_to_create, ahead.runs_in_range) == (
        "the dry run counts 3 runs; expected_runs is 1",
        3,
        3,
    )
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
    assert (kept.digest != first, kept.limit) == (True, None)  # the new version's judgement replaces the old
