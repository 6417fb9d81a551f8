"""`backfillctl new` against the real Apache Airflow 3.3.2: expected_runs is Airflow's dry-run count, so the spec
it writes is one reconcile creates (an hourly DAG's day is 25 runs, not the 2 a daily guess would write)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.commands.reconcile.harness import Bench

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


def test_new_select_latest_pins_the_dags_latest_version_and_counts_the_selection(
    tmp_path: Path, airflow_url: str
) -> None:
    bench = Bench(tmp_path, url=airflow_url)
    try:
        with bench.client() as client:
            latest = client.dag("demo_daily", with_tasks=False).latest_version
        assert latest is not None
        dates = ["--from", "2021-07-20", "--to", "2021-07-22", "--reprocess", "completed"]
        made = bench.cli("new", "recode", "--dag-id", "demo_daily", *dates, "--select-latest", *CHOICES)
        assert (made.returncode, made.stderr) == (0, "")
        lines = made.stdout.splitlines()
        assert lines[0] == "wrote specs/recode.yaml"
        assert lines[2] == f"select: version {latest.number}, the DAG's latest version in Airflow"
        expected = re.fullmatch(r"expected_runs: (\d+), from the intervals it selects", lines[3])
        assert expected is not None
        today = datetime.now(UTC).date().isoformat()
        text = (bench.specs / "recode.yaml").read_text()
        assert (
            f"select: {{code_version: {latest.number}}}   # re-run only what other code made: the DAG's latest "
            f"version in Airflow on {today}\n" in text
        )
        planned = bench.cli("plan", "--no-store")
        assert (planned.returncode, planned.stderr) == (0, "")  # its expected_runs is the selection's count
        assert f"re-runs {expected[1]} of 3 intervals" in planned.stdout
    finally:
        bench.close()
