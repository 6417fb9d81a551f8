"""Stuck detection is a step of the pass, before its final record: the same finding, at the same place in the log,
whether the pass runs under `--watch`, `--once` or a test's harness."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from controller.core.audit.vocabulary import Action, Outcome
from tests.commands.reconcile.harness import Bench
from tests.fakes.airflow import FakeAirflow

STUCK_POLICY = """\
version: 1
notify:
  receivers:
    team: {webhook_env: BACKFILLCTL_WEBHOOK_TEAM, format: json}
  stuck_after_minutes: 1
"""


def test_a_stuck_backfill_is_recorded_inside_the_pass_before_its_final_record(tmp_path: Path) -> None:
    created_at = datetime.now(UTC).replace(microsecond=0) - timedelta(
        minutes=10
    )  # its runs were queued ten minutes ago
    airflow = FakeAirflow(now=lambda: created_at)
    airflow.scheduler_running = False  # nothing starts: the runs stay queued
    airflow.health_status = "healthy"
    bench = Bench(tmp_path, fake=airflow)
    try:
        bench.policy(STUCK_POLICY)
        bench.spec("slow", mar=2)
        first = bench.run()
        assert [(i.spec, o) for i, o in first.applied] == [("slow", "created")]
        assert [e.entry.outcome for e in bench.events() if e.entry.action == Action.FINDING] == []  # created now
        seq = len(bench.events())
        bench.run()
        again = [(e.entry.action, e.entry.outcome, e.entry.spec_name) for e in bench.events()[seq:]]
        assert again == [
            (Action.FINDING, Outcome.STUCK, "slow"),
            (Action.RECONCILE, Outcome.NO_CHANGES, None),  # the pass's final record comes after what it found
        ]
        (finding,) = [e for e in bench.events()[seq:] if e.entry.action == Action.FINDING]
        assert finding.entry.message == (
            "7 run(s) queued for more than 1 min (oldest since "
            f"{created_at.strftime('%Y-%m-%dT%H:%M:%SZ')}) while none runs; likely cause: no free slot: the scheduler "
            "is healthy and the DAG unpaused, so check the pools (default_pool), parallelism and max_active_tasks, "
            "and other DAG runs holding them"
        )
        seq = len(bench.events())
        bench.run()  # the same situation: not recorded again, and an unchanged pass writes nothing
        assert [(e.entry.action, e.entry.outcome) for e in bench.events()[seq:]] == []
    finally:
        bench.close()
