"""The load nobody sees, against the real Apache Airflow 3.3.2 (issue 27 §3): the plan of a spec on
examples/dags/demo_orders_export.py (a daily DAG whose `export` task produces s3://backfillctl-demo/orders)
names the DAGs scheduled on that asset, the pool its tasks use and the rows it adds to the metadata database;
the policy rule `asset_consumers: require_downstream` refuses the spec at validate, and its create at plan and
reconcile, until its downstream names them. Only read calls: nothing is created."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.commands.reconcile.harness import Bench
from tests.commands.reconcile.test_scenarios_real import run_cli

pytestmark = pytest.mark.airflow
DAG = "demo_orders_export"


@pytest.fixture
def bench(tmp_path: Path, airflow_url: str) -> Iterator[Bench]:
    b = Bench(tmp_path, url=airflow_url)
    yield b
    b.close()


def test_plan_names_the_triggered_dags_pools_and_metadata_rows(bench: Bench) -> None:
    bench.spec("orders-export", dag=DAG, start="2023-05-01", end="2023-05-03")
    planned = run_cli(bench, "plan")
    assert planned.returncode == 0, planned.stderr
    lines = planned.stdout.splitlines()
    assert lines[0].startswith("+ create    orders-export  demo_orders_export  2023-05-01 → 2023-05-03")
    assert lines[1:4] == [
        "    each run emits asset s3://backfillctl-demo/orders → triggers demo_finance_rollup, demo_orders_report "
        "(up to 3 runs each)",
        "    pools: default_pool 128 slots (2 tasks)",
        "    metadata database: adds up to 3 DAG runs and 6 task instances (3 runs × 2 tasks), plus up to 6 runs of "
        "the DAGs it triggers",
    ]
    (item,) = json.loads(run_cli(bench, "plan", "--format", "json").stdout)["items"]
    assert item["facts"]["load"] == {
        "assets": [
            {
                "uri": "s3://backfillctl-demo/orders",
                "triggers": ["demo_finance_rollup", "demo_orders_report"],
                "runs_each": 3,
            }
        ],
        "pools": [{"name": "default_pool", "slots": 128, "tasks": 2}],
        "metadata": {"dag_runs": 3, "task_instances": 6, "tasks": 2},
    }


def test_require_downstream_refuses_at_validate_plan_and_reconcile_until_the_spec_names_the_consumers(
    bench: Bench,
) -> None:
    bench.policy(
        'version: 1\nrequire_reviewed_merge: false\nscope: {dags: ["*"]}\n'
        'rules:\n  - dags: ["demo_orders_*"]\n    asset_consumers: require_downstream\n'
    )
    bench.spec("orders-export", dag=DAG, start="2023-05-01", end="2023-05-03")
    unnamed = (
        "each run of demo_orders_export triggers demo_finance_rollup, demo_orders_report through the assets it emits "
        "(s3://backfillctl-demo/orders → demo_finance_rollup, demo_orders_report), and the spec's downstream does not "
        "name them (policy rule 1: asset_consumers: require_downstream)"
    )
    fix = "add demo_finance_rollup, demo_orders_report to the spec's downstream, so their owners approve"
    validated = run_cli(bench, "validate")
    assert validated.returncode == 1, validated.stdout + validated.stderr
    assert validated.stdout.splitlines() == [
        f"{bench.specs}/orders-export.yaml:1:1: $.downstream: {unnamed}",
        f"  hint: {fix}",
        f"1 error, 0 warnings in 2 files including the policy {bench.specs}/policy.yaml.",
    ]
    planned = run_cli(bench, "plan")
    assert planned.returncode == 5, planned.stdout + planned.stderr
    assert planned.stdout.splitlines()[0].startswith("! refused   orders-export  demo_orders_export  2023-05-01 → ")
    assert planned.stdout.splitlines()[0].endswith(f"— {unnamed}: {fix}  [Blocked]")
    assert planned.stderr.splitlines()[-1] == f"refused: orders-export: {unnamed}: {fix}"
    reconciled = run_cli(bench, "reconcile", "--once")  # refused: nothing is created
    assert reconciled.returncode == 5, reconciled.stdout + reconciled.stderr
    assert reconciled.stderr.splitlines()[-1] == f"refused: orders-export: {unnamed}: {fix}"
    binding = bench.store.binding("orders-export")
    assert binding is not None
    assert (binding.phase.value, binding.refused, binding.backfill_id) == ("Blocked", True, None)
    spec = bench.specs / "orders-export.yaml"
    spec.write_text(spec.read_text() + "downstream: [demo_finance_rollup, demo_orders_report]\n")
    again = run_cli(bench, "validate")
    assert again.returncode == 0, again.stdout
    named = run_cli(bench, "plan")
    assert named.returncode == 0, named.stdout + named.stderr
    assert named.stdout.startswith("+ create    orders-export  demo_orders_export  2023-05-01 → 2023-05-03")
