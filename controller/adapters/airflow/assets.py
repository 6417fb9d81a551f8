"""The asset endpoint: the assets a DAG's tasks produce and the DAGs scheduled on them.

`GET /api/v2/assets?dag_ids=…` (a filter every 3.x release declares) answers the assets the DAG schedules on,
produces or reads; the producers are `producing_tasks[].dag_id`, the consumers `scheduled_dags[].dag_id`
(`consuming_dags` in the earliest 3.0 answers). The answer is filtered here again by producer, so a server that
ignored the filter would cost pages, never a wrong line.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from controller.adapters.airflow.decode import field
from controller.adapters.airflow.server import Server
from controller.core.model.load import AssetTrigger, assets_of

CONSUMER_FIELDS = ("scheduled_dags", "consuming_dags")
MAX_PAGES = 5  # a DAG touching more than 500 assets is read no further (said in the plan)


class Assets:
    def __init__(self, server: Server) -> None:
        self._server = server

    def produced_by(self, dag_id: str) -> tuple[tuple[AssetTrigger, ...] | None, str | None]:
        """The DAG's produced assets with their consumers; None and why when the answer cannot tell."""
        rows: list[tuple[str, list[str], list[str]]] = []
        params = {"dag_ids": dag_id, "order_by": "uri"}
        for row in self._server.entries("/api/v2/assets", "assets", params, _row):
            if row is None:
                version = self._server.capabilities.version
                return None, f"asset consumers: not known on Airflow {version} (its assets name no scheduled DAGs)"
            rows.append(row)
            if len(rows) >= MAX_PAGES * 100:
                return assets_of(dag_id, rows), f"assets: only the first {len(rows)} assets of {dag_id} were read"
        return assets_of(dag_id, rows), None


def _row(item: Mapping[str, Any]) -> tuple[str, list[str], list[str]] | None:
    """An asset's URI, producing and consuming DAG ids; None when the release names no consumers."""
    consumers = next((f for f in CONSUMER_FIELDS if f in item), None)
    if consumers is None or "producing_tasks" not in item:
        return None
    uri = field(item, "uri", str, "a string")
    return uri, _dag_ids(item, "producing_tasks"), _dag_ids(item, consumers)


def _dag_ids(item: Mapping[str, Any], key: str) -> list[str]:
    refs = field(item, key, list, "an array", required=False) or []
    return [str(r["dag_id"]) for r in refs if isinstance(r, Mapping) and "dag_id" in r]
