"""A stateful fake of Airflow 3.3.2's REST API on httpx.MockTransport, for fault injection.

It must pass the same contract tests as the real server (tests/adapters/airflow/test_contract.py runs against
both), so its status codes and `detail` texts are Airflow's. A tiny scheduler advances on every request:
each unpaused backfill finishes up to max_active_runs queued runs per request (odd days fail on
demo_flaky), and a backfill with nothing left queued gets `completed_at`.

Tests that need finer control (the reconcile state machine) stop the tiny scheduler
(`scheduler_running = False`) and drive it by hand: `start_runs` (queued → running, within
max_active_runs), `finish_run` (running → success | failed), `mark_complete` (Airflow's
`_mark_backfills_complete`, which lags the last run by up to 30 s). `outcome(backfill_id)` is the
ground truth of a backfill's runs, including runs a later backfill took over (frozen at that moment),
which the public API cannot show (dag runs carry no backfill_id).

Runs triggered with `POST /dags/{dag_id}/dagRuns` (verification, publish) are kept apart from backfill runs
(`fake.triggered`, by (dag_id, run_id)); the tiny scheduler finishes them as their DAG would (`Dag.outcome`: the
final state and each task's return value, its XCom). With the scheduler stopped, `set_run_state` and `set_xcom`
drive them by hand.

Faults: `fake.faults` is a list of (method, exact path, action) consumed in order by matching requests.
An action is a callable(request) -> httpx.Response | Exception | None, run before (or, for
`after=True` entries, after) the request is processed: e.g. commit a create, then raise ReadTimeout.
"""

from __future__ import annotations

import itertools
import json
import re
import secrets
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import parse_qs
from zoneinfo import ZoneInfo

import httpx
from jsonschema import Draft202012Validator, ValidationError

Action = Callable[[httpx.Request], "httpx.Response | BaseException | None"]
# what a triggered run of a DAG ends as, from its conf: the final state and each task's return value (XCom)
Outcome = Callable[[dict[str, Any]], tuple[str, dict[str, Any]]]
RUN_ID = re.compile(r"^[A-Za-z0-9_.~:+-]+$")  # Airflow's [scheduler] allowed_run_id_pattern (its default)
TRIGGER_FIELDS = {
    "dag_run_id", "data_interval_start", "data_interval_end", "logical_date", "run_after", "conf", "note",
    "partition_key",
}  # fmt: skip


@dataclass
class Dag:
    dag_id: str
    schedule: str | None = "daily"  # daily | hourly | None
    tz: str = "UTC"
    depends_on_past: bool = False
    params: dict[str, tuple[Any, dict[str, Any]]] = field(default_factory=dict)
    fail_odd: bool = False
    is_paused: bool = False
    latest_version: dict[str, Any] | None = None  # the details' latest_dag_version (None: not said)
    outcome: Outcome | None = None  # a triggered run's end (None: success, nothing returned)
    rerun_with_latest_version: bool | None = None  # in the details only (3.3.0+), as in Airflow
    # a partition timetable (FACTS §11): its details and dry runs as 3.3.2 answers them; its runs are not modelled
    partitioned: bool = False
    summary: str | None = None  # a custom timetable's `timetable_summary` (None: the schedule's cron)
    catchup: bool = False  # in the details only, as in Airflow (Airflow 3's default: false)
    # its latest version number, named in the details and on each run it finishes as 3.3.2 does (None: left out,
    # as the fake always answered: a test of version coverage sets it)
    version: int | None = None

    def ticks(self, start: datetime, end: datetime) -> list[datetime]:
        if self.schedule == "hourly":
            first = start.replace(minute=0, second=0, microsecond=0)
            first += timedelta(hours=1) if first < start else timedelta(0)
            return list(
                itertools.takewhile(lambda t: t <= end, (first + timedelta(hours=i) for i in itertools.count()))
            )
        zone, day = ZoneInfo(self.tz), (start - timedelta(days=1)).date()
        out = []
        while (moment := datetime(day.year, day.month, day.day, tzinfo=zone).astimezone(UTC)) <= end:
            if moment >= start:
                out.append(moment)
            day += timedelta(days=1)
        return out


