"""Airflow's answers as the core's values: backfills, DAG runs, dry-run entries, schedules, DAG infos.

A field a release lacks has a defined meaning here (see `dag_info_from_json`); a field Airflow must send
and did not is Airflow's error to report (`AirflowError`), never an AssertionError or a KeyError.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from controller.core.model.airflow import (
    RUN_STATES,
    Backfill,
    DagInfo,
    DagRun,
    DagVersion,
    PlannedRun,
    Schedule,
    TriggeredRun,
    periodic_from_summary,
)
from controller.core.model.capabilities import Capabilities
from controller.errors import AirflowError, AirflowUnavailable, truncate


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
        dag_versions=_dag_versions(data.get("dag_versions")),
    )


def triggered_run_from_json(data: Any, *, method: str, path: str) -> TriggeredRun:
    """A run `POST`ed or read by its id; an answer that is not such a run says which field is wrong, and how."""
    if not isinstance(data, Mapping):
        raise _odd_run(method, path, f"the answer is not a JSON object but {_kind(data)}")
    state, conf = data.get("state"), data.get("conf")
    if state not in RUN_STATES:
        raise _odd_run(method, path, f"state {truncate(repr(state), 60)} is none of {', '.join(RUN_STATES)}")
    if conf is not None and not isinstance(conf, Mapping):
        raise _odd_run(method, path, f"conf is {_kind(conf)}, not an object")
    return TriggeredRun(
        dag_id=_name(data, "dag_id", method, path),
        run_id=_name(data, "dag_run_id", method, path),
        state=str(state),
        start_date=_aware(data, "start_date", method, path),
        end_date=_aware(data, "end_date", method, path),
        conf=dict(conf or {}),
        queued_at=_aware(data, "queued_at", method, path),
    )


def _name(data: Mapping[str, Any], key: str, method: str, path: str) -> str:
    value = data.get(key)
    if not isinstance(value, str) or not value:
        raise _odd_run(method, path, f"{key} is {truncate(repr(value), 60)}, not a non-empty string")
    return value


def _aware(data: Mapping[str, Any], key: str, method: str, path: str) -> datetime | None:
    """An optional time with its offset; a naive or unreadable one is Airflow's error, never a guess."""
    value = data.get(key)
    if value is None:
        return None
    parsed = _time_or_none(value)
    if parsed is None or parsed.utcoffset() is None:
        raise _odd_run(method, path, f"{key} {truncate(repr(value), 60)} is not a date-time with an offset")
    return parsed


def _time_or_none(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None


_JSON_KINDS = {
    dict: "an object",
    list: "an array",
    str: "a string",
    bool: "a boolean",
    int: "a number",
    float: "a number",
}


def _kind(value: Any) -> str:
    """What a JSON value is, never the value (it may be long or unsafe to show)."""
    return "null" if value is None else _JSON_KINDS.get(type(value), type(value).__name__)


def _odd_run(method: str, path: str, what: str) -> AirflowError:
    return AirflowError(
        f"{method} {path}: Airflow's answer is not a DAG run: {what}",
        method=method,
        path=path,
        hint="is BACKFILLCTL_AIRFLOW_URL an Airflow 3 api-server (not a proxy or another service)?",
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
        rerun_with_latest_version=_flag(data.get("rerun_with_latest_version"))
        if caps.rerun_with_latest_version
        else None,
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


def _dag_versions(data: Any) -> tuple[DagVersion, ...]:
    """The versions a run ran on; an entry without an integer version number says nothing and is left out."""
    if not isinstance(data, list):
        return ()
    return tuple(
        DagVersion(v["version_number"], v.get("bundle_version") if isinstance(v.get("bundle_version"), str) else None)
        for v in data
        if isinstance(v, dict)
        and isinstance(v.get("version_number"), int)
        and not isinstance(v["version_number"], bool)
    )


def _flag(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None
