"""The plan shows the code behind the range, against the real Apache Airflow: a create over a range that earlier
runs filled names the DAG version each interval's latest run ran on, and the intervals without a run."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from controller.core.model.airflow import DagVersion
from controller.core.render.plan import plan_json, plan_text
from controller.core.render.pr_comment import pr_comment
from controller.core.rules.code_history import CodeInRange
from tests.commands.reconcile.harness import Bench

pytestmark = pytest.mark.airflow


def test_a_create_s_plan_names_the_code_of_the_runs_it_re_runs(tmp_path: Path, airflow_url: str) -> None:
    bench = Bench(tmp_path, url=airflow_url)
    try:
        bench.spec("first-three", dag="demo_daily", start="2015-06-01", end="2015-06-03", mar=3)
        bench.until_terminal(passes=60, wait=lambda: time.sleep(2))
        info = bench.client().dag("demo_daily", with_tasks=False)
        bench.spec("all-five", dag="demo_daily", start="2015-06-01", end="2015-06-05", reprocess="completed", mar=3)
        plan = bench.reconciler().plan().plan
    finally:
        bench.close()
    assert info.dag_version is not None
    latest = DagVersion(int(info.dag_version.split(" ")[0]))
    (create,) = [i for i in plan.items if i.spec == "all-five"]
    assert create.code_in_range == CodeInRange(((latest, 3),), failed=0, without_run=2)
    line = f"    code in range: DAG version {latest.number}: 3 intervals; 2 intervals without a run"
    assert line in plan_text(plan).splitlines()
    facts = {i["spec"]: i for i in json.loads(plan_json(plan))["items"]}["all-five"]["facts"]
    assert facts["code_in_range"] == {
        "versions": [{"version_number": latest.number, "bundle_version": None, "intervals": 3}],
        "failed": 0,
        "without_run": 2,
    }
    comment = pr_comment(plan, ["specs/all-five.yaml"], {})
    assert f"- code in range: DAG version {latest.number}: 3 intervals; 2 intervals without a run\n" in comment
