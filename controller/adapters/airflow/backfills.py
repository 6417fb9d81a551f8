"""The backfill endpoints: list, read, dry-run (in parts for a range of any size), create, pause, unpause,
cancel. The create and dry-run body is the one this release accepts (`backfill_body`)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from controller.adapters.airflow.decode import (
    backfill_from_json,
    decoded,
    each,
    field,
    planned_run_from_json,
    required_time,
)
from controller.adapters.airflow.server import PAGE, Server
from controller.core.model.airflow import Backfill, BackfillRequest, PlannedRun
from controller.core.model.capabilities import run_on_latest, unsupported_request
from controller.core.rules.chunks import TARGET_RUNS, TICK, first_span, next_sub_range, sub_range_span
from controller.core.rules.retrying import Request
from controller.errors import AirflowAuthError, AirflowVersionError


@dataclass(frozen=True, slots=True)
class NewestFirst:
    """A DAG's backfills read newest first down to a watermark: every one above it, and the rest of the page that
    reached it (what a cache compares against what it kept). `ordered` False: the server ignored `order_by=-id`
    (ids not descending), so nothing could stop early and `backfills` is the DAG's whole history."""

    backfills: tuple[Backfill, ...]
    ordered: bool


class Backfills:
    def __init__(self, server: Server) -> None:
        self._server = server

    def of_dag(self, dag_id: str, *, newest: frozenset[int] | None = None) -> list[Backfill]:
        """The DAG's backfills, oldest first. With `newest`, only the newest ones down to the oldest of these
        ids: a DAG's active backfill is always its newest (Airflow refuses a create while one is active), so
        a pass whose specs are bound reads one page, not the DAG's whole backfill history."""
        path = "/api/v2/backfills"
        if newest is None:
            return list(
                self._server.entries(path, "backfills", {"dag_id": dag_id, "order_by": "id"}, backfill_from_json)
            )
        found: list[Backfill] = []
        for backfill in self._server.entries(
            path, "backfills", {"dag_id": dag_id, "order_by": "-id"}, backfill_from_json
        ):
            found.append(backfill)
            if len(found) % PAGE == 0 and newest <= {b.id for b in found}:
                break
        return found[::-1]

    def newer_than(self, dag_id: str, watermark: int) -> NewestFirst:
        """The DAG's backfills newest first, stopping after the page that reaches `watermark` (the listing has no
        id filter, but it sorts), so the cost depends on what is new, not on the DAG's history. A server that
        answers out of order is read to the end: the stop is only sound on a sorted listing."""
        path, params = "/api/v2/backfills", {"dag_id": dag_id, "order_by": "-id"}
        found: list[Backfill] = []
        ordered = True
        for backfill in self._server.entries(path, "backfills", params, backfill_from_json):
            ordered = ordered and (not found or backfill.id < found[-1].id)
            found.append(backfill)
            if ordered and len(found) % PAGE == 0 and backfill.id <= watermark:
                break
        return NewestFirst(tuple(found), ordered)

    def get(self, backfill_id: int) -> Backfill:
        return self._backfill("GET", f"/api/v2/backfills/{backfill_id}")

    def _backfill(self, method: str, path: str, body: dict[str, Any] | None = None) -> Backfill:
        """A call whose answer is a backfill (for a create, an answer that is not one is a lost answer)."""
        return decoded(backfill_from_json, self._server.json(method, path, json=body), method, path)

    def last_pause(self, backfill_id: int) -> tuple[str | None, datetime] | None:
        """Who paused the backfill last and when, from Airflow's event log: every `PUT …/pause` (UI or API) writes
        an event `pause_backfill` with the user as `owner`, no dag_id, and `extra` holding the backfill id."""
        params, path = {"event": "pause_backfill", "order_by": "-when", "limit": PAGE}, "/api/v2/eventLogs"
        items, _total = self._server.listing_page(path, "event_logs", params)
        return decoded(lambda entries: _pause_of(entries, backfill_id), items, "GET", path)

    def body(self, request: BackfillRequest) -> dict[str, Any]:
        """The create (and dry-run) body this server accepts, with `run_on_latest_version` explicit where
        it has the field; a field the spec sets that the release lacks is refused, never dropped."""
        caps = self._server.capabilities
        refusal = unsupported_request(caps, request.run_on_latest_version, drain=bool(request.drain_dag))
        if refusal is not None:
            raise AirflowVersionError(refusal, method="POST", path="/api/v2/backfills")
        body = {k: v for k, v in request.body().items() if k != "run_on_latest_version"}
        resolved = run_on_latest(caps, request.run_on_latest_version)
        if resolved is not None:
            body["run_on_latest_version"] = resolved
        return body  # never `dag_run_conf: null` (a 422 before 3.2.2): `body()` leaves an unset conf out

    def planned_runs(self, request: BackfillRequest) -> list[PlannedRun]:
        """The dry run's entries, with partition keys for a partitioned DAG."""
        path = "/api/v2/backfills/dry_run"
        data = self._server.json("POST", path, json=self.body(request), idempotent=True)
        # a dry run changes nothing: an answer it cannot read is a bad answer, never a lost one
        return decoded(_planned, data, "POST", path, kind=Request.READ)

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
        """The backfill created; with `drain_dag`, a 403 is Airflow's refusal to let this login edit the DAG (the
        permission a drain needs: it pauses the DAG), said so."""
        try:
            return self._backfill("POST", "/api/v2/backfills", self.body(request))
        except AirflowAuthError as exc:
            if not request.drain_dag or exc.status != 403:
                raise
            raise AirflowAuthError(
                f"Airflow refused to drain DAG {request.dag_id}: the login may create backfills but not edit that "
                "DAG, and draining pauses it (Airflow needs the DAG edit permission, PUT on the DAG)",
                method=exc.method,
                path=exc.path,
                status=exc.status,
                detail=exc.detail,
                hint=f"grant the backfill login edit on DAG {request.dag_id} (docs/least-privilege.md: only on the "
                "DAGs the policy's drain.allowed_dags lists), or remove drain_dag from the spec",
            ) from None

    def pause(self, backfill_id: int) -> Backfill:
        return self._backfill("PUT", _steer_path(backfill_id, "pause"))

    def unpause(self, backfill_id: int) -> Backfill:
        return self._backfill("PUT", _steer_path(backfill_id, "unpause"))

    def cancel(self, backfill_id: int) -> Backfill:
        return self._backfill("PUT", _steer_path(backfill_id, "cancel"))

    def create_request(self, request: BackfillRequest) -> dict[str, Any]:
        """The audit record's `request` of a create: the call as it is made (its body as this release sends it)."""
        return {"method": "POST", "path": "/api/v2/backfills", "body": self.body(request)}


