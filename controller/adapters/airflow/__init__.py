"""Airflow 3 REST client (httpx): backfills, DAG details, DAG runs.

`AirflowClient` is the façade the commands use, over one part per concern:

- `transport`: httpx, retries with backoff, the auth token; every httpx exception and error status as an
  `AirflowError` (method, path, status, Airflow's detail cut to 256 characters, never a header or a token);
- `decode`: Airflow's answers as the core's values;
- `server`: the release and its capabilities (read from `/api/v2/version` once), the preflight, health,
  and each call's run filters checked against the capabilities;
- `backfills`, `dags`, `runs`, `assets`, `pools`: the endpoints, grouped by what they read or change;
- `triggers`: the runs the controller starts itself (verification, publish), by a run id of its own;
- `notes`: the DAG-run notes of managed runs (the policy's `airflow_notes`);
- `slots`: a backfill's slots, where the release lists them (3.4).

The API facts it relies on are pinned by tests/adapters/airflow/test_contract.py, on each supported line (3.1, 3.2,
3.3).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Unpack

from controller.adapters.airflow.assets import Assets
from controller.adapters.airflow.backfills import Backfills, NewestFirst, steer_request
from controller.adapters.airflow.dags import Dags
from controller.adapters.airflow.notes import NotedRun, Notes
from controller.adapters.airflow.pools import Pools
from controller.adapters.airflow.runs import RangeRead, Runs
from controller.adapters.airflow.server import Server
from controller.adapters.airflow.slots import Slots
from controller.adapters.airflow.transport import Connection, Observer, Transport
from controller.adapters.airflow.triggers import Triggers
from controller.core.model.airflow import (
    Backfill,
    BackfillRequest,
    BackfillSlot,
    DagInfo,
    DagRun,
    PlannedRun,
    RunSummary,
    TriggeredRun,
)
from controller.core.model.capabilities import Capabilities
from controller.core.model.guards import SchedulerHealth
from controller.core.model.load import AssetTrigger

__all__ = ["AirflowClient"]


class AirflowClient:
    """One Airflow API server. Pass `transport` to test with a fake (httpx.MockTransport)."""

    def __init__(
        self,
        base_url: str,
        *,
        allow_untested: bool = False,
        capabilities: Capabilities | None = None,
        **connection: Unpack[Connection],
    ) -> None:
        # one request at a time unless told: a command passes BACKFILLCTL_AIRFLOW_MAX_CONCURRENCY's value
        self.transport = Transport(base_url, **(Connection(max_concurrency=1) | connection))
        self.server = Server(self.transport, allow_untested=allow_untested, capabilities=capabilities)
        self._backfills, self._dags, self._runs = Backfills(self.server), Dags(self.server), Runs(self.server)
        self._assets, self._pools = Assets(self.server), Pools(self.server)
        self._triggers, self._notes = Triggers(self.server), Notes(self.server)
        self._slots = Slots(self.server)

    def __repr__(self) -> str:
        return f"AirflowClient({self.shown_url!r}, token=[secure])"

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> AirflowClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @property
    def base_url(self) -> str:
        return self.transport.base_url

    @property
    def shown_url(self) -> str:
        """The one form of the URL any message carries (credentials redacted)."""
        return self.transport.shown_url

    @property
    def observer(self) -> Observer | None:
        """Called with (method, path, status) of every request sent (None: no answer): metrics, call counts."""
        return self.transport.observer

    @observer.setter
    def observer(self, value: Observer | None) -> None:
        self.transport.observer = value

    # --- the server -----------------------------------------------------------------------------------

    def version(self) -> str:
        """The release the server reports; one backfillctl does not support is refused here (see `judge`)."""
        return self.server.version()

    @property
    def known_capabilities(self) -> Capabilities | None:
        """The capabilities if the version was read already (never a call)."""
        return self.server.known_capabilities

    @property
    def capabilities(self) -> Capabilities:
        """What this server's API has, from its version (read once)."""
        return self.server.capabilities

    def preflight(self, *, lists_dags: bool = False) -> str:
        """One quick check before a command's work: the URL answers like Airflow 3, and the credentials work (for a
        command that `lists_dags`, with the first page of the DAG listing, kept for its first read of it)."""
        return self.server.preflight(lists_dags=lists_dags)

    def health(self) -> dict[str, Any]:
        return self.server.health()

    def token_claims(self) -> Mapping[str, Any] | None:
        return self.server.token_claims()

    def can_read_connections(self) -> bool | None:
        return self.server.can_read_connections()

    def scheduler_health(self) -> SchedulerHealth:
        return self.server.scheduler_health()

    # --- backfills ------------------------------------------------------------------------------------

    def list_backfills(self, dag_id: str, *, newest: frozenset[int] | None = None) -> list[Backfill]:
        return self._backfills.of_dag(dag_id, newest=newest)

    def backfills_newer_than(self, dag_id: str, watermark: int) -> NewestFirst:
        return self._backfills.newer_than(dag_id, watermark)

    def get_backfill(self, backfill_id: int) -> Backfill:
        return self._backfills.get(backfill_id)

    def backfill_body(self, request: BackfillRequest) -> dict[str, Any]:
        return self._backfills.body(request)

    def create_request(self, request: BackfillRequest) -> dict[str, Any]:
        """A create as its audit record says it (method, path, body)."""
        return self._backfills.create_request(request)

    @staticmethod
    def steer_request(backfill_id: int, action: str) -> dict[str, Any]:
        """A pause, unpause or cancel as its audit record says it (method, path)."""
        return steer_request(backfill_id, action)

    def planned_runs(self, request: BackfillRequest) -> list[PlannedRun]:
        return self._backfills.planned_runs(request)

    def planned_runs_in_parts(
        self,
        request: BackfillRequest,
        *,
        limit: int | None = None,
        backwards: bool = False,
        runs_a_day: float | None = None,
    ) -> list[PlannedRun]:
        return self._backfills.planned_runs_in_parts(request, limit=limit, backwards=backwards, runs_a_day=runs_a_day)

    def create(self, request: BackfillRequest) -> Backfill:
        return self._backfills.create(request)

    def pause(self, backfill_id: int) -> Backfill:
        return self._backfills.pause(backfill_id)

    def last_pause(self, backfill_id: int) -> tuple[str | None, datetime] | None:
        return self._backfills.last_pause(backfill_id)

    def unpause(self, backfill_id: int) -> Backfill:
        return self._backfills.unpause(backfill_id)

    def cancel(self, backfill_id: int) -> Backfill:
        return self._backfills.cancel(backfill_id)

    def backfill_slots(self, backfill_id: int, *, pages: int | None = None) -> list[BackfillSlot] | None:
        """Every slot of the backfill (Airflow 3.4: `backfill_slots`); None when over `pages` pages."""
        return self._slots.of_backfill(backfill_id, pages=pages)

    # --- DAGs -----------------------------------------------------------------------------------------

    def dag(self, dag_id: str, *, with_tasks: bool = True) -> DagInfo:
        return self._dags.get(dag_id, with_tasks=with_tasks)

    def dag_version_ids(self, dag_id: str) -> frozenset[str]:
        return self._dags.version_ids(dag_id)

    def dag_infos(self, dag_ids: Iterable[str]) -> dict[str, DagInfo]:
        return self._dags.infos(dag_ids)

    @property
    def dag_listing_at_hand(self) -> bool:
        """Whether the DAG listing's first page costs no call (the preflight read it for this command)."""
        return self._dags.first_page_at_hand

    def dag_ids(self) -> set[str]:
        return self._dags.ids()

    # --- DAG-run notes (the policy's `airflow_notes`) ---------------------------------------------------

    def noted_runs(self, dag_id: str, from_date: datetime, to_date: datetime, limit: int) -> list[NotedRun]:
        return self._notes.backfill_runs(dag_id, from_date, to_date, limit)

    def set_run_note(self, dag_id: str, run_id: str, note: str) -> None:
        self._notes.set_note(dag_id, run_id, note)

    # --- DAG runs -------------------------------------------------------------------------------------

    def dag_runs(
        self, dag_id: str, from_date: datetime, to_date: datetime, *, partitioned: bool = False
    ) -> list[DagRun]:
        return self._runs.dag_runs(dag_id, from_date, to_date, partitioned=partitioned)

    def newest_runs(self, dag_id: str, from_date: datetime, to_date: datetime, *, partitioned: bool) -> list[DagRun]:
        return self._runs.newest_runs(dag_id, from_date, to_date, partitioned=partitioned)

    def dag_runs_if_within(
        self, dag_id: str, from_date: datetime, to_date: datetime, *, partitioned: bool, pages: int
    ) -> list[DagRun] | None:
        return self._runs.dag_runs_if_within(dag_id, from_date, to_date, partitioned=partitioned, pages=pages)

    def run_summary(
        self,
        dag_id: str,
        from_date: datetime,
        to_date: datetime,
        *,
        page: tuple[list[DagRun], int] | None = None,
        expected: int | None = None,
    ) -> RunSummary:
        return self._runs.run_summary(dag_id, from_date, to_date, page=page, expected=expected)

    def runs_or_summary(self, dag_id: str, from_date: datetime, to_date: datetime) -> list[DagRun] | RunSummary:
        return self._runs.runs_or_summary(dag_id, from_date, to_date)

    def queued_runs(self, dag_id: str, from_date: datetime, to_date: datetime) -> tuple[int, datetime | None]:
        return self._runs.queued_runs(dag_id, from_date, to_date)

    def range_runs(
        self, dag_id: str, from_date: datetime, to_date: datetime, *, kept: tuple[str, ...], partitioned: bool = False
    ) -> tuple[int, list[DagRun], int]:
        return self._runs.range_runs(dag_id, from_date, to_date, kept=kept, partitioned=partitioned)

    def range_read(
        self, dag_id: str, from_date: datetime, to_date: datetime, *, kept: tuple[str, ...], partitioned: bool = False
    ) -> RangeRead:
        return self._runs.range_read(dag_id, from_date, to_date, kept=kept, partitioned=partitioned)

    def runs_with_types(
        self, dag_id: str, from_date: datetime, to_date: datetime, *, partitioned: bool = False
    ) -> list[tuple[DagRun, str]]:
        return self._runs.runs_with_types(dag_id, from_date, to_date, partitioned=partitioned)

    # --- runs the controller triggers (verification, publish) ------------------------------------------

    def trigger_run(self, dag_id: str, run_id: str, conf: Mapping[str, Any]) -> tuple[TriggeredRun, bool]:
        """Start run `run_id` of `dag_id` with `conf`: (the run, True), or (the run that has that id already,
        False: adopted, never a second one). A timeout or 5xx raises AirflowAmbiguous and is never re-sent
        here; with a derived run id, `get_run` (or `trigger_run` again) is the safe next step."""
        return self._triggers.trigger(dag_id, run_id, conf)

    def get_run(self, dag_id: str, run_id: str) -> TriggeredRun | None:
        return self._triggers.get(dag_id, run_id)

    def task_result(self, dag_id: str, run_id: str, task_id: str) -> Any | None:
        """The task's XCom `return_value` as JSON; None when it pushed none."""
        return self._triggers.result(dag_id, run_id, task_id)

    # --- the load a backfill sets off (assets, pools) -------------------------------------------------

    def produced_assets(self, dag_id: str) -> tuple[tuple[AssetTrigger, ...] | None, str | None]:
        return self._assets.produced_by(dag_id)

    def pool_slots(self) -> dict[str, int]:
        return self._pools.slots()

    def task_pools(self, dag_id: str) -> list[str | None]:
        return self._pools.task_pools(dag_id)
