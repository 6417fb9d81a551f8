"""Airflow 3 REST client (httpx): backfills, DAG details, DAG runs.

Owns httpx: every httpx exception and every error status becomes a `controller.errors.AirflowError`
subclass carrying method, path, status and Airflow's detail cut to 256 characters, never a header or a
token.  Reads and connect failures are retried with capped exponential backoff and jitter; a POST that
may have reached the server (timeout after send, 5xx) raises `AirflowAmbiguous` so the caller observes
before trying again.  The API facts it relies on are pinned by tests/airflow/test_contract.py, on each
supported line (3.1, 3.2, 3.3); what differs between releases is asked of `capabilities`, read from
`/api/v2/version` once.
"""

from __future__ import annotations

import logging
import random
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import httpx

from controller.core.documents.escaping import plain
from controller.core.model.airflow import (
    Backfill,
    BackfillRequest,
    DagInfo,
    DagRun,
    DagVersion,
    PlannedRun,
    RunSummary,
    Schedule,
    periodic_from_summary,
    summarise,
    summary_from_counts,
)
from controller.core.model.capabilities import (
    ALLOW_UNTESTED,
    NEWEST_KNOWN,
    RUN_FILTERS,
    SUPPORTED,
    Capabilities,
    Support,
    has_filter,
    judge,
    run_on_latest,
    unsupported_request,
)
from controller.core.model.guards import SchedulerHealth
from controller.core.model.secret import Secret, header_problem, redact_url
from controller.core.model.spec import format_utc
from controller.core.rules.chunks import FIRST_SPAN, TARGET_RUNS, TICK, next_sub_range, sub_range_span
from controller.core.rules.retrying import Backoff, Failure, Request, Verdict, classify, outcome_of, request_kind
from controller.errors import (
    AirflowAmbiguous,
    AirflowAuthError,
    AirflowConflict,
    AirflowError,
    AirflowInvalid,
    AirflowNotFound,
    AirflowUnavailable,
    AirflowVersionError,
    ConfigError,
    truncate,
)

log = logging.getLogger(__name__)
PAGE = 100  # the server clamps larger limits to 100 silently
MAX_CONCURRENT = 8  # requests at once, whatever the callers' pools: overlaps latency, bounded for a shared server
IN_FLIGHT = ("queued", "running")  # a run in these states makes Airflow skip its date in a new backfill
# runs that started and ended: Airflow's start/end date filters let nulls through and it ignores a bound of 0
# (it tests the bound's truth), so a microsecond it is
FINISHED_AFTER_START = {"duration_gte": "0.000001"}
_STATUS_ERRORS: dict[int, type[AirflowError]] = {
    400: AirflowInvalid,
    401: AirflowAuthError,
    403: AirflowAuthError,
    404: AirflowNotFound,
    409: AirflowConflict,
    422: AirflowInvalid,
}


def _range_params(
    from_date: datetime, to_date: datetime, *, partitioned: bool = False, backfill_only: bool = True
) -> dict[str, Any]:
    """The one DAG-runs range query: by logical date, or by partition date for a partitioned DAG (whose
    runs have no logical date; a reprocessed partition has several runs, oldest first)."""
    field, order = ("partition_date", "id") if partitioned else ("logical_date", "logical_date")
    params = {f"{field}_gte": format_utc(from_date), f"{field}_lte": format_utc(to_date), "order_by": order}
    return {"run_type": "backfill", **params} if backfill_only else params


def unsupported_filters(caps: Capabilities, params: Mapping[str, Any]) -> list[str]:
    """The query parameters in `params` that the server would ignore (it answers unfiltered)."""
    return sorted(name for name in params if not has_filter(caps, name))


def parse_time(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value.replace("Z", "+00:00"))


def _required_time(value: str | None) -> datetime:
    """A time Airflow must send; a missing one is Airflow's error to report, never an AssertionError."""
    parsed = parse_time(value)
    if parsed is None:
        raise AirflowError("Airflow answered without a required date-time field", hint="is it Airflow 3.3 or newer?")
    return parsed


def backfill_from_json(data: Mapping[str, Any]) -> Backfill:
    return Backfill(
        id=int(data["id"]),
        dag_id=data["dag_id"],
        from_date=_required_time(data["from_date"]),
        to_date=_required_time(data["to_date"]),
        reprocess_behavior=data["reprocess_behavior"],
        max_active_runs=int(data["max_active_runs"]),
        is_paused=bool(data["is_paused"]),
        dag_run_conf=data.get("dag_run_conf"),
        created_at=_required_time(data["created_at"]),
        completed_at=parse_time(data.get("completed_at")),
    )


def dag_run_from_json(data: Mapping[str, Any]) -> DagRun:
    """A run; a partitioned DAG's runs have `logical_date: null` and a `partition_key`/`partition_date`."""
    return DagRun(
        data["dag_run_id"],
        parse_time(data.get("logical_date")),
        data["state"],
        parse_time(data.get("start_date")),
        parse_time(data.get("end_date")),
        partition_key=data.get("partition_key"),
        partition_date=parse_time(data.get("partition_date")),
        queued_at=parse_time(data.get("queued_at")),
        dag_versions=tuple(
            DagVersion(int(v["version_number"]), v.get("bundle_version")) for v in data.get("dag_versions") or ()
        ),
    )


