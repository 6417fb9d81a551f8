"""Which code re-ran history, against the real Apache Airflow: the runs' `dag_versions` decoded, the DAG details'
`rerun_with_latest_version`, and the change record's `ran_on` (JSON) and Code line (markdown)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from controller.core.documents.escaping import md_text
from tests.commands.reconcile.harness import Bench

pytestmark = pytest.mark.airflow


def test_the_change_record_names_the_dag_version_its_runs_ran_on(tmp_path: Path, airflow_url: str) -> None:
    bench = Bench(tmp_path, url=airflow_url)
    try:
        bench.spec("code-record", dag="demo_daily", start="2019-02-01", end="2019-02-03", mar=3)
        client = bench.client()
        info = client.dag("demo_daily", with_tasks=False)
        release = client.capabilities.version
        bench.until_terminal(passes=60, wait=lambda: time.sleep(2))
        runs = client.dag_runs("demo_daily", datetime(2019, 2, 1, tzinfo=UTC), datetime(2019, 2, 3, tzinfo=UTC))
        report = json.loads(bench.cli("report", "code-record", "--format", "json").stdout)
        markdown = bench.cli("report", "code-record").stdout
    finally:
        bench.close()
    assert info.rerun_with_latest_version is None  # the demo DAG does not set it
    assert info.dag_version is not None
    latest = int(info.dag_version.split(" ")[0])
    assert [r.dag_versions[-1].number for r in runs] == [latest] * 3
    assert report["ran_on"] == {
        "airflow": [release],
        "run_on_latest_version": [True],
        "dag_versions": [{"version_number": latest, "bundle_version": None, "runs": 3}],
    }
    line = f"created on Airflow {release}, run_on_latest_version true; runs ran on DAG version {latest}: 3 runs"
    assert f"- **Code**: {md_text(line)}\n" in markdown
