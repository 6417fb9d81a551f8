"""The kept backfill history (migration 0010) on SQLite and PostgreSQL: what is kept reads back exactly, per
Airflow and DAG; `forget` drops one Airflow's history only; the migration goes up and down cleanly."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

from sqlalchemy import inspect

from controller.adapters.store import Store
from controller.adapters.store.database import _alembic
from controller.adapters.store.history import KnownHistory
from controller.core.model.airflow import Backfill

T = datetime(2026, 3, 1, 12, 30, 15, 123456, tzinfo=UTC)
PROD, STAGING = "https://airflow.example.com", "http://staging:8080"


def backfill(backfill_id: int, dag_id: str = "orders", **changes: object) -> Backfill:
    values: dict[str, object] = {
        "id": backfill_id,
        "dag_id": dag_id,
        "from_date": T - timedelta(days=backfill_id),
        "to_date": T,
        "reprocess_behavior": "failed",
        "max_active_runs": 3,
        "is_paused": False,
        "dag_run_conf": {"spec": f"s{backfill_id}", "nested": {"k": [1, 2]}},
        "created_at": T,
        "completed_at": T + timedelta(hours=backfill_id),
    }
    return Backfill(**(values | changes))  # type: ignore[arg-type]


def test_kept_history_reads_back_exactly_per_airflow_and_dag(make: Callable[..., Store], store_url: str) -> None:
    kept = make(store_url).backfill_history
    assert kept.known(PROD, ["orders"]) == {}
    first = (backfill(1, dag_run_conf=None), backfill(4, is_paused=True))
    kept.keep(PROD, "orders", 4, first)
    kept.keep(PROD, "empty", 0, ())
    kept.keep(STAGING, "orders", 2, (backfill(2),))
    assert kept.known(PROD, ["orders", "empty", "never"]) == {
        "orders": KnownHistory(4, first),
        "empty": KnownHistory(0, ()),
    }
    # a later read keeps only what is new, and an id above the watermark is never kept
    kept.keep(PROD, "orders", 7, (*first, backfill(7), backfill(9)))
    assert kept.known(PROD, ["orders"]) == {"orders": KnownHistory(7, (*first, backfill(7)))}
    assert kept.forget(PROD) == 3
    assert kept.known(PROD, ["orders", "empty"]) == {}
    assert kept.known(STAGING, ["orders"]) == {"orders": KnownHistory(2, (backfill(2),))}


def test_migration_0010_adds_the_history_tables_and_downgrades_cleanly(
    make: Callable[..., Store], store_url: str
) -> None:
    store = make(store_url)
    assert store.revision() == "0011"
    store.backfill_history.keep(PROD, "orders", 1, (backfill(1),))
    assert {"backfill_history", "backfill_watermarks"} <= set(inspect(store.engine).get_table_names())
    with store.engine.begin() as conn:
        _alembic(conn, "downgrade", "0009")
    assert store.revision() == "0009"
    assert not {"backfill_history", "backfill_watermarks"} & set(inspect(store.engine).get_table_names())
    with store.engine.begin() as conn:
        _alembic(conn, "upgrade", "head")
    assert store.revision() == "0011"
    assert store.backfill_history.known(PROD, ["orders"]) == {}
    store.backfill_history.keep(PROD, "orders", 1, (backfill(1),))
    assert store.backfill_history.known(PROD, ["orders"]) == {"orders": KnownHistory(1, (backfill(1),))}
