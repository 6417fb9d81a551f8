"""`validate` with Airflow configured: an unknown dag_id gets a did-you-mean from Airflow's own DAG list (issue 25,
item 5), never an id it has not seen; an id nothing in the list resembles, or a list that cannot be read, gets
no suggestion."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from tests.commands.reconcile.harness import Bench

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)
HINT = "  hint: check the dag_id (Airflow's UI or `GET /api/v2/dags` lists the DAGs)\n"


@pytest.mark.airflow
def test_an_unknown_dag_gets_the_closest_ids_of_airflows_dag_list(tmp_path: Path, airflow_url: str) -> None:
    bench = Bench(tmp_path, url=airflow_url)
    try:
        bench.spec("typo", dag="demo_dayly")  # one letter off demo_daily
        bench.spec("far", dag="qqq_nothing_here")  # like no DAG of examples/dags/
        bench.spec("fine", dag="demo_daily")
        done = bench.cli("validate")
    finally:
        bench.close()
    assert (done.returncode, done.stderr) == (1, "")
    assert done.stdout == (
        "specs/far.yaml:3:9: $.dag_id: DAG 'qqq_nothing_here' does not exist in Airflow\n"
        + HINT
        + "specs/typo.yaml:3:9: $.dag_id: DAG 'demo_dayly' does not exist in Airflow; did you mean 'demo_daily'?\n"
        + HINT
        + "2 errors, 0 warnings in 3 files.\n"
    )
