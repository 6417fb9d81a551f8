"""`plan --pr-comment` end to end against the real Apache Airflow 3.3.2: the PR's specs first, with the ticket
and reason read from the spec files and the run counts from Airflow's dry run; everything else on one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.commands.reconcile.harness import Bench

pytestmark = pytest.mark.airflow


def test_plan_pr_comment_puts_the_pull_requests_specs_first(tmp_path: Path, airflow_url: str) -> None:
    bench = Bench(tmp_path, url=airflow_url)
    try:
        spec = bench.spec("pr-new", dag="demo_daily", start="2021-05-01", end="2021-05-03", mar=2)
        spec.write_text(spec.read_text().replace("A test backfill for reconcile.", "'Fix | <b>x</b>\n  in history'"))
        bench.spec("untouched", dag="demo_finance_ledger", start="2021-05-01", end="2021-05-02")
        (tmp_path / "changed.txt").write_text("specs/pr-new.yaml\n")
        env = {
            **os.environ,
            "BACKFILLCTL_AIRFLOW_URL": bench.url,
            "BACKFILLCTL_AIRFLOW_USERNAME": "admin",
            "BACKFILLCTL_AIRFLOW_PASSWORD": "admin",
            "BACKFILLCTL_STORE_URL": bench.store_url,
            "BACKFILLCTL_SPECS_DIR": "specs",
        }
        done = subprocess.run(
            [sys.executable, "-m", "controller", "plan", "--format", "markdown", "--pr-comment", "changed.txt"],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    finally:
        bench.close()
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout.startswith(
        "<!-- backfillctl-plan -->\n"
        "### backfillctl plan\n"
        "\n"
        "**Specs this pull request adds or changes (1)**\n"
        "\n"
        "| | spec | DAG | action | runs | phase | ticket | reason |\n"
        "|---|---|---|---|---|---|---|---|\n"
        "| `+` | `pr-new` | `demo_daily` | create | 3 of 3 | Pending | CHG-1 | Fix \\| \\<b\\>x\\</b\\> in history |\n"
        "\n"
        "<details><summary><code>pr-new</code>: create</summary>\n"
        "\n"
        "- reason: Fix \\| \\<b\\>x\\</b\\> in history\n"
    )
    assert done.stdout.endswith(
        "Other specs (1): 1 to create. Run `backfillctl plan` for the full plan.\n"
        "\n"
        "**Plan: 2 to create, 0 to pause, 0 to cancel, 0 queued, 0 blocked.**\n"
    )
