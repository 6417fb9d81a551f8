"""DAG-run notes (the policy's `airflow_notes`): one page of a backfill's runs with their notes, and a note set
on one run (`PATCH …/dagRuns/{run_id}?update_mask=note`, which needs DAG-run edit on the DAG)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any
from urllib.parse import quote

from controller.adapters.airflow.decode import decoded, each, field, required_time
from controller.adapters.airflow.server import Server
from controller.core.model.spec import format_utc


@dataclass(frozen=True, slots=True)
class NotedRun:
    run_id: str
    logical_date: datetime
    note: str | None


def _noted_run(data: Any) -> NotedRun:
    return NotedRun(
        field(data, "dag_run_id", str, "a string"),
        required_time(data, "logical_date"),
        field(data, "note", str, "a string", required=False),
    )


class Notes:
    def __init__(self, server: Server) -> None:
        self._server = server

    def backfill_runs(self, dag_id: str, from_date: datetime, to_date: datetime, limit: int) -> list[NotedRun]:
        """The backfill runs between the dates (inclusive), oldest first: one page of at most `limit` runs."""
        path = f"/api/v2/dags/{quote(dag_id, safe='')}/dagRuns"
        params = {
            "run_type": "backfill",
            "logical_date_gte": format_utc(from_date),
            "logical_date_lte": format_utc(to_date),
            "order_by": "logical_date",
            "limit": limit,
        }
        items, _ = self._server.page(path, "dag_runs", params)
        return decoded(partial(each, _noted_run, key="dag_runs"), items, "GET", path)

    def set_note(self, dag_id: str, run_id: str, note: str) -> None:
        """Set one run's note (only the note: `update_mask`); a retry writes the same text, so it is idempotent."""
        path = f"/api/v2/dags/{quote(dag_id, safe='')}/dagRuns/{quote(run_id, safe='')}"
        self._server.json("PATCH", path, json={"note": note}, params={"update_mask": "note"}, idempotent=True)