def planned_run_from_json(data: Mapping[str, Any]) -> PlannedRun:
    """A dry-run entry: `logical_date`, or for a partitioned DAG `partition_key` and `partition_date`."""
    planned = PlannedRun(
        parse_time(data.get("logical_date")), data.get("partition_key"), parse_time(data.get("partition_date"))
    )
    if planned.logical_date is None and planned.partition_date is None:
        raise AirflowUnavailable(
            f"POST /api/v2/backfills/dry_run: an entry has no logical_date and no partition_date: "
            f"{truncate(str(data))}",
            method="POST",
            path="/api/v2/backfills/dry_run",
        )
    return planned


def schedule_from_json(details: Mapping[str, Any], caps: Capabilities) -> Schedule:
    """The timetable; a release without `timetable_periodic` (before 3.3.0) is read from its summary."""
    allowed = details.get("allowed_run_types") if caps.allowed_run_types else None
    summary = details.get("timetable_summary")
    periodic = details.get("timetable_periodic") if caps.timetable_periodic else periodic_from_summary(summary)
    return Schedule(
        periodic=bool(periodic),
        summary=summary,
        description=details.get("timetable_description"),
        allowed_run_types=None if allowed is None else tuple(str(t) for t in allowed),
        asset_triggered=bool(details.get("asset_expression")),
    )


def dag_info_from_json(
    dag_id: str, data: Mapping[str, Any], caps: Capabilities, depends_on_past: bool | None = None
) -> DagInfo:
    """A DAG's info from its details or its entry in the DAG listing (the same fields but `params` and
    `asset_expression`, which only the details carry). A field the release lacks has a defined meaning:
    no `timetable_partitioned` (before 3.2.0) is not partitioned (no partitioned timetable exists there),
    no `is_backfillable` (before 3.3.0) is periodic and allowing backfill runs."""
    schedule = schedule_from_json(data, caps)
    allowed = schedule.allowed_run_types
    derived = schedule.periodic and (allowed is None or "backfill" in allowed)
    partitioned = caps.partitioned_dags and bool(data.get("timetable_partitioned"))
    return DagInfo(
        dag_id=dag_id,
        is_paused=bool(data["is_paused"]),
        is_stale=bool(data.get("is_stale")),
        has_import_errors=bool(data.get("has_import_errors")),
        is_backfillable=bool(data.get("is_backfillable")) if caps.is_backfillable else derived,
        depends_on_past=depends_on_past,
        params=data.get("params") or {},
        partitioned=partitioned,
        schedule=schedule,
        max_active_tasks=data["max_active_tasks"] if isinstance(data.get("max_active_tasks"), int) else None,
        refusal=None if not partitioned or caps.partition_date_filter else _partitions_unreadable(dag_id, caps),
        dag_version=_dag_version(data.get("latest_dag_version")),
        rerun_with_latest_version=data.get("rerun_with_latest_version") if caps.rerun_with_latest_version else None,
    )


def _dag_version(latest: Any) -> str | None:
    """The details' `latest_dag_version` (the code new runs use), as the plan shows it; None when absent."""
    if not isinstance(latest, Mapping) or latest.get("version_number") is None:
        return None
    bundle = latest.get("bundle_version")
    return f"{latest['version_number']}" + (f" (bundle {bundle})" if bundle else "")


def _partitions_unreadable(dag_id: str, caps: Capabilities) -> str:
    return (
        f"DAG {dag_id} is partitioned, and Airflow {caps.version} cannot filter DAG runs by partition date "
        "(partition_date_gte/lte: Airflow 3.3.1), so backfillctl cannot count its runs exactly; "
        "upgrade Airflow to 3.3.1 or newer to backfill it"
    )


Sleep = Callable[[float], None]


