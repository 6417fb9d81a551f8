"""`plan` looks ahead in a DAG's queue (issue 25): a spec queued behind another, never applied, is dry-run now, so a
create reconcile will refuse at the head fails the pull request's check (exit 5) before the merge, with the PR
comment leading with it; with `--pr-comment`, only the PR's own specs count. Against the real Airflow 3.3.2."""

from __future__ import annotations

import secrets
from datetime import date, timedelta
from pathlib import Path

import pytest

from tests.commands.reconcile.harness import Bench

pytestmark = pytest.mark.airflow
# days of their own on every run (the session's Airflow is shared); nothing is created: plans only
FIRST = date(2006, 1, 1) + timedelta(days=3 * secrets.randbelow(600))
LAST = FIRST + timedelta(days=2)


def test_a_queued_spec_over_its_limit_fails_the_pr_check(tmp_path: Path, airflow_url: str) -> None:
    bench = Bench(tmp_path, url=airflow_url)
    try:
        for name, expected in (("a-head", 3), ("b-behind", 1)):  # b queues behind a (same DAG; by name)
            bench.spec(name, start=str(FIRST), end=str(LAST), reprocess="completed", mar=1, expected_runs=expected)
        why = (
            "queued behind a-head; reconcile will refuse it at the head: the dry run counts 3 runs; expected_runs is 1 "
            "(dry run now; the specs ahead may change the count by then)"
        )
        planned = bench.cli("plan", "--no-store")
        assert (planned.returncode, planned.stderr) == (5, f"refused: b-behind: {why}\n")
        lines = planned.stdout.splitlines()
        assert lines[0].startswith(f"+ create    a-head    demo_daily  {FIRST} → {LAST}  reprocess completed  ")
        assert lines[1:3] == [  # the create's load (issue 27 §3): demo_daily emits no asset
            "    pools: default_pool 128 slots (1 task)",
            "    metadata database: adds up to 3 DAG runs and 3 task instances (3 runs × 1 task)",
        ]
        del lines[1:3]
        assert lines[1].startswith(f"… queued    b-behind  demo_daily  {FIRST} → {LAST}  reprocess completed  ")
        assert lines[1].endswith(f"— {why}  [Queued]")
        assert "runs 3 of 3 in range" in lines[1]
        assert lines[2] == "Plan: 1 to create, 0 to pause, 0 to cancel, 1 queued, 0 blocked."

        changed = tmp_path / "changed.txt"
        changed.write_bytes(b"specs/b-behind.yaml\0")
        comment = bench.cli("plan", "--no-store", "--format", "markdown", "--pr-comment", str(changed))
        assert (comment.returncode, comment.stderr) == (5, f"refused: b-behind: {why}\n")
        assert comment.stdout.splitlines()[:6] == [
            "<!-- backfillctl-plan -->",
            "### backfillctl plan",
            "",
            "**Refused: after the merge, reconcile would refuse 1 spec this pull request adds or changes** (this "
            "check fails, exit 5):",
            "",
            "- `b-behind`: queued behind a-head; reconcile will refuse it at the head: the dry run counts 3 runs; "
            "expected\\_runs is 1 \\(dry run now; the specs ahead may change the count by then\\)",
        ]
        changed.write_bytes(b"specs/a-head.yaml\0")  # another PR: b's refusal is not its own
        other = bench.cli("plan", "--no-store", "--format", "markdown", "--pr-comment", str(changed))
        assert (other.returncode, other.stderr) == (0, "")
        assert "**Refused" not in other.stdout

        bench.spec("b-behind", start=str(FIRST), end=str(LAST), reprocess="completed", mar=1, expected_runs=3)
        fixed = bench.cli("plan", "--no-store")
        assert (fixed.returncode, fixed.stderr) == (0, "")
        assert fixed.stdout.splitlines()[3].endswith("— queued behind a-head  [Queued]")  # within its limit: as before
    finally:
        bench.close()
