"""A backfill's slots, where the server lists them (`GET /api/v2/backfills/{id}/dag_runs`, Airflow 3.4, PR #67381;
capability `backfill_slots`): every date or partition of the backfill, the run it created or re-ran there with
that run's current state, or why it created none (`exception_reason`: `in flight`, `already exists`,
`unknown`). Paged and bounded like every listing (`Server.entries`), ordered by `sort_ordinal`.

Checked against a real 3.4.0b2: the collection key is `backfill_dag_runs`, `total_entries` is always there, a
skipped slot has `dag_run_id` and `dag_run_state` null, and a re-run slot names the existing run (its run id
unchanged). Older lines keep reconstructing a backfill's runs from run ids and dates
(`commands/reconcile/summaries.py`).
"""

from __future__ import annotations

from functools import partial

from controller.adapters.airflow.decode import backfill_slot_from_json, decoded, each
from controller.adapters.airflow.server import PAGE, Server
from controller.core.model.airflow import BackfillSlot
from controller.errors import AirflowVersionError


class Slots:
    def __init__(self, server: Server) -> None:
        self._server = server

    def of_backfill(self, backfill_id: int, *, pages: int | None = None) -> list[BackfillSlot] | None:
        """Every slot of the backfill, in `sort_ordinal` order; with `pages`, None when they take more pages than
        that (the first page tells). Refused where the release has no such listing (never sent: an older
        server answers 404 for the route)."""
        path = f"/api/v2/backfills/{backfill_id}/dag_runs"
        if not self._server.capabilities.backfill_slots:
            raise AirflowVersionError(
                f"GET {path}: Airflow {self._server.capabilities.version} does not list a backfill's runs (3.4.0)",
                method="GET",
                path=path,
            )
        params, key = {"order_by": "sort_ordinal"}, "backfill_dag_runs"
        items, total = self._server.page(path, key, {**params, "limit": PAGE, "offset": 0})
        if pages is not None and -(-total // PAGE) > pages:
            return None
        first = decoded(partial(each, backfill_slot_from_json, key=key), items, "GET", path)
        if total <= len(first):
            return first
        return first + list(self._server.entries(path, key, params, backfill_slot_from_json, offset=len(first)))