def verify_outcome(conf: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """What examples/dags/demo_orders_verify.py does with a run's conf: `fail_task` names the task that raises
    (the run fails; a task after it returns nothing), `expect: fail` makes `result` say passed: false."""
    failing, run = conf.get("fail_task"), conf.get("backfillctl") or {}
    if failing == "check_rows":
        return "failed", {}
    days = 0
    if run.get("from_date") and run.get("to_date"):
        days = (parse(run["to_date"]).date() - parse(run["from_date"]).date()).days + 1
    checked = {"days": days, "rows": days * 100}
    if failing == "result":
        return "failed", {"check_rows": checked}
    result = {"passed": conf.get("expect", "pass") != "fail", "metrics": checked}
    return "success", {"check_rows": checked, "result": result}


DEMO_DAGS = [
    Dag("demo_daily"),
    Dag("demo_hourly", schedule="hourly"),
    Dag("demo_depends_on_past", depends_on_past=True),
    Dag("demo_manual", schedule=None),
    Dag("demo_tz", tz="America/New_York"),
    Dag("demo_flaky", fail_odd=True),
    Dag("demo_finance_ledger"),
    Dag(
        "demo_orders_verify",
        schedule=None,
        params={"expect": ("pass", {"type": "string", "enum": ["pass", "fail"]})},
        outcome=verify_outcome,
    ),
    Dag("demo_orders_publish", schedule=None),
    Dag(
        "demo_params",
        params={
            "region": ("eu", {"type": "string", "enum": ["eu", "us"]}),
            "batch": (5, {"type": "integer", "minimum": 1}),
        },
    ),
]


def _planned(dag: Dag, date: datetime) -> dict[str, Any]:
    """A dry-run entry: a logical date, or a partitioned DAG's partition key and date (no logical date)."""
    if dag.partitioned:
        return {"logical_date": None, "partition_key": date.strftime("%Y-%m-%dT%H:%M:%S"), "partition_date": iso(date)}
    return {"logical_date": iso(date), "partition_key": None, "partition_date": None}


def iso(moment: datetime | None) -> str | None:
    return None if moment is None else moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def parse(text: str) -> datetime:
    value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class Reply(Exception):
    def __init__(self, status: int, detail: Any) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


class FakeAirflow:
    def __init__(self, now: Callable[[], datetime] | None = None, dags: list[Dag] | None = None) -> None:
        self.now = now or (lambda: datetime.now(UTC))
        # each fake its own copies of the demo DAGs: a drain pauses its DAG, which must not leak into the next test
        self.dags = {d.dag_id: d for d in (dags or [replace(d) for d in DEMO_DAGS])}
        self.backfills: dict[int, dict[str, Any]] = {}
        self.runs: dict[tuple[str, datetime], dict[str, Any]] = {}
        self.triggered: dict[tuple[str, str], dict[str, Any]] = {}  # (dag_id, run_id) → a run POSTed by id
        self.xcoms: dict[tuple[str, str, str, str], Any] = {}  # (dag_id, run_id, task_id, key) → value
        self.tokens: set[str] = set()
        self.faults: list[tuple[str, str, Action, bool]] = []
        self.requests: list[tuple[str, str]] = []
        self.bodies: list[tuple[str, str, Any]] = []  # (method, path, JSON body) of every POST
        self._ids = itertools.count(1)
        self.scheduler_running = True
        # the assets of /api/v2/assets (issue 27): (uri, producing DAG ids, scheduled DAG ids), and the pools
        self.assets: list[tuple[str, tuple[str, ...], tuple[str, ...]]] = []
        self.pools: dict[str, int] = {"default_pool": 128}
        self.version = "3.3.2"  # what /api/v2/version answers (the fake speaks 3.3.2's API whatever it says)
        self.health_status: str | None = None  # what /monitor/health says of the scheduler (default: running or not)
        # which metadata database this is: each DAG's version id derives from it (two fakes never share one, a fake
        # reached under two URLs answers the same ids, as a real Airflow does)
        self.database = uuid.uuid4()

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.handle)

    def fault(self, method: str, path: str, action: Action, *, after: bool = False) -> None:
        self.faults.append((method, path, action, after))

    # --- dispatch -------------------------------------------------------------------------------------

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append((request.method, request.url.path))
        if request.method == "POST" and request.content:
            self.bodies.append((request.method, request.url.path, json.loads(request.content)))
        before = self._take_fault(request, after=False)
        if before is not None:
            return _raise_or_return(before(request))
        response = self._process(request)
        after = self._take_fault(request, after=True)
        result = None if after is None else after(request)
        return response if result is None else _raise_or_return(result)

    def _take_fault(self, request: httpx.Request, *, after: bool) -> Action | None:
        for index, (method, prefix, action, is_after) in enumerate(self.faults):
            if method == request.method and request.url.path == prefix and is_after == after:
                del self.faults[index]
                return action
        return None

    def _process(self, request: httpx.Request) -> httpx.Response:
        try:
            status, body = self._route(request)
        except Reply as reply:
            status, body = reply.status, {"detail": reply.detail}
        if self.scheduler_running:
            self.tick()
        return httpx.Response(status, json=body)

    def _route(self, request: httpx.Request) -> tuple[int, Any]:
        method, path = request.method, request.url.path
        query = {k: ",".join(v) if k == "state" else v[-1] for k, v in parse_qs(request.url.query.decode()).items()}
        if path == "/api/v2/version":
            return 200, {"version": self.version, "git_version": "fake"}
        if path == "/auth/token" and method == "POST":
            return self._login(json.loads(request.content or b"{}"))
        if path == "/api/v2/monitor/health":  # no auth, always 200 (the scheduler brake reads it, issue 14)
            return 200, self._health()
        self._authorise(request)
        body = json.loads(request.content) if request.content else {}
        parts = path.removeprefix("/api/v2/").split("/")
        if parts[0] == "backfills":
            return self._backfills(method, parts[1:], query, body)
        if parts == ["dags"]:
            return 200, _page([self._dag_entry(d) for _, d in sorted(self.dags.items())], query, "dags")
        if parts[0] == "dags" and len(parts) >= 3 and parts[2] == "dagRuns" and (method == "POST" or len(parts) > 3):
            return self._dag_run(method, parts[1], parts[3:], body)
        if parts[0] == "dags" and len(parts) >= 3:
            return self._dags(parts[1], parts[2], query)
        if parts == ["assets"]:
            return 200, _page(self._assets(query.get("dag_ids")), query, "assets")
        if parts == ["pools"]:
            return 200, _page([{"name": n, "slots": s} for n, s in sorted(self.pools.items())], query, "pools")
        raise Reply(404, "Not Found")

    def _assets(self, dag_id: str | None) -> list[dict[str, Any]]:
        """Like 3.3.2: the `dag_ids` filter keeps the assets a DAG produces or is scheduled on."""
        return [
            {
                "uri": uri,
                "producing_tasks": [{"dag_id": d, "task_id": "work"} for d in producers],
                "scheduled_dags": [{"dag_id": d} for d in scheduled],
            }
            for uri, producers, scheduled in sorted(self.assets)
            if dag_id is None or dag_id in producers or dag_id in scheduled
        ]

    def _health(self) -> dict[str, Any]:
        beat = self.now().isoformat().replace("+00:00", "Z")
        status = self.health_status or ("healthy" if self.scheduler_running else "unhealthy")
        scheduler = {"status": status, "latest_scheduler_heartbeat": beat}
        return {"metadatabase": {"status": "healthy"}, "scheduler": scheduler}

    # --- auth -----------------------------------------------------------------------------------------

    def _login(self, body: dict[str, Any]) -> tuple[int, Any]:
        if (body.get("username"), body.get("password")) != ("admin", "admin"):
            raise Reply(401, "Invalid credentials")
        token = "fake." + secrets.token_urlsafe(24)
        self.tokens.add(token)
        return 201, {"access_token": token}

    def _authorise(self, request: httpx.Request) -> None:
        header = request.headers.get("Authorization")
        if header is None:
            raise Reply(401, "Not authenticated")
        if header.removeprefix("Bearer ") not in self.tokens:
            raise Reply(403, "Invalid JWT token")

    # --- backfills ------------------------------------------------------------------------------------

    def _backfills(self, method: str, parts: list[str], query: dict[str, str], body: dict[str, Any]) -> tuple[int, Any]:
        if method == "GET" and not parts:
            if "dag_id" not in query:
                raise Reply(422, [{"type": "missing", "loc": ["query", "dag_id"], "msg": "Field required"}])
            items = sorted(
                (self._public(b) for b in self.backfills.values() if b["dag_id"] == query["dag_id"]),
                key=lambda b: b["id"],
                reverse=query.get("order_by") == "-id",
            )
            return 200, _page(items, query, "backfills")
        if method == "POST" and parts == ["dry_run"]:
            dag, dates = self._plan(body, check_conflict=False)
            return 200, {"backfills": [_planned(dag, d) for d in dates], "total_entries": len(dates)}
        if method == "POST" and not parts:
            return 200, self._public(self._create(body))
        backfill = self._backfill(parts[0])
        if method == "GET" and len(parts) == 1:
            return 200, self._public(backfill)
        if method == "PUT" and len(parts) == 2 and parts[1] in ("pause", "unpause", "cancel"):
            return 200, self._public(self._change(backfill, parts[1]))
        raise Reply(405, "Method Not Allowed")

    def _backfill(self, raw_id: str) -> dict[str, Any]:
        try:
            backfill = self.backfills.get(int(raw_id))
        except ValueError:
            raise Reply(422, [{"type": "int_parsing", "loc": ["path", "backfill_id"], "msg": "bad int"}]) from None
        if backfill is None:
            raise Reply(404, "Backfill not found")
        return backfill

    def _plan(self, body: dict[str, Any], *, check_conflict: bool) -> tuple[Dag, list[datetime]]:
        extra = sorted(
            set(body)
            - {
                "dag_id",
                "from_date",
                "to_date",
                "run_backwards",
                "dag_run_conf",
                "reprocess_behavior",
                "max_active_runs",
                "run_on_latest_version",
            }
            - ({"drain_dag"} if self.version.startswith("3.4") else set())  # PR #72407, 3.4 only
        )
        if extra:
            raise Reply(
                422, [{"type": "extra_forbidden", "loc": ["body", extra[0]], "msg": "Extra inputs are not permitted"}]
            )
        dag = self.dags.get(body["dag_id"])
        if dag is None:
            raise Reply(404, f"Could not find dag {body['dag_id']}")
        if dag.schedule is None:
            raise Reply(422, f"{dag.dag_id} has a non-periodic schedule that does not support backfills")
        if check_conflict and any(
            b["dag_id"] == dag.dag_id and b["completed_at"] is None for b in self.backfills.values()
        ):
            raise Reply(409, f"There is already a running backfill for dag {dag.dag_id}")
        start, end, now = parse(body["from_date"]), parse(body["to_date"]), self.now()
        if start > end:
            raise Reply(422, f"from_date ({start.isoformat()}) must not be after to_date ({end.isoformat()}).")
        if start >= now and end >= now:
            raise Reply(422, "Backfill cannot be executed for future dates.")
        reprocess, backwards = body.get("reprocess_behavior", "none"), bool(body.get("run_backwards"))
        if dag.depends_on_past and reprocess == "none":
            raise Reply(
                422,
                "Dag has tasks for which depends_on_past=True. You must set reprocess behavior to "
                "reprocess completed or reprocess failed.",
            )
        if dag.depends_on_past and backwards:
            raise Reply(422, "Backfill cannot be run in reverse when the Dag has tasks where depends_on_past=True.")
        self._check_conf(dag, body.get("dag_run_conf") or {})
        ticks = [t for t in dag.ticks(start, end) if t < now]
        dates = [t for t in ticks if self._wanted(dag.dag_id, t, reprocess)]
        return dag, (dates[::-1] if backwards else dates)

    def _check_conf(self, dag: Dag, conf: dict[str, Any]) -> None:
        found = _param_error(dag, conf)
        if found is not None:
            name, error = found
            raise Reply(
                422,
                f"Invalid input for param {name}: {error.message}\n\nFailed validating "
                f"{error.validator!r} in schema: {json.dumps(dag.params[name][1])}",
            )

    def _wanted(self, dag_id: str, tick: datetime, reprocess: str) -> bool:
        run = self.runs.get((dag_id, tick))
        if run is None:
            return True
        if run["state"] in ("queued", "running"):
            return False
        return reprocess == "completed" or (reprocess == "failed" and run["state"] == "failed")

    def _create(self, body: dict[str, Any]) -> dict[str, Any]:
        dag, dates = self._plan(body, check_conflict=True)
        if not dates and not dag.ticks(parse(body["from_date"]), parse(body["to_date"])):
            raise Reply(422, f"No runs to create for Dag {dag.dag_id} in the range")
        backfill = self._new_backfill(dag, body, dates)
        for date in dates:
            run = self.runs.get((dag.dag_id, date))
            previous = self.backfills.get((run or {}).get("_backfill", -1))
            if run is not None and previous is not None:  # reprocessed: the old backfill keeps what it saw
                previous["_frozen"][date] = run["state"]
            conf = body.get("dag_run_conf") if body.get("dag_run_conf") is not None else (run or {}).get("conf", {})
            self.runs[(dag.dag_id, date)] = {
                "dag_run_id": (run or {}).get("dag_run_id", f"backfill__{date.isoformat()}"),
                "dag_id": dag.dag_id,
                "logical_date": iso(date),
                "state": "queued",
                "queued_at": iso(self.now()),  # set inside the create request, by the clock of created_at
                "start_date": None,
                "end_date": None,
                "run_type": "backfill",
                "conf": conf,
                "note": (run or {}).get("note"),  # a reprocessed run keeps its note (3.3.2)
                "_backfill": backfill["id"],
            }
        return backfill

    def _change(self, backfill: dict[str, Any], action: str) -> dict[str, Any]:
        if backfill["completed_at"] is not None:
            raise Reply(409, "Backfill is already completed.")
        backfill["is_paused"] = action != "unpause"
        if action == "cancel":
            backfill["completed_at"] = iso(self.now())
            for run in self._runs_of(backfill):
                if run["state"] == "queued":
                    run["state"] = "failed"
        return backfill

    @staticmethod
    def _public(backfill: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in backfill.items() if not k.startswith("_")}

    # --- dags and runs --------------------------------------------------------------------------------

    def _dags(self, dag_id: str, what: str, query: dict[str, str]) -> tuple[int, Any]:
        dag = self.dags.get(dag_id)
        if dag is None:
            raise Reply(404, f"The Dag with ID: `{dag_id}` was not found")
        if what == "details":
            params = {
                k: {"value": v, "schema": s, "description": None, "source": None} for k, (v, s) in dag.params.items()
            }
            rerun = {"rerun_with_latest_version": dag.rerun_with_latest_version}
            if dag.latest_version is not None:  # as a test set it
                latest = {"latest_dag_version": dag.latest_version}
            else:
                latest = {"latest_dag_version": self._dag_version(dag)} if dag.version is not None else {}
            return 200, {**self._dag_entry(dag), "params": params, **rerun, **latest, "catchup": dag.catchup}
        if what == "tasks":
            return 200, {"tasks": [{"task_id": "work", "depends_on_past": dag.depends_on_past}], "total_entries": 1}
        if what == "dagRuns":
            return 200, self._dag_runs(dag_id, query)
        if what == "dagVersions":
            return 200, {"dag_versions": [self._dag_version(dag)], "total_entries": 1}
        raise Reply(404, "Not Found")

    def _dag_version(self, dag: Dag) -> dict[str, Any]:
        """The DAG's one version, as 3.3.2 lists it (its id a UUID this fake's database made)."""
        return {
            "id": str(uuid.uuid5(self.database, dag.dag_id)),
            "version_number": dag.version or 1,
            "dag_id": dag.dag_id,
            "bundle_name": "dags-folder",
            "bundle_version": None,
            "created_at": "2025-01-01T00:00:00Z",
            "dag_display_name": dag.dag_id,
            "bundle_url": None,
        }

    @staticmethod
    def _dag_entry(dag: Dag) -> dict[str, Any]:
        """What the DAG listing says of a DAG (the details add `params`)."""
        return {
            "dag_id": dag.dag_id,
            "is_paused": dag.is_paused,
            "is_stale": False,
            "has_import_errors": False,
            "timetable_periodic": dag.schedule is not None,
            "is_backfillable": dag.schedule is not None,
            "timetable_partitioned": dag.partitioned,
            # what every Airflow 3 line says (older ones have no timetable_periodic: the client reads these)
            "timetable_summary": dag.summary or {"daily": "0 0 * * *", "hourly": "0 * * * *"}.get(dag.schedule or ""),
            "timetable_description": {
                "daily": "At 00:00",
                "hourly": "Every hour",
                None: "Never, external triggers only",
            }[dag.schedule],
        }

    def _dag_runs(self, dag_id: str, query: dict[str, str]) -> dict[str, Any]:
        run_type = query.get("run_type")
        if run_type not in (None, "backfill", "manual"):
            raise Reply(
                422,
                "Invalid value for run type. Valid values are backfill, scheduled, manual, "
                "operator_triggered, asset_triggered, asset_materialization",
            )
        dated = "logical_date_gte" in query or "logical_date_lte" in query  # a null logical date matches no range
        low = parse(query["logical_date_gte"]) if "logical_date_gte" in query else datetime.min.replace(tzinfo=UTC)
        high = parse(query["logical_date_lte"]) if "logical_date_lte" in query else datetime.max.replace(tzinfo=UTC)
        states = set(query["state"].split(",")) if "state" in query else None
        shortest = float(query["duration_gte"]) if "duration_gte" in query else None
        # `self.runs` are the backfills' (whatever run type a test gave them), `self.triggered` the manual ones
        backfill_runs = [r for (d, when), r in self.runs.items() if d == dag_id and low <= when <= high]
        triggered = [r for (d, _), r in self.triggered.items() if d == dag_id and not dated]
        chosen = {None: backfill_runs + triggered, "backfill": backfill_runs, "manual": triggered}[run_type]
        runs = sorted(
            (
                r
                for r in chosen
                if states is None or r["state"] in states
                if shortest is None or (_duration(r) is not None and _duration(r) >= shortest)
            ),
            key=lambda r: (r["logical_date"] is None, r["logical_date"] or "", r.get("_seq", 0)),
        )
        page = _page(runs, query, "dag_runs")
        page["dag_runs"] = [_public_run(r) for r in page["dag_runs"]]
        return page

    def _runs_of(self, backfill: dict[str, Any]) -> list[dict[str, Any]]:
        return [r for r in self.runs.values() if r.get("_backfill") == backfill["id"]]

    def tick(self) -> None:
        """One scheduler step: each active, unpaused backfill finishes up to max_active_runs runs; each queued
        triggered run of an unpaused DAG finishes."""
        for run in self.triggered.values():
            if run["state"] == "queued" and not self.dags[run["dag_id"]].is_paused:
                self._finish_triggered(run)
        for backfill in self.backfills.values():
            if backfill["completed_at"] is not None or backfill["is_paused"] or self.dags[backfill["dag_id"]].is_paused:
                continue
            queued = [r for r in self._runs_of(backfill) if r["state"] == "queued"]
            order = {iso(d): i for i, d in enumerate(backfill["_order"])}
            for run in sorted(queued, key=lambda r: order.get(r["logical_date"], 0))[
                : max(0, backfill["max_active_runs"])
            ]:
                self._finish(run)
            if not any(r["state"] in ("queued", "running") for r in self._runs_of(backfill)):
                self._complete(backfill)

    def _complete(self, backfill: dict[str, Any]) -> None:
        """Nothing of the backfill is left: complete, and a drain (3.4) pauses its DAG."""
        backfill["completed_at"] = iso(self.now())
        if backfill.get("_drain"):
            self.dags[backfill["dag_id"]].is_paused = True

    # --- runs triggered by id -------------------------------------------------------------------------

    def _dag_run(self, method: str, dag_id: str, rest: list[str], body: dict[str, Any]) -> tuple[int, Any]:
        """POST a run; GET one by id; GET a task's XCom entry (the answers of 3.3.2, texts included)."""
        if method == "POST" and not rest:
            return 200, _public_run(self._trigger(dag_id, body))
        if method == "GET" and len(rest) == 1:
            run = self._find_run(dag_id, rest[0])
            if run is None:
                raise Reply(404, f"The DagRun with dag_id: `{dag_id}` and run_id: `{rest[0]}` was not found")
            return 200, _public_run(run)
        if method == "PATCH" and len(rest) == 1:  # what run notes send: `update_mask=note`, a body of the note
            run = self._find_run(dag_id, rest[0])
            if run is None:
                raise Reply(404, f"The DagRun with dag_id: `{dag_id}` and run_id: `{rest[0]}` was not found")
            run["note"] = body.get("note")
            return 200, _public_run(run)
        if method == "GET" and len(rest) == 5 and (rest[1], rest[3]) == ("taskInstances", "xcomEntries"):
            key = (dag_id, rest[0], rest[2], rest[4])
            if key not in self.xcoms:
                raise Reply(404, f"XCom entry with key: `{rest[4]}` not found")
            return 200, {"key": rest[4], "task_id": rest[2], "dag_id": dag_id, "run_id": rest[0], "map_index": -1,
                         "value": self.xcoms[key]}  # fmt: skip
        raise Reply(405, "Method Not Allowed")

    def _trigger(self, dag_id: str, body: dict[str, Any]) -> dict[str, Any]:
        """Airflow's order: the body's shape (422), the DAG (404), the run id and the params (400), the id (409)."""
        self._check_trigger_body(body)
        dag = self.dags.get(dag_id)
        if dag is None:
            raise Reply(404, f"Dag with dag_id: '{dag_id}' not found")
        run_id, conf = body.get("dag_run_id") or f"manual__{iso(self.now())}", body.get("conf") or {}
        if not RUN_ID.match(run_id):
            raise Reply(400, f"The run_id provided '{run_id}' does not match regex pattern '{RUN_ID.pattern}'")
        self._check_params(dag, conf)
        if self._find_run(dag_id, run_id) is not None:  # the unique constraint: Airflow hides the statement
            raise Reply(409, {"reason": "Unique constraint violation", "statement": "hidden", "orig_error": "hidden",
                              "message": "Serious error when handling your request."})  # fmt: skip
        run = {
            "dag_run_id": run_id,
            "dag_id": dag_id,
            "logical_date": body["logical_date"],
            "queued_at": iso(self.now()),
            "start_date": None,
            "end_date": None,
            "run_type": "manual",
            "state": "queued",
            "triggered_by": "rest_api",
            "triggering_user_name": "admin",
            "conf": conf,
            "_seq": len(self.triggered),
        }
        self.triggered[(dag_id, run_id)] = run
        return run

    @staticmethod
    def _check_trigger_body(body: dict[str, Any]) -> None:
        """TriggerDAGRunPostBody: a strict model whose `logical_date` is required (nullable), `conf` an object."""
        extra = sorted(set(body) - TRIGGER_FIELDS)
        if extra:
            raise Reply(
                422, [{"type": "extra_forbidden", "loc": ["body", extra[0]], "msg": "Extra inputs are not permitted"}]
            )
        if "logical_date" not in body:
            raise Reply(422, [{"type": "missing", "loc": ["body", "logical_date"], "msg": "Field required"}])
        if body.get("conf") is not None and not isinstance(body["conf"], dict):
            detail = [{"type": "dict_type", "loc": ["body", "conf"], "msg": "Input should be a valid dictionary"}]
            raise Reply(422, detail)

    @staticmethod
    def _check_params(dag: Dag, conf: dict[str, Any]) -> None:
        """A trigger's conf against the DAG's params: 400 with jsonschema's own text (as Airflow's Param says it)."""
        found = _param_error(dag, conf)
        if found is not None:
            raise Reply(400, f"Invalid input for param {found[0]}: {found[1]}")

    def _find_run(self, dag_id: str, run_id: str) -> dict[str, Any] | None:
        """A run by id: a triggered one, or a backfill's (one DAG's run ids are unique across run types)."""
        found = self.triggered.get((dag_id, run_id))
        backfill_runs = (r for (d, _), r in self.runs.items() if d == dag_id and r["dag_run_id"] == run_id)
        return found or next(backfill_runs, None)

    def set_run_state(self, dag_id: str, run_id: str, state: str) -> None:
        """Move a run by hand (the scheduler stopped): running gets a start date, success/failed an end date too."""
        run = self._find_run(dag_id, run_id)
        assert run is not None, f"no run {run_id} of {dag_id}"
        now = iso(self.now())
        run["state"] = state
        run["start_date"] = run["start_date"] or (now if state != "queued" else None)
        run["end_date"] = now if state in ("success", "failed") else None

    def set_xcom(self, dag_id: str, run_id: str, task_id: str, value: Any, key: str = "return_value") -> None:
        """What a task of the run pushed (its return value under `return_value`)."""
        self.xcoms[(dag_id, run_id, task_id, key)] = value

    def _finish_triggered(self, run: dict[str, Any]) -> None:
        outcome = self.dags[run["dag_id"]].outcome
        state, pushed = outcome(run["conf"]) if outcome is not None else ("success", {})
        now = iso(self.now())
        run.update(state=state, start_date=now, end_date=now)
        for task_id, value in pushed.items():
            self.set_xcom(run["dag_id"], run["dag_run_id"], task_id, value)

    # --- explicit scheduling ----------------------------------------------------------------------------

    def _ordered(self, backfill: dict[str, Any], state: str) -> list[dict[str, Any]]:
        order = {iso(d): i for i, d in enumerate(backfill["_order"])}
        runs = [r for r in self._runs_of(backfill) if r["state"] == state]
        return sorted(runs, key=lambda r: order.get(r["logical_date"], 0))

    def start_runs(self, backfill_id: int) -> int:
        """Queued → running, in the backfill's order, up to max_active_runs running at once.

        Nothing starts on a completed (cancelled) or paused backfill, or on a paused DAG.
        """
        backfill = self.backfills[backfill_id]
        if backfill["completed_at"] is not None or backfill["is_paused"] or self.dags[backfill["dag_id"]].is_paused:
            return 0
        room = max(0, backfill["max_active_runs"] - len(self._ordered(backfill, "running")))
        started = self._ordered(backfill, "queued")[:room]
        for run in started:
            run.update(state="running", start_date=iso(self.now()))
        return len(started)

    def finish_run(self, backfill_id: int, state: str) -> bool:
        """The first running run of the backfill ends in `state` (success | failed); runs of a cancelled
        backfill that were already running finish too, as in Airflow."""
        running = self._ordered(self.backfills[backfill_id], "running")
        if not running:
            return False
        running[0].update(state=state, end_date=iso(self.now()))
        return True

    def mark_complete(self) -> list[int]:
        """Airflow's `_mark_backfills_complete`: active backfills with no queued or running run get
        `completed_at`, paused or not."""
        done = []
        for backfill in self.backfills.values():
            if backfill["completed_at"] is None and not any(
                r["state"] in ("queued", "running") for r in self._runs_of(backfill)
            ):
                self._complete(backfill)
                done.append(backfill["id"])
        return done

    def create_orphan(self, body: dict[str, Any]) -> int:
        """apache/airflow#66726 on SQLite: the create fails with 500 after the backfill row was committed
        but before any run was; the backfill has no runs (and completes at the next scheduler step)."""
        dag, _dates = self._plan(body, check_conflict=True)
        return int(self._new_backfill(dag, body, [])["id"])

    def _new_backfill(self, dag: Dag, body: dict[str, Any], order: list[datetime]) -> dict[str, Any]:
        """A backfill row as Airflow stores it, registered; `order` is the runs it queues, in its direction."""
        now = self.now()
        backfill = {
            "id": next(self._ids),
            "dag_id": dag.dag_id,
            "from_date": iso(parse(body["from_date"])),
            "to_date": iso(parse(body["to_date"])),
            "dag_run_conf": body.get("dag_run_conf"),
            "is_paused": False,
            "reprocess_behavior": body.get("reprocess_behavior", "none"),
            "max_active_runs": body.get("max_active_runs", 10),
            "created_at": iso(now),
            "completed_at": None,
            "updated_at": iso(now),
            "dag_display_name": dag.dag_id,
            "_order": order,
            "_frozen": {},
            "_drain": bool(body.get("drain_dag")),
        }
        self.backfills[backfill["id"]] = backfill
        return backfill

    def outcome(self, backfill_id: int) -> dict[datetime, str]:
        """Logical date → state of every run this backfill created or reprocessed (ground truth)."""
        backfill = self.backfills[backfill_id]
        live = {parse(r["logical_date"]): r["state"] for r in self._runs_of(backfill)}
        return {**backfill["_frozen"], **live}

    def _finish(self, run: dict[str, Any]) -> None:
        dag, now = self.dags[run["dag_id"]], self.now()
        odd = parse(run["logical_date"]).day % 2 == 1
        run.update(state="failed" if dag.fail_odd and odd else "success", start_date=iso(now), end_date=iso(now))
        if dag.version is not None:  # the code its task instances ran on
            run["dag_versions"] = [self._dag_version(dag)]


