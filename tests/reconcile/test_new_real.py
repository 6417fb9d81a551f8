"""`backfillctl new` against the real Apache Airflow 3.3.2: expected_runs is Airflow's dry-run count, so the spec
it writes is one reconcile creates (an hourly DAG's day is 25 runs, not the 2 a daily guess would write)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.reconcile.harness import Bench

pytestmark = pytest.mark.airflow
CHOICES = ["--ticket", "CHG-7", "--reason", "Replay the hours after the fix", "--approver", "bob"]


def test_new_takes_expected_runs_from_airflows_dry_run(tmp_path: Path, airflow_url: str) -> None:
    bench = Bench(tmp_path, url=airflow_url)
    try:
        dates = ["--from", "2022-09-14", "--to", "2022-09-15"]
        made = bench.cli("new", "hourly-day", "--dag-id", "demo_hourly", *dates, "--reprocess", "none", *CHOICES)
        assert (made.returncode, made.stderr) == (0, "")
        assert made.stdout == (
            "wrote specs/hourly-day.yaml\n"
            "requested_by: ci-bot (from BACKFILLCTL_ACTOR; --requested-by says otherwise)\n"
            "expected_runs: 25, from Airflow's dry run\n"
            "next: `backfillctl plan`, then open a pull request with the file\n"
        )
        today = datetime.now(UTC).date().isoformat()
        text = (bench.specs / "hourly-day.yaml").read_text()
        assert (
            f"expected_runs: 25             # Airflow's dry run on {today}: 25 run(s) to create of 25 in range\n"
            in text
        )
        planned = bench.cli("plan", "--no-store")
        assert (planned.returncode, planned.stderr) == (0, "")  # not refused: the count is the dry run's
        assert planned.stdout.startswith("+ create    hourly-day  demo_hourly  2022-09-14 → 2022-09-15")
        assert "runs 25 of 25 in range" in planned.stdout

        missing = bench.cli("new", "typo", "--dag-id", "demo_hourli", *dates, "--reprocess", "none", *CHOICES)
        assert (missing.returncode, missing.stdout) == (1, "")
        assert missing.stderr.splitlines() == [
            "error: not written: DAG 'demo_hourli' does not exist in Airflow",
            "  hint: check --dag-id: the DAG must exist in the Airflow BACKFILLCTL_AIRFLOW_URL names",
        ]
        assert not (bench.specs / "typo.yaml").exists()
    finally:
        bench.close()
