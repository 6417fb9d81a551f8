"""`new --retry-failed-of` (pure): the follow-up says when the runs it retries never started (a cancel)."""

from __future__ import annotations

from controller.core.model.airflow import RunSummary
from controller.core.model.binding import Binding, Phase
from controller.core.rules.follow_up import retry_of
from tests.core.plan.test_plan import JAN1, spec


def test_a_retry_of_a_cancelled_spec_says_its_failed_runs_never_started() -> None:
    cancelled = Binding("s", "d", 4, Phase.CANCELLED, runs=RunSummary({"success": 2, "failed": 5}, never_started=5))
    retry = retry_of(spec(), cancelled)
    assert (retry.failed, retry.never_started, retry.whole_range) == (5, 5, True)
    assert retry.text() == (
        "retries the 5 failed run(s) of s; 5 of them never started: s was cancelled while they were queued (Airflow "
        "marks them failed), so they re-run work that never ran, not a failure"
    )
    failed = Binding("s", "d", 4, Phase.COMPLETED_WITH_FAILURES, runs=RunSummary({"failed": 1}, (JAN1,)))
    assert retry_of(spec(), failed).text() == "retries the 1 failed run(s) of s"