def _param_error(dag: Dag, conf: dict[str, Any]) -> tuple[str, ValidationError] | None:
    """The first param the conf gives a value its schema refuses, with jsonschema's error (whose text shows the
    schema: with its keys sorted, as the serialized DAG holds it)."""
    for name, (_default, schema) in dag.params.items():
        validator = Draft202012Validator(dict(sorted(schema.items())))
        error = next(iter(validator.iter_errors(conf[name])), None) if name in conf else None
        if error is not None:
            return name, error
    return None


def _public_run(run: dict[str, Any]) -> dict[str, Any]:
    """A run as the API shows it (a copy: the tiny scheduler changes the stored one after the answer is made)."""
    return {k: v for k, v in run.items() if not k.startswith("_")}


def _duration(run: dict[str, Any]) -> float | None:
    """Airflow's `duration`: end minus start, null unless both are set (its filter leaves nulls out)."""
    if run["start_date"] is None or run.get("end_date") is None:
        return None
    return (parse(run["end_date"]) - parse(run["start_date"])).total_seconds()


def _page(items: list[dict[str, Any]], query: dict[str, str], key: str) -> dict[str, Any]:
    limit, offset = min(int(query.get("limit", 50)), 100), int(query.get("offset", 0))
    return {key: items[offset : offset + limit], "total_entries": len(items)}


def _raise_or_return(result: httpx.Response | BaseException | None) -> httpx.Response:
    if isinstance(result, BaseException):
        raise result
    assert result is not None
    return result
