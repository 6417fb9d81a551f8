"""`validate` with Airflow configured, on a fake lookup: the DAG list is read only when a DAG is missing, and a list
that cannot be read suggests nothing (the DAG is still an error)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from controller.commands.validate import check_dags, validate_paths
from controller.core.model.airflow import DagInfo
from controller.errors import AirflowNotFound, AirflowUnavailable
from tests.reconcile.harness import Bench

NOW = datetime(2026, 11, 30, 12, tzinfo=UTC)


def known(dag_id: str) -> DagInfo:
    if dag_id != "orders_daily":
        raise AirflowNotFound(f"GET /api/v2/dags/{dag_id}/details -> 404", status=404)
    return DagInfo("orders_daily", False, False, False, True, None)


def test_suggestions_come_only_from_the_listing_and_only_when_a_dag_is_missing(tmp_path: Path) -> None:
    bench = Bench(tmp_path)
    bench.spec("fine", dag="orders_daily")
    listed: list[int] = []

    def listing() -> set[str]:
        listed.append(1)
        return {"orders_daily", "orders_hourly"}

    offline = validate_paths([], bench.specs, NOW)
    assert check_dags(offline, known, NOW, listing).diagnostics == ()
    assert listed == []  # nothing missing: the DAG list is not read

    bench.spec("typo", dag="orders_dialy")
    checked = check_dags(validate_paths([], bench.specs, NOW), known, NOW, listing)
    assert [d.message for d in checked.diagnostics] == [
        "DAG 'orders_dialy' does not exist in Airflow; did you mean 'orders_daily'?"  # orders_hourly: not close
    ]
    assert listed == [1]
    bench.close()


def test_a_listing_that_fails_suggests_nothing_and_the_dag_is_still_an_error(tmp_path: Path) -> None:
    bench = Bench(tmp_path)
    bench.spec("typo", dag="orders_dialy")

    def listing() -> set[str]:
        raise AirflowUnavailable("GET /api/v2/dags -> 503", status=503)

    checked = check_dags(validate_paths([], bench.specs, NOW), known, NOW, listing)
    assert [(d.message, d.hint) for d in checked.diagnostics] == [
        (
            "DAG 'orders_dialy' does not exist in Airflow",
            "check the dag_id (Airflow's UI or `GET /api/v2/dags` lists the DAGs)",
        )
    ]
    assert not checked.ok
    bench.close()
