"""Runs the controller starts itself (verification and publish runs): trigger one with a run id of the caller's,
read it back by that id, and read what one of its tasks returned (its XCom `return_value`).

Exactly once: `POST /api/v2/dags/{dag_id}/dagRuns` is not idempotent, so the transport never repeats it after an
answer that may mean it landed (a timeout after sending, a 5xx: `AirflowAmbiguous`). The caller's run id is
derived (`controller.core.model.stages.run_id`), so trying again is safe: `get_run` first, or `trigger_run` again,
which answers a run id that exists (Airflow's 409) with that run, adopted, never a second one.

The body is the same on 3.1, 3.2 and 3.3 (`TriggerDAGRunPostBody`, a strict model): `logical_date` is required
and nullable (left out: 422), null for a run outside any schedule; `conf` must be an object; no `partition_key`
(3.2+) is sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from controller.adapters.airflow.decode import triggered_run_from_json
from controller.adapters.airflow.server import Server
from controller.core.model.airflow import TriggeredRun
from controller.core.model.spec import thaw
from controller.errors import AirflowConflict, AirflowError, AirflowNotFound

RESULT_KEY = "return_value"  # the XCom a task's returned value is pushed under


def _segment(text: str) -> str:
    """One path segment (Airflow's run ids allow `:`, `+` and `~`; a `/` must not split the path)."""
    return quote(text, safe="")


def runs_path(dag_id: str) -> str:
    return f"/api/v2/dags/{_segment(dag_id)}/dagRuns"


def run_path(dag_id: str, run_id: str) -> str:
    return f"{runs_path(dag_id)}/{_segment(run_id)}"


class Triggers:
    def __init__(self, server: Server) -> None:
        self._server = server

    def trigger(self, dag_id: str, run_id: str, conf: Mapping[str, Any]) -> tuple[TriggeredRun, bool]:
        """The run `run_id` of `dag_id`: created now with `conf` (True), or the one that has that id already
        (False: adopted; its conf is whatever it was created with). A conf the DAG's params refuse (400), a body
        Airflow refuses (422) or a DAG it does not have (404) raise; an ambiguous answer raises AirflowAmbiguous
        (see the module's docstring: never sent twice here)."""
        # conf may be frozen (a spec's values are): sent as plain JSON
        path, body = runs_path(dag_id), {"dag_run_id": run_id, "logical_date": None, "conf": thaw(conf)}
        try:
            data = self._server.json("POST", path, json=body)
        except AirflowConflict as conflict:
            return self._adopted(dag_id, run_id, conflict), False
        except AirflowNotFound as missing:
            raise _no_dag(dag_id, run_id, missing) from None
        run = triggered_run_from_json(data, method="POST", path=path)
        if (run.dag_id, run.run_id) != (dag_id, run_id):  # a server that ignored our id: the run is not findable
            raise AirflowError(
                f"POST {path}: Airflow started run {run.run_id!r} of {run.dag_id}, not {run_id!r} of {dag_id}",
                method="POST",
                path=path,
                hint="is BACKFILLCTL_AIRFLOW_URL an Airflow 3 api-server?",
            )
        return run, True

    def _adopted(self, dag_id: str, run_id: str, conflict: AirflowConflict) -> TriggeredRun:
        """The run a 409 says exists; one that is gone again (deleted in between) leaves the conflict to say."""
        run = self.get(dag_id, run_id)
        if run is None:
            raise AirflowConflict(
                f"POST {conflict.path} -> 409 for run {run_id} of {dag_id}, and GET finds no such run",
                method=conflict.method,
                path=conflict.path,
                status=conflict.status,
                detail=conflict.detail,
                hint="was the run deleted meanwhile? the next reconcile pass triggers it again",
            )
        return run

    def get(self, dag_id: str, run_id: str) -> TriggeredRun | None:
        """The run by its id; None when Airflow has no such run (or no such DAG: the same 404)."""
        path = run_path(dag_id, run_id)
        try:
            data = self._server.json("GET", path)
        except AirflowNotFound:
            return None
        return triggered_run_from_json(data, method="GET", path=path)

    def result(self, dag_id: str, run_id: str, task_id: str) -> Any | None:
        """What the task returned (its XCom `return_value`), as JSON; None when it pushed none (not run, failed,
        returned None) or there is no such run or task. `deserialize=true`: a value Airflow's serde encoded (a
        tuple, a datetime) comes back readable, as the UI shows it, instead of as its `__classname__` envelope;
        plain JSON comes back the same either way (3.1 to 3.3)."""
        path = f"{run_path(dag_id, run_id)}/taskInstances/{_segment(task_id)}/xcomEntries/{RESULT_KEY}"
        try:
            data = self._server.json("GET", path, params={"deserialize": "true"})
        except AirflowNotFound:
            return None
        if not isinstance(data, Mapping) or "value" not in data:
            raise AirflowError(f"GET {path}: Airflow's answer is not an XCom entry (no value)", method="GET", path=path)
        return data["value"]


def _no_dag(dag_id: str, run_id: str, missing: AirflowNotFound) -> AirflowNotFound:
    return AirflowNotFound(
        f"cannot trigger run {run_id}: Airflow has no DAG {dag_id} (POST {missing.path} -> 404: {missing.detail})",
        method=missing.method,
        path=missing.path,
        status=missing.status,
        detail=missing.detail,
        hint="is the DAG file deployed and parsed (a stale DAG, its file deleted, is not found either)?",
    )
