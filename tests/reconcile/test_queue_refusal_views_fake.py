"""A queued spec reconcile will refuse at the head looks the same in every view: `plan` (tests/reconcile/
test_lookahead_real.py), `status` (text and JSON), and the watch's status page, which dry-runs each spec version
once a process, not once a pass."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from controller.commands import session
from controller.commands.status import status_view
from tests.reconcile.harness import Bench, fake

WHY = (
    "queued behind a-head (backfill #1); reconcile will refuse it at the head: the dry run counts 3 runs; "
    "expected_runs is 1 (dry run now; the specs ahead may change the count by then)"
)
REFUSAL = "the dry run counts 3 runs; expected_runs is 1 (dry run now; the specs ahead may change the count by then)"


def _queue(bench: Bench) -> None:
    bench.spec("a-head", start="2025-01-01", end="2025-01-03", reprocess="completed", mar=1, expected_runs=3)
    bench.run()  # a-head is created and runs (the fake's scheduler is off)
    bench.spec("b-behind", start="2025-01-10", end="2025-01-12", reprocess="completed", mar=1, expected_runs=1)


def test_status_says_a_queued_spec_will_be_refused_at_the_head(bench: Bench, monkeypatch: pytest.MonkeyPatch) -> None:
    fake(bench).scheduler_running = False
    _queue(bench)
    monkeypatch.setattr(session, "make_client", lambda _settings, **_kw: bench.client())
    view = status_view(bench.settings(), datetime.now(UTC))
    (row,) = [r for r in view.rows if r.spec == "b-behind"]
    assert (row.phase, row.note, row.refused_at_head) == ("Queued", WHY, REFUSAL)
    assert row.as_json()["refused_at_head"] == REFUSAL
    (head,) = [r for r in view.rows if r.spec == "a-head"]
    assert head.refused_at_head is None


def test_the_watch_page_says_it_with_one_dry_run_a_spec_version(bench: Bench) -> None:
    fake(bench).scheduler_running = False
    _queue(bench)
    reconciler = bench.reconciler()
    reconciler.ahead = {}  # as the watch sets it when it serves the page
    dry_runs = []
    for _ in range(3):
        before = len(fake(bench).requests)
        result = reconciler.run_once()
        dry_runs.append(fake(bench).requests[before:].count(("POST", "/api/v2/backfills/dry_run")))
        (item,) = [i for i in result.current.items if i.spec == "b-behind"]
        assert (item.phase.value, item.reason, item.refused_at_head) == ("Queued", WHY, REFUSAL)
    assert dry_runs == [1, 0, 0]
    bench.spec("b-behind", start="2025-01-10", end="2025-01-12", reprocess="completed", mar=1, expected_runs=3)
    (item,) = [i for i in reconciler.run_once().current.items if i.spec == "b-behind"]
    assert (item.reason, item.refused_at_head) == (
        "queued behind a-head (backfill #1)",
        None,
    )  # a new version, judged again


def test_a_pass_without_the_page_dry_runs_no_queue(bench: Bench) -> None:
    fake(bench).scheduler_running = False
    _queue(bench)
    before = len(fake(bench).requests)
    (item,) = [i for i in bench.run().current.items if i.spec == "b-behind"]
    assert fake(bench).requests[before:].count(("POST", "/api/v2/backfills/dry_run")) == 0
    assert (item.reason, item.refused_at_head) == ("queued behind a-head (backfill #1)", None)