def steer_request(backfill_id: int, action: str) -> dict[str, Any]:
    """The audit record's `request` of a pause, unpause or cancel (`action`): the call as it is made."""
    return {"method": "PUT", "path": _steer_path(backfill_id, action)}


def _steer_path(backfill_id: int, action: str) -> str:
    return f"/api/v2/backfills/{backfill_id}/{action}"


def _planned(data: Any) -> list[PlannedRun]:
    return each(planned_run_from_json, field(data, "backfills", list, "an array"), "backfills")


def _pause_of(entries: list[Mapping[str, Any]], backfill_id: int) -> tuple[str | None, datetime] | None:
    """The newest `pause_backfill` event whose `extra` names the backfill: its owner and time."""
    for item in entries:
        try:
            extra = json.loads(item.get("extra") or "{}")
        except (ValueError, TypeError):
            continue
        if isinstance(extra, dict) and str(extra.get("backfill_id")) == str(backfill_id):
            owner = field(item, "owner", str, "a string", required=False)
            return owner, required_time(item, "when")
    return None


def _aim(limit: int | None, found: list[PlannedRun]) -> int:
    """The runs the next sub-range aims at: the target, or a little over what a limit still wants."""
    return TARGET_RUNS if limit is None else min(TARGET_RUNS, max(limit - len(found), 1) * 5 // 4 + 1)
