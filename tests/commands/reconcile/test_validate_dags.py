"""`validate` with Airflow configured, on a fake lookup: the DAG list is read only when a DAG is missing, and a list
that cannot be read suggests nothing (the DAG is still an error)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from controller.commands.reconcile.specfiles import validate_paths
from controller.commands.verbs.validate import check_dags
from controller.core.model.airflow import DagInfo
from controller.errors import AirflowNotFound, AirflowUnavailable
from tests.commands.reconcile.harness import Bench

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


def staged(dag_id: str) -> DagInfo:
    """Airflow with the backfilled DAG, a verification DAG and a paused publish DAG."""
    infos = {
        "orders_daily": DagInfo("orders_daily", False, False, False, True, None),
        "orders_verify": DagInfo("orders_verify", False, False, False, False, None),
        "orders_publish": DagInfo("orders_publish", True, False, False, False, None),
    }
    if dag_id not in infos:
        raise AirflowNotFound(f"GET /api/v2/dags/{dag_id}/details -> 404", status=404)
    return infos[dag_id]


def test_verify_and_publish_dags_are_checked_in_airflow_with_a_suggestion_like_dag_id(tmp_path: Path) -> None:
    bench = Bench(tmp_path)
    bench.policy("""\
        version: 1
        require_reviewed_merge: false
        scope: {dags: ['*']}
        verification: {allowed_dags: [orders_verfy, orders_publish]}
        """)
    bench.spec("staged", dag="orders_daily", verify="{dag_id: orders_verfy}", publish="{dag_id: orders_publish}")
    looked: list[str] = []

    def lookup(dag_id: str) -> DagInfo:
        looked.append(dag_id)
        return staged(dag_id)

    checked = check_dags(validate_paths([], bench.specs, NOW), lookup, NOW, lambda: {"orders_daily", "orders_verify"})
    assert looked == ["orders_daily", "orders_verfy", "orders_publish"]  # one details call per DAG
    assert [(d.location.line, d.location.column, d.location.path) for d in checked.diagnostics] == [
        (12, 18, ("verify", "dag_id")),
        (13, 19, ("publish", "dag_id")),
    ]
    assert [(d.message, d.hint, d.severity.value) for d in checked.diagnostics] == [
        (
            "verify DAG 'orders_verfy' does not exist in Airflow; did you mean 'orders_verify'?",
            "check verify.dag_id (Airflow's UI or `GET /api/v2/dags` lists the DAGs)",
            "error",
        ),
        (
            "publish DAG 'orders_publish' is paused in Airflow: its run would not start, which fails the publish",
            "unpause orders_publish before the spec reaches that stage",
            "warning",
        ),
    ]
    assert not checked.ok
    bench.close()


def test_an_unreachable_verify_dag_is_a_warning(tmp_path: Path) -> None:
    bench = Bench(tmp_path)
    bench.policy("""\
        version: 1
        require_reviewed_merge: false
        scope: {dags: ['*']}
        verification: {allowed_dags: [orders_verify]}
        """)
    bench.spec("staged", dag="orders_daily", verify="{dag_id: orders_verify}")

    def lookup(dag_id: str) -> DagInfo:
        if dag_id == "orders_verify":
            raise AirflowUnavailable("GET /api/v2/dags/orders_verify/details -> 503", status=503)
        return staged(dag_id)

    checked = check_dags(validate_paths([], bench.specs, NOW), lookup, NOW)
    assert [(d.message, d.hint, d.severity.value) for d in checked.diagnostics] == [
        (
            "could not check verify DAG 'orders_verify' in Airflow: GET /api/v2/dags/orders_verify/details -> 503",
            "plan and reconcile check it again",
            "warning",
        )
    ]
    assert checked.ok
    bench.close()
