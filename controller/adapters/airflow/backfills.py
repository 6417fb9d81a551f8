"""The backfill endpoints: list, read, dry-run (in parts for a range of any size), create, pause, unpause,
cancel. The create and dry-run body is the one this release accepts (`backfill_body`)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from controller.adapters.airflow.decode import backfill_from_json, planned_run_from_json
from controller.adapters.airflow.server import PAGE, Server
from controller.core.model.airflow import Backfill, BackfillRequest, PlannedRun
from controller.core.model.capabilities import run_on_latest, unsupported_request
from controller.core.rules.chunks import TARGET_RUNS, TICK, first_span, next_sub_range, sub_range_span
from controller.errors import AirflowVersionError


class Backfills:
    def __init__(self, server: Server) -> None:
        self._server = server

    def of_dag(self, dag_id: str, *, newest: frozenset[int] | None = None) -> list[Backfill]:
        """The DAG's backfills, oldest first. With `newest`, only the newest ones down to the oldest of these
        ids: a DAG's active backfill is always its newest (Airflow refuses a create while one is active), so
        a pass whose specs are bound reads one page, not the DAG's whole backfill history."""
        if newest is None:
            items = self._server.paginate("/api/v2/backfills", "backfills", {"dag_id": dag_id, "order_by": "id"})
            return [backfill_from_json(item) for item in items]
        found: list[Backfill] = []
        for item in self._server.paginate("/api/v2/backfills", "backfills", {"dag_id": dag_id, "order_by": "-id"}):
            found.append(backfill_from_json(item))
            if len(found) % PAGE == 0 and newest <= {b.id for b in found}:
                break
        return found[::-1]

    def get(self, backfill_id: int) -> Backfill:
        return backfill_from_json(self._server.json("GET", f"/api/v2/backfills/{backfill_id}"))

    def last_pause(self, backfill_id: int) -> tuple[str | None, datetime] | None:
        """Who paused the backfill last and when, from Airflow's event log: every `PUT …/pause` (UI or API) writes
        an event `pause_backfill` with the user as `owner`, no dag_id, and `extra` holding the backfill id."""
        params = {"event": "pause_backfill", "order_by": "-when", "limit": PAGE}
        for item in self._server.json("GET", "/api/v2/eventLogs", params=params).get("event_logs", ()):
            try:
                extra = json.loads(item.get("extra") or "{}")
            except ValueError:
                continue
            if isinstance(extra, dict) and str(extra.get("backfill_id")) == str(backfill_id):
                return item.get("owner"), datetime.fromisoformat(str(item["when"]).replace("Z", "+00:00"))
        return None

    def body(self, request: BackfillRequest) -> dict[str, Any]:
        """The create (and dry-run) body this server accepts, with `run_on_latest_version` explicit where
        it has the field; a field the spec sets that the release lacks is refused, never dropped."""
        caps = self._server.capabilities
        refusal = unsupported_request(caps, request.run_on_latest_version)
        if refusal is not None:
            raise AirflowVersionError(refusal, method="POST", path="/api/v2/backfills")
        body = {k: v for k, v in request.body().items() if k != "run_on_latest_version"}
        resolved = run_on_latest(caps, request.run_on_latest_version)
        if resolved is not None:
            body["run_on_latest_version"] = resolved
        return body  # never `dag_run_conf: null` (a 422 before 3.2.2): `body()` leaves an unset conf out

    def planned_runs(self, request: BackfillRequest) -> list[PlannedRun]:
        """The dry run's entries, with partition keys for a partitioned DAG."""
        data = self._server.json("POST", "/api/v2/backfills/dry_run", json=self.body(request), idempotent=True)
        return [planned_run_from_json(item) for item in data["backfills"]]

    def planned_runs_in_parts(
        self,
        request: BackfillRequest,
        *,
        limit: int | None = None,
        backwards: bool = False,
        runs_a_day: float | None = None,
    ) -> list[PlannedRun]:
        """The dry run of a range of any size, as consecutive sub-ranges each aimed at a few seconds of the
        server's time (one dry run of four hourly years outlived every timeout), in date order;
        with `limit`, it stops once that many runs from the range's start (its end when backwards) are known.
        `runs_a_day`, the timetable's most runs a day when known, sizes the first sub-range."""
        found: list[PlannedRun] = []
        rest: tuple[datetime, datetime] | None = (request.from_date, request.to_date)
        span, covered = first_span(runs_a_day, _aim(limit, found)), timedelta(0)
        while rest is not None and (limit is None or len(found) < limit):
            (low, high), rest = next_sub_range(*rest, span, backwards=backwards)
            part = self.planned_runs(replace(request, from_date=low, to_date=high))
            found = part + found if backwards else found + part
            covered += high - low + TICK
            span = sub_range_span(len(found), covered, _aim(limit, found))
        return sorted(found, key=lambda p: p.date)

    def create(self, request: BackfillRequest) -> Backfill:
        return backfill_from_json(self._server.json("POST", "/api/v2/backfills", json=self.body(request)))

    def pause(self, backfill_id: int) -> Backfill:
        return backfill_from_json(self._server.json("PUT", f"/api/v2/backfills/{backfill_id}/pause"))

    def unpause(self, backfill_id: int) -> Backfill:
        return backfill_from_json(self._server.json("PUT", f"/api/v2/backfills/{backfill_id}/unpause"))

    def cancel(self, backfill_id: int) -> Backfill:
        return backfill_from_json(self._server.json("PUT", f"/api/v2/backfills/{backfill_id}/cancel"))


def _aim(limit: int | None, found: list[PlannedRun]) -> int:
    """The runs the next sub-range aims at: the target, or a little over what a limit still wants."""
    return TARGET_RUNS if limit is None else min(TARGET_RUNS, max(limit - len(found), 1) * 5 // 4 + 1)
