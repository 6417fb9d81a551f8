"""Version coverage against the real Apache Airflow: a spec that ends keeps, per interval (a partition, by its
date), whether its latest run succeeded on the DAG's latest version, and `report NAME --check` exits 1 naming the
intervals that did not."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from controller.cli import main
from controller.core.model.coverage import Coverage, Gap, Missed, TargetSource
from tests.commands.reconcile.harness import Bench, in_process

pytestmark = pytest.mark.airflow


def test_a_flaky_range_is_covered_on_its_even_days_and_the_check_names_the_odd_ones(
    tmp_path: Path, airflow_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = Bench(tmp_path, url=airflow_url)
    try:
        bench.spec("flaky-cov", dag="demo_flaky", start="2013-04-01", end="2013-04-03", reprocess="completed", mar=3)
        bench.until_terminal(passes=60, wait=lambda: time.sleep(2))
        latest = bench.client().dag("demo_flaky", with_tasks=False).latest_version
        binding = bench.store.binding("flaky-cov")
        in_process(bench, monkeypatch)
        capsys.readouterr()
        code = main(["report", "flaky-cov", "--check"])
        out = capsys.readouterr().out
    finally:
        bench.close()
    assert latest is not None
    assert binding is not None
    assert binding.phase.value == "CompletedWithFailures"
    failed = (
        Missed("2013-04-01T00:00:00+00:00", Gap.FAILED, (latest,)),
        Missed("2013-04-03T00:00:00+00:00", Gap.FAILED, (latest,)),
    )
    assert binding.coverage == Coverage(latest, TargetSource.AT_END, intervals=3, covered=1, missed=failed)
    assert code == 1
    assert out.splitlines()[:4] == [
        f"flaky-cov: coverage does not hold: version coverage: 1 of 3 intervals on {latest.text()} (2 failed); "
        "target: the DAG's latest version when the spec ended",
        "not covered now: 2 intervals",
        f"  2013-04-01T00:00:00+00:00 (failed: {latest.text()})",
        f"  2013-04-03T00:00:00+00:00 (failed: {latest.text()})",
    ]


def test_a_partitioned_dag_is_covered_by_partition_date(tmp_path: Path, airflow_url: str) -> None:
    bench = Bench(tmp_path, url=airflow_url)
    try:
        bench.spec("parts-cov", dag="demo_partitioned", start="2013-05-01", end="2013-05-02", reprocess="completed")
        bench.until_terminal(passes=60, wait=lambda: time.sleep(2))
        latest = bench.client().dag("demo_partitioned", with_tasks=False).latest_version
        binding = bench.store.binding("parts-cov")
    finally:
        bench.close()
    assert latest is not None
    assert binding is not None
    assert binding.coverage is not None
    assert (binding.coverage.target, binding.coverage.intervals, binding.coverage.covered) == (latest, 2, 1)
    (odd,) = binding.coverage.missed
    assert (odd.interval[:10], odd.gap, odd.code) == ("2013-05-01", Gap.FAILED, (latest,))