class AirflowClient:
    """One Airflow API server. Pass `transport` to test with a fake (httpx.MockTransport)."""

    def __init__(
        self,
        base_url: str,
        *,
        token: Secret | None = None,
        username: str | None = None,
        password: Secret | None = None,
        transport: httpx.BaseTransport | None = None,
        timeout: float = 30.0,
        backoff: Backoff | None = None,
        sleep: Sleep = time.sleep,
        rng: Callable[[], float] = random.random,
        allow_untested: bool = False,
        capabilities: Capabilities | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.shown_url = redact_url(self.base_url)  # the one form of the URL any message carries
        self.allow_untested = allow_untested  # BACKFILLCTL_ALLOW_UNTESTED_AIRFLOW: a release newer than tested
        self._capabilities = capabilities  # read from /api/v2/version once (preflight, or the first need)
        self._token, self._username, self._password = token, username, password
        self._static_token = token is not None
        self.seen_dag_ids: set[str] = set()  # every id the DAG listing has shown: a missing DAG's likely fixes
        self._all_listed = False
        self._backoff, self._sleep, self._rng = backoff or Backoff(), sleep, rng
        try:
            self._http = httpx.Client(
                base_url=self.base_url,
                transport=transport,
                follow_redirects=False,
                timeout=httpx.Timeout(timeout, connect=5.0),
                headers={"Accept": "application/json"},
            )
            self._http.build_request("GET", "/")  # a host IDNA cannot encode fails here, not at the first call
        except (httpx.InvalidURL, ValueError):  # never httpx's text: it quotes the part it could not parse
            raise ConfigError(f"BACKFILLCTL_AIRFLOW_URL={self.shown_url!r} is not a valid URL", hint=URL_HINT) from None
        self._login_lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(MAX_CONCURRENT)
        self.calls: list[tuple[str, str]] = []  # (method, path) of every request sent, for call-count tests
        self.observer: Callable[[str, str, int | None], None] | None = None  # (method, path, status): metrics

    def __repr__(self) -> str:
        return f"AirflowClient({self.shown_url!r}, token=[secure])"

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> AirflowClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- the API ------------------------------------------------------------------------------------

    def version(self) -> str:
        """The release the server reports; one backfillctl does not support is refused here (see `judge`)."""
        data = self._json("GET", "/api/v2/version")
        version = str(data.get("version", "")) if isinstance(data, dict) else ""
        if not version or not version.split(".", maxsplit=1)[0].isdigit() or int(version.split(".")[0]) < 3:
            raise AirflowVersionError(
                f"Airflow at {self.shown_url} reports version {version or 'unknown'}; backfillctl needs Airflow 3",
                method="GET",
                path="/api/v2/version",
                hint="point BACKFILLCTL_AIRFLOW_URL at an Airflow 3 api-server",
            )
        self._capabilities = self._judged(version)
        return version

    @property
    def known_capabilities(self) -> Capabilities | None:
        """The capabilities if the version was read already (never a call)."""
        return self._capabilities

    @property
    def capabilities(self) -> Capabilities:
        """What this server's API has, from its version (read once)."""
        if self._capabilities is None:
            self.version()
        assert self._capabilities is not None  # version() sets it or raises
        return self._capabilities

    def _judged(self, version: str) -> Capabilities:
        verdict, path = judge(version), "/api/v2/version"
        if verdict.capabilities is None:
            raise AirflowVersionError(
                verdict.message,
                method="GET",
                path=path,
                hint=f"use an Airflow {SUPPORTED} api-server (upgrade this one)",
            )
        if verdict.support is Support.UNTESTED and not self.allow_untested:
            raise AirflowVersionError(
                f"{verdict.message}; refusing to run against an untested release",
                method="GET",
                path=path,
                hint=f"set {ALLOW_UNTESTED}=1 to go on with the newest known release's API, or use Airflow {SUPPORTED}",
            )
        if verdict.support is Support.UNTESTED:
            log.warning(
                "UNTESTED AIRFLOW RELEASE (%s=1): %s; going on with the API of Airflow %s, the newest known",
                ALLOW_UNTESTED,
                verdict.message,
                NEWEST_KNOWN,
            )
        return verdict.capabilities

    def preflight(self) -> str:
        """One quick check before a command's work: the URL answers like Airflow 3, and the credentials work.

        Two attempts at most, so an unreachable host fails within about 15 s and a misconfiguration at once.
        """
        quick = Backoff(self._backoff.base, self._backoff.cap, self._backoff.jitter, attempts=2)
        saved, self._backoff = self._backoff, quick
        try:
            version = self._preflight_version()
            self._json("GET", "/api/v2/dags", params={"limit": 1})  # a refusal says "refused the credentials"
        finally:
            self._backoff = saved
        return version

    def _preflight_version(self) -> str:
        where = f"BACKFILLCTL_AIRFLOW_URL={self.shown_url}"
        try:
            return self.version()
        except AirflowUnavailable as exc:
            if exc.status is None:
                raise AirflowUnavailable(
                    f"cannot reach Airflow at {where}: {exc.message}",
                    method=exc.method,
                    path=exc.path,
                    hint="is Airflow's api-server running, and is that its address?",
                ) from None
            raise _not_airflow(where, exc) from None
        except (AirflowNotFound, AirflowInvalid) as exc:
            raise _not_airflow(where, exc) from None

    def list_backfills(self, dag_id: str, *, newest: frozenset[int] | None = None) -> list[Backfill]:
        """The DAG's backfills, oldest first. With `newest`, only the newest ones down to the oldest of these
        ids: a DAG's active backfill is always its newest (Airflow refuses a create while one is active), so
        a pass whose specs are bound reads one page, not the DAG's whole backfill history."""
        if newest is None:
            items = self._paginate("/api/v2/backfills", "backfills", {"dag_id": dag_id, "order_by": "id"})
            return [backfill_from_json(item) for item in items]
        found: list[Backfill] = []
        for item in self._paginate("/api/v2/backfills", "backfills", {"dag_id": dag_id, "order_by": "-id"}):
            found.append(backfill_from_json(item))
            if len(found) % PAGE == 0 and newest <= {b.id for b in found}:
                break
        return found[::-1]

    def get_backfill(self, backfill_id: int) -> Backfill:
        return backfill_from_json(self._json("GET", f"/api/v2/backfills/{backfill_id}"))

    def dry_run(self, request: BackfillRequest) -> list[datetime]:
        """The dates the create would run: logical dates, or partition dates for a partitioned DAG."""
        return [planned.date for planned in self.planned_runs(request)]

    def backfill_body(self, request: BackfillRequest) -> dict[str, Any]:
        """The create (and dry-run) body this server accepts, with `run_on_latest_version` explicit where
        it has the field; a field the spec sets that the release lacks is refused, never dropped."""
        caps = self.capabilities
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
        data = self._json("POST", "/api/v2/backfills/dry_run", json=self.backfill_body(request), idempotent=True)
        return [planned_run_from_json(item) for item in data["backfills"]]

    def planned_runs_in_parts(
        self, request: BackfillRequest, *, limit: int | None = None, backwards: bool = False
    ) -> list[PlannedRun]:
        """The dry run of a range of any size, as consecutive sub-ranges each aimed at a few seconds of the
        server's time (issue 13: one dry run of four hourly years outlived every timeout), in date order;
        with `limit`, it stops once that many runs from the range's start (its end when backwards) are known."""
        found: list[PlannedRun] = []
        rest: tuple[datetime, datetime] | None = (request.from_date, request.to_date)
        span, covered = FIRST_SPAN, timedelta(0)
        while rest is not None and (limit is None or len(found) < limit):
            (low, high), rest = next_sub_range(*rest, span, backwards=backwards)
            part = self.planned_runs(replace(request, from_date=low, to_date=high))
            found = part + found if backwards else found + part
            covered += high - low + TICK
            wanted = TARGET_RUNS if limit is None else min(TARGET_RUNS, max(limit - len(found), 1) * 5 // 4 + 1)
            span = sub_range_span(len(found), covered, wanted)
        return sorted(found, key=lambda p: p.date)

    def create(self, request: BackfillRequest) -> Backfill:
        return backfill_from_json(self._json("POST", "/api/v2/backfills", json=self.backfill_body(request)))

    def pause(self, backfill_id: int) -> Backfill:
        return backfill_from_json(self._json("PUT", f"/api/v2/backfills/{backfill_id}/pause"))

    def unpause(self, backfill_id: int) -> Backfill:
        return backfill_from_json(self._json("PUT", f"/api/v2/backfills/{backfill_id}/unpause"))

    def cancel(self, backfill_id: int) -> Backfill:
        return backfill_from_json(self._json("PUT", f"/api/v2/backfills/{backfill_id}/cancel"))

    def dag(self, dag_id: str, *, with_tasks: bool = True) -> DagInfo:
        """DAG details; `with_tasks` adds a call to learn `depends_on_past` (None when not asked)."""
        details = self._json("GET", f"/api/v2/dags/{dag_id}/details")
        tasks = self._json("GET", f"/api/v2/dags/{dag_id}/tasks") if with_tasks else None
        depends_on_past = None if tasks is None else any(t.get("depends_on_past") for t in tasks.get("tasks", []))
        return dag_info_from_json(dag_id, details, self.capabilities, depends_on_past)

    def dag_infos(self, dag_ids: Iterable[str]) -> dict[str, DagInfo]:
        """Several DAGs' infos from the DAG listing (one call per 100 DAGs instead of one per DAG).

        The listing reads pages while fewer pages remain than DAGs are missing; a DAG it does not hold
        (stale, on a page not read) is left out, for `dag()` to look up; so is a DAG that is not periodic,
        whose refusal names the reason only the details tell (asset-triggered or not)."""
        wanted, found = set(dag_ids), dict[str, DagInfo]()
        offset, caps = 0, self.capabilities
        while wanted - found.keys():
            data = self._json("GET", "/api/v2/dags", params={"limit": PAGE, "offset": offset, "order_by": "dag_id"})
            items = data["dags"]
            self.seen_dag_ids.update(str(item["dag_id"]) for item in items)
            for item in items:
                info = dag_info_from_json(item["dag_id"], item, caps) if item["dag_id"] in wanted else None
                if info is not None and info.schedule is not None and info.schedule.periodic:
                    found[item["dag_id"]] = info
            offset += len(items)
            pages_left = -(-(int(data["total_entries"]) - offset) // PAGE)
            if not items or pages_left <= 0 or pages_left >= len(wanted - found.keys()):
                break
        return found

    def dag_ids(self) -> set[str]:
        """Every DAG id, from the listing (read once per client)."""
        if not self._all_listed:
            params = {"order_by": "dag_id"}
            self.seen_dag_ids.update(str(item["dag_id"]) for item in self._paginate("/api/v2/dags", "dags", params))
            self._all_listed = True
        return self.seen_dag_ids

    def dag_runs(
        self, dag_id: str, from_date: datetime, to_date: datetime, *, partitioned: bool = False
    ) -> list[DagRun]:
        """Backfill runs in the range (see `_range_params`)."""
        params = _range_params(from_date, to_date, partitioned=partitioned)
        items = self._paginate(f"/api/v2/dags/{dag_id}/dagRuns", "dag_runs", params)
        return [dag_run_from_json(item) for item in items]

    def dag_runs_if_within(
        self, dag_id: str, from_date: datetime, to_date: datetime, *, partitioned: bool, pages: int
    ) -> list[DagRun] | None:
        """The backfill runs in the range if they fit in `pages` pages (the first call tells), else None."""
        path, params = f"/api/v2/dags/{dag_id}/dagRuns", _range_params(from_date, to_date, partitioned=partitioned)
        first, total = self._runs_page(path, {**params, "offset": 0})
        if -(-total // PAGE) > pages:
            return None
        rest = self._paginate(path, "dag_runs", params, offset=len(first)) if total > PAGE else ()
        return first + [dag_run_from_json(item) for item in rest]

    def run_summary(
        self, dag_id: str, from_date: datetime, to_date: datetime, *, page: tuple[list[DagRun], int] | None = None
    ) -> RunSummary:
        """A backfill's runs by state at a cost that does not grow with its size (logical-date DAGs).

        Up to one page of runs: that page (1 call). More: the queued and running counts from `total_entries`
        of state-filtered queries (`limit=1`), the failed runs (paginated over failures only), the latest
        finished page for the mean duration, and success as what is left of the first page's total — 5
        calls for a year of hourly runs instead of 88 pages (6 when over a hundred runs failed: the failed
        dates shown are then the first hundred).
        """
        path, params = f"/api/v2/dags/{dag_id}/dagRuns", _range_params(from_date, to_date)
        first, total = page or self._runs_page(path, {**params, "offset": 0})  # `page`: the first one, already read
        if total <= len(first):
            return summarise(first)
        # the latest runs that ran (never-started ones have no end date, and PostgreSQL sorts nulls first);
        # before 3.2.0 there is no duration filter: the mean is of the page's runs that ran (summarise skips
        # the others), a smaller sample when runs cancelled while queued sort first
        recent_params = {**params, "state": ["success", "failed"], **self._started(), "order_by": "-end_date"}
        with ThreadPoolExecutor(max_workers=4, thread_name_prefix="summary") as pool:  # independent reads: overlap them
            counted = {
                state: pool.submit(self._count, path, {**params, "state": state}) for state in ("queued", "running")
            }
            failing, latest = (
                pool.submit(self._failures, path, params),
                pool.submit(self._runs_page, path, recent_params),
            )
            counts = {state: future.result() for state, future in counted.items()}
            (failed, failures, never_started), (recent, _) = failing.result(), latest.result()
        # a run that changed state between these calls is counted once, never below zero
        counts |= {"failed": failures, "success": max(0, total - sum(counts.values()) - failures)}
        return summary_from_counts(counts, failed, recent, never_started=never_started)

    def runs_or_summary(self, dag_id: str, from_date: datetime, to_date: datetime) -> list[DagRun] | RunSummary:
        """The backfill runs in the range when one page holds them (1 call: a running backfill's own runs are
        then told apart), else their counts by state as `run_summary` makes them (no call more than it)."""
        path, params = f"/api/v2/dags/{dag_id}/dagRuns", _range_params(from_date, to_date)
        page = self._runs_page(path, {**params, "offset": 0})
        return page[0] if page[1] <= len(page[0]) else self.run_summary(dag_id, from_date, to_date, page=page)

    def _failures(self, path: str, params: dict[str, Any]) -> tuple[list[DagRun], int, int | None]:
        """The failed runs to show (at most a page of them), how many failed, and how many of those never
        started (None: count them in the runs shown). Beyond a page, the started failures are counted and
        their first page shown, so thousands of failures cost two calls, not one per hundred."""
        first, failures = self._runs_page(path, {**params, "state": "failed"})
        if failures <= len(first):
            return first, failures, None
        if not self.capabilities.duration_filter:  # no filter for "started": every failed run is read and
            # counted here, one call per hundred failures instead of one (before Airflow 3.2.0)
            rest = self._paginate(path, "dag_runs", {**params, "state": "failed"}, offset=len(first))
            every = first + [dag_run_from_json(item) for item in rest]
            started_runs = [r for r in every if r.start_date is not None]
            return started_runs[:PAGE], len(every), len(every) - len(started_runs)
        shown, started = self._runs_page(path, {**params, "state": "failed", **FINISHED_AFTER_START})
        return shown, failures, max(0, failures - started)

    def _ignored(self, params: Mapping[str, Any]) -> list[str]:
        return unsupported_filters(self.capabilities, params)

    def _started(self) -> dict[str, str]:
        """The filter for runs that started and ended, where the server has it (3.2.0)."""
        return FINISHED_AFTER_START if self.capabilities.duration_filter else {}

    def queued_runs(self, dag_id: str, from_date: datetime, to_date: datetime) -> tuple[int, datetime | None]:
        """How many backfill runs in the range are queued, and the oldest queue time among the first page of
        them by id (a backfill queues its runs together): one call, whatever the range."""
        path, params = f"/api/v2/dags/{dag_id}/dagRuns", _range_params(from_date, to_date)
        queued, total = self._runs_page(path, {**params, "state": "queued", "order_by": "id"})
        return total, min((r.queued_at for r in queued if r.queued_at is not None), default=None)

    def _runs_page(self, path: str, params: dict[str, Any]) -> tuple[list[DagRun], int]:
        """One page of DAG runs, and how many the query matches in all."""
        data = self._json("GET", path, params={**params, "limit": PAGE})
        return [dag_run_from_json(item) for item in data["dag_runs"]], int(data["total_entries"])

    def _count(self, path: str, params: dict[str, Any]) -> int:
        return int(self._json("GET", path, params={**params, "limit": 1})["total_entries"])

    def health(self) -> dict[str, Any]:
        """`GET /api/v2/monitor/health` (no auth; always 200: the JSON tells the scheduler's status)."""
        data = self._json("GET", "/api/v2/monitor/health")
        return data if isinstance(data, dict) else {}

    def range_runs(
        self, dag_id: str, from_date: datetime, to_date: datetime, *, kept: tuple[str, ...], partitioned: bool = False
    ) -> tuple[int, list[DagRun], int]:
        """Runs of any type in the range, for a spec still to be created: how many are in the `kept` states (the
        finished runs its reprocess rule leaves alone), the queued or running ones Airflow will skip (the first
        page of them) and how many those are. One call up to a page of runs, else three."""
        path = f"/api/v2/dags/{dag_id}/dagRuns"
        params = _range_params(from_date, to_date, partitioned=partitioned, backfill_only=False)
        runs, total = self._runs_page(path, {**params, "offset": 0})
        if total <= len(runs):
            flying = [r for r in runs if r.state in IN_FLIGHT]
            return sum(1 for r in runs if r.state in kept), flying, len(flying)
        counted = self._count(path, {**params, "state": list(kept)}) if kept else 0
        page, in_flight = self._runs_page(path, {**params, "state": list(IN_FLIGHT)})
        return counted, [r for r in page if r.state in IN_FLIGHT], in_flight

    def scheduler_health(self) -> SchedulerHealth:
        """The scheduler's status and heartbeat (the load guards' brake); an unreadable answer says why."""
        try:
            data = self.health()
            scheduler = data.get("scheduler")
            if not isinstance(scheduler, dict) or "status" not in scheduler:
                return SchedulerHealth(error="GET /api/v2/monitor/health: the answer has no scheduler status")
            beat = scheduler.get("latest_scheduler_heartbeat")
            return SchedulerHealth(scheduler["status"], parse_time(beat) if isinstance(beat, str) else None)
        except (AirflowError, ValueError) as exc:  # ValueError: a heartbeat that is not a time
            return SchedulerHealth(error=exc.message if isinstance(exc, AirflowError) else f"bad heartbeat: {exc}")

    def runs_with_types(
        self, dag_id: str, from_date: datetime, to_date: datetime, *, partitioned: bool = False
    ) -> list[tuple[DagRun, str]]:
        """Every run in the range (any run type), with its run type: the report's heat map (issue 15)."""
        params = _range_params(from_date, to_date, partitioned=partitioned, backfill_only=False)
        items = self._paginate(f"/api/v2/dags/{dag_id}/dagRuns", "dag_runs", params)
        return [(dag_run_from_json(item), str(item.get("run_type"))) for item in items]

    # --- plumbing ------------------------------------------------------------------------------------

    def _paginate(self, path: str, key: str, params: dict[str, Any], *, offset: int = 0) -> Iterator[Mapping[str, Any]]:
        while True:
            data = self._json("GET", path, params={**params, "limit": PAGE, "offset": offset})
            items = data[key]
            yield from items
            offset += len(items)
            if not items or offset >= int(data["total_entries"]):
                return

    def _json(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        idempotent: bool = False,
    ) -> Any:
        if params and any(name in RUN_FILTERS for name in params) and (ignored := self._ignored(params)):
            raise AirflowVersionError(  # the server would ignore it and answer unfiltered: a wrong count
                f"{method} {path}: Airflow {self.capabilities.version} has no filter {', '.join(ignored)}",
                method=method,
                path=path,
            )
        response = self._send(method, path, json=json, params=params, idempotent=idempotent)
        try:
            return response.json()
        except ValueError:
            raise AirflowUnavailable(
                f"{method} {path} -> {response.status_code}: the body is not JSON "
                f"({truncate(response.headers.get('content-type', 'no content type'), 60)})",
                method=method,
                path=path,
                status=response.status_code,
            ) from None

    def _send(
        self, method: str, path: str, *, json: Any, params: Mapping[str, Any] | None, idempotent: bool
    ) -> httpx.Response:
        kind = request_kind(method, idempotent=idempotent)
        reauthenticated = False
        for attempt in range(1, self._backoff.attempts + 1):
            response, error = self._attempt(method, path, json, params, kind)
            if (
                response is not None
                and response.status_code in (401, 403)
                and self._can_login()
                and not reauthenticated
            ):
                self._token, reauthenticated = None, True
                response, error = self._attempt(method, path, json, params, kind)
            verdict = Verdict.RETRY
            if response is not None:
                verdict = classify(kind, outcome_of(response.status_code))
                if verdict is Verdict.OK:
                    return response
                error = self._refused(status_error(method, path, response, self._redact, kind))
            elif not isinstance(error, AirflowUnavailable):  # the table chose the class: only this one retries
                verdict = Verdict.PERMANENT
            if error is None or verdict is not Verdict.RETRY or attempt == self._backoff.attempts:
                raise error or AirflowError(f"{method} {path}: no answer", method=method, path=path)
            delay = self._backoff.delay(attempt, self._rng(), _retry_after(response))
            log.warning(
                "attempt #%d/%d failed; will retry in %.1fs: %s", attempt, self._backoff.attempts, delay, error.message
            )
            self._sleep(delay)
        raise AirflowError(f"{method} {path}: no attempt made", method=method, path=path)  # attempts < 1

    def _attempt(
        self, method: str, path: str, json: Any, params: Mapping[str, Any] | None, kind: Request
    ) -> tuple[httpx.Response | None, AirflowError | None]:
        try:
            headers = self._auth_headers()
            self.calls.append((method, path))
            with self._slots:
                response = self._http.request(method, path, json=json, params=params, headers=headers)
        except _HTTPX_ERRORS as exc:
            if self.observer is not None:
                self.observer(method, path, None)
            return None, translate_any(method, path, exc, kind)
        if self.observer is not None:
            self.observer(method, path, response.status_code)
        if response.is_redirect:
            raise AirflowError(
                f"{method} {path} -> {response.status_code}: unexpected redirect (not followed)",
                method=method,
                path=path,
                status=response.status_code,
                hint="BACKFILLCTL_AIRFLOW_URL must be the API server's own address",
            )
        return response, None

    def _redact(self, text: str) -> str:
        """Remove our secrets, and anything that looks like a bearer token, from server-supplied text."""
        for secret in (self._token, self._password):
            if secret is not None and secret.reveal():
                text = text.replace(secret.reveal(), "[secure]")
        return _JWT.sub("[secure]", _BEARER.sub("Bearer [secure]", text))

    def _can_login(self) -> bool:
        return self._username is not None and self._password is not None

    def _auth_headers(self) -> dict[str, str]:
        with self._login_lock:  # observation runs in a small pool: one login for all of its threads
            if self._token is None and self._can_login():
                self._token = self._login()
        return {} if self._token is None else {"Authorization": f"Bearer {self._token.reveal()}"}

    def _login(self) -> Secret:
        assert self._password is not None
        path = "/auth/token"
        try:
            self.calls.append(("POST", path))
            response = self._http.post(path, json={"username": self._username, "password": self._password.reveal()})
        except _HTTPX_ERRORS as exc:
            raise translate_any("POST", path, exc, Request.READ) from None
        if response.status_code != 201:
            raise self._refused(status_error("POST", path, response, self._redact, Request.READ))
        return self._access_token(response)

    def _access_token(self, response: httpx.Response) -> Secret:
        """The token of a 201 from `POST /auth/token`; any other answer is said (its shape, never a token)."""
        try:
            data = response.json()
        except ValueError:
            kind = _printable(response.headers.get("content-type", "no content type"), 60)
            text = _printable(self._redact(response.text), 80)
            raise self._login_answer(response, f"with a body that is not JSON ({kind}): {text!r}") from None
        token = data.get("access_token") if isinstance(data, dict) else None
        if not isinstance(token, str) or not token:
            raise self._login_answer(response, f"without an access token: {_shape(data)}")
        problem = header_problem(token)
        if problem is not None:
            raise self._login_answer(response, f"with an access token that {problem}")
        return Secret(token)

    def _login_answer(self, response: httpx.Response, what: str) -> AirflowError:
        return AirflowError(
            f"Airflow at {self.shown_url} answered POST /auth/token -> {response.status_code} {what}",
            method="POST",
            path="/auth/token",
            status=response.status_code,
            hint="BACKFILLCTL_AIRFLOW_URL must be the Airflow 3 api-server's own address (not a proxy's login page)",
        )

    def _refused(self, error: AirflowError) -> AirflowError:
        """A 401/403 said as what it is: Airflow refused these credentials; the variables to check, no value."""
        if not isinstance(error, AirflowAuthError):
            return error
        said = f"Airflow said: {error.detail}" if error.detail else "Airflow gave no reason"
        if self._can_login():
            text, hint = "refused the credentials", said
            fix = "check BACKFILLCTL_AIRFLOW_USERNAME/PASSWORD"
        elif self._static_token:
            text, fix = "refused the credentials", "check BACKFILLCTL_AIRFLOW_TOKEN"
            hint = f"{said}; a token expires: with BACKFILLCTL_AIRFLOW_USERNAME/PASSWORD backfillctl gets a new one"
        else:
            text, fix, hint = "wants credentials", _HINTS[401], said
        return AirflowAuthError(
            f"Airflow at {self.shown_url} {text} ({error.method} {error.path} -> {error.status}): {fix}",
            method=error.method,
            path=error.path,
            status=error.status,
            detail=error.detail,
            hint=hint,
        )


def _not_airflow(where: str, exc: AirflowError) -> AirflowError:
    return AirflowVersionError(
        f"{where} does not answer like Airflow 3's API: GET /api/v2/version -> {exc.status}",
        method="GET",
        path="/api/v2/version",
        status=exc.status,
        hint="set it to the Airflow api-server's base address (scheme, host and port, no path)",
    )


def _retry_after(response: httpx.Response | None) -> float | None:
    value = None if response is None else response.headers.get("Retry-After")
    try:
        return None if value is None else float(value)
    except ValueError:
        return None


_BEARER = re.compile(r"(?i)bearer\s+[A-Za-z0-9._~+/=-]+")


_JWT = re.compile(r"eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*")


def _printable(text: str, limit: int) -> str:
    """Outside text cut short, every character outside printable ASCII as `?` (no line breaks, no escapes)."""
    return re.sub(r"[^\x20-\x7e]", "?", text[:limit]) + ("..." if len(text) > limit else "")


def _shape(data: Any) -> str:
    """A JSON value by its shape: an object's keys and the types of their values, never a value."""
    if isinstance(data, dict):
        keys = ", ".join(f"{_printable(str(k), 40)}: {_json_type(v)}" for k, v in list(data.items())[:8])
        return f"a JSON object {{{keys}}}"
    return f"a JSON {_json_type(data)}"


def _json_type(value: Any) -> str:
    kinds: tuple[tuple[type | tuple[type, ...], str], ...] = (
        (dict, "object"), (list, "array"), (str, "string"), (bool, "boolean"), ((int, float), "number")
    )  # fmt: skip
    return next((name for kind, name in kinds if isinstance(value, kind)), "null")


def detail_of(response: httpx.Response, limit: int | None = 256) -> str:
    """Airflow's `detail` (a string, or a list of pydantic errors), else the body, cut to `limit` chars."""
    try:
        detail = response.json().get("detail", response.text)
    except (ValueError, AttributeError):
        detail = response.text
    if isinstance(detail, list):
        detail = "; ".join(f"{'.'.join(map(str, d.get('loc', [])))}: {d.get('msg')}" for d in detail)
    detail = plain(detail)  # server text goes into messages, logs and CI output: no line breaks, no escapes
    return detail if limit is None else truncate(detail, limit)


def status_error(
    method: str,
    path: str,
    response: httpx.Response,
    redact: Callable[[str], str] = lambda text: text,
    kind: Request | None = None,
) -> AirflowError:
    """The error for an unsuccessful answer; its class follows the one retry table (`classify`)."""
    status, detail = response.status_code, truncate(redact(detail_of(response, limit=None)))
    verdict = classify(kind or request_kind(method), outcome_of(status))
    cls = _STATUS_ERRORS.get(status, AirflowInvalid) if verdict is Verdict.PERMANENT else _VERDICT_ERRORS[verdict]
    return cls(
        f"{method} {path} -> {status}: {detail}",
        method=method,
        path=path,
        status=status,
        detail=detail,
        hint=_HINTS.get(status),
    )


_VERDICT_ERRORS: dict[Verdict, type[AirflowError]] = {
    Verdict.OK: AirflowError,
    Verdict.RETRY: AirflowUnavailable,
    Verdict.AMBIGUOUS: AirflowAmbiguous,
    Verdict.OBSERVE: AirflowConflict,
}


_HINTS = {
    401: "set BACKFILLCTL_AIRFLOW_TOKEN, or BACKFILLCTL_AIRFLOW_USERNAME and BACKFILLCTL_AIRFLOW_PASSWORD",
    403: "the token is invalid for this server or lacks permission; get a new one",
}


_CONFIG_FAILURES = (httpx.UnsupportedProtocol, httpx.InvalidURL, httpx.LocalProtocolError)
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.ProxyError)
URL_HINT = "set BACKFILLCTL_AIRFLOW_URL to the API server's address with its scheme, e.g. http://127.0.0.1:8080"
HEADER_HINT = "set BACKFILLCTL_AIRFLOW_TOKEN to the token alone: one line of ASCII characters"


def failure_of(exc: Exception) -> Failure:
    if isinstance(exc, _CONFIG_FAILURES):
        return Failure.CONFIG
    return Failure.NOT_SENT if isinstance(exc, _NOT_SENT) else Failure.AFTER_SEND


def transport_error(method: str, path: str, exc: httpx.HTTPError, kind: Request) -> AirflowError:
    """Map an httpx exception: not sent → unavailable (retryable); maybe processed → ambiguous for a create."""
    failure = failure_of(exc)
    text = f"{method} {path} failed: {type(exc).__name__}"
    if isinstance(exc, httpx.LocalProtocolError):  # never str(exc): it quotes the header, token and all
        return AirflowError(f"{text}: a header value cannot be sent", method=method, path=path, hint=HEADER_HINT)
    if failure is Failure.CONFIG:
        return AirflowError(f"{text}: {truncate(str(exc), 120)}", method=method, path=path, hint=URL_HINT)
    if classify(kind, failure) is Verdict.AMBIGUOUS:
        return AirflowAmbiguous(text + " (the request may have been processed)", method=method, path=path)
    return AirflowUnavailable(text, method=method, path=path, hint="is Airflow's api-server running and reachable?")


_HTTPX_ERRORS = (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, httpx.CookieConflict)


def translate_any(method: str, path: str, exc: Exception, kind: Request | None = None) -> AirflowError:
    """Every exception httpx can raise, as ours (the meta-test checks each httpx exception class)."""
    if isinstance(exc, httpx.HTTPError):
        return transport_error(method, path, exc, kind or request_kind(method))
    hint = URL_HINT if isinstance(exc, httpx.InvalidURL) else None
    return AirflowError(f"{method} {path} failed: {type(exc).__name__}", method=method, path=path, hint=hint)
