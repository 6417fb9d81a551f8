"""Airflow's answers as the core's values: backfills, DAG runs, dry-run entries, schedules, DAG infos.

A field a release lacks has a defined meaning here (see `dag_info_from_json`); a field Airflow must send
and did not, or sent as another type, is Airflow's error to report: `Malformed` here, which `decoded` makes
`AirflowBadAnswer` naming the call and the field (an incomplete observation), never an AssertionError, a
KeyError or exit 3.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any, TypeVar

from controller.adapters.airflow.failures import unread
from controller.core.documents.escaping import plain
from controller.core.documents.storable import storable_text
from controller.core.model.airflow import (
    RUN_STATES,
    Backfill,
    BackfillSlot,
    DagInfo,
    DagRun,
    DagVersion,
    PlannedRun,
    Schedule,
    TriggeredRun,
    periodic_from_summary,
)
from controller.core.model.capabilities import Capabilities
from controller.core.rules.retrying import Request, request_kind
from controller.errors import AirflowBadAnswer, AirflowError, truncate

T = TypeVar("T")
# what decoding an answer of another shape raises (a KeyError, a TypeError on a null): all of it is Airflow's error
_DECODING = (KeyError, TypeError, ValueError, AttributeError, IndexError, AirflowBadAnswer)


class Malformed(AirflowBadAnswer):
    """A value of Airflow's answer that is not what its API declares; the text names the field, and shows no
    more of the value than its JSON type or a short, one-line cut. `decoded` adds the call it answered."""


def decoded(decode: Callable[[Any], T], data: Any, method: str, path: str, *, kind: Request | None = None) -> T:
    """`decode(data)`; an answer not of the declared shape raises `AirflowBadAnswer` naming the call and the
    field; for a create, a lost answer (`AirflowAmbiguous`: it may have landed)."""
    try:
        return decode(data)
    except _DECODING as exc:
        why = f"Airflow's answer is malformed: {_reason(exc)}"
        raise unread(method, path, why, kind or request_kind(method), None) from None


def each(decode: Callable[[Any], T], items: list[Any], key: str, start: int = 0) -> list[T]:
    """Each entry of a listing `decode`d; a malformed one is named by its place (`backfills[3]: no field id`)."""
    found = []
    for n, item in enumerate(items, start):
        try:
            found.append(decode(item))
        except _DECODING as exc:
            raise Malformed(f"{key}[{n}]: {_reason(exc)}") from None
    return found


def _reason(exc: Exception) -> str:
    if isinstance(exc, Malformed):
        return str(exc)
    if isinstance(exc, KeyError):
        return f"no field {_shown(exc.args[0] if exc.args else '')}"
    return f"{type(exc).__name__}: {_shown(str(exc), 100)}"


def _shown(value: Any, limit: int = 60) -> str:
    """Outside text in a message: one line, storable, cut."""
    return truncate(plain(storable_text(value if isinstance(value, str) else repr(value))), limit)


def field(data: Any, key: str, kind: type | tuple[type, ...], what: str, *, required: bool = True) -> Any:
    """`data[key]` when it is a `kind` (`what` says which, for the message); absent or null is None unless
    `required`; a bool is no integer."""
    if not isinstance(data, dict):  # decoded JSON: a dict (an ABC check costs a page of runs ~0.1 ms)
        raise Malformed(f"{kind_of(data)}, not an object")
    value = data.get(key)
    if value is None:
        if required:
            raise Malformed(f"no field {key}" if key not in data else f"{key} is null, not {what}")
        return None
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _kinds(kind)):
        raise Malformed(f"{key} is {kind_of(value)}, not {what}")
    return value


def objects(data: Any, key: str) -> list[Mapping[str, Any]]:
    """`data[key]`: an array of objects (a listing's entries, a DAG's tasks)."""
    items: list[Mapping[str, Any]] = field(data, key, list, "an array")
    odd = next((n for n, item in enumerate(items) if not isinstance(item, dict)), None)
    if odd is not None:
        raise Malformed(f"{key}[{odd}] is {kind_of(items[odd])}, not an object")
    return items


def _kinds(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def parse_time(value: Any, name: str = "") -> datetime | None:
    """A date-time Airflow sent (ISO 8601 with `Z` or an offset); None for null; anything else is `Malformed`."""
    return None if value is None else _aware_time(value, name)


def _aware_time(value: Any, name: str) -> datetime:
    """A time without an offset could only be guessed (and compared with an aware one, it raises)."""
    parsed = _time_or_none(value)
    if parsed is None or parsed.utcoffset() is None:
        shown = repr(_shown(value)) if isinstance(value, str) else _shown(value)
        raise Malformed(f"{name} {shown} is not a date-time with an offset".lstrip())
    return parsed


def _time(data: Any, key: str) -> datetime | None:
    value = field(data, key, str, "a date-time", required=False)
    return None if value is None else _aware_time(value, key)


def required_time(data: Any, key: str) -> datetime:
    return _aware_time(field(data, key, str, "a date-time"), key)


def backfill_from_json(data: Any) -> Backfill:
    return Backfill(
        id=field(data, "id", int, "an integer"),
        dag_id=field(data, "dag_id", str, "a string"),
        from_date=required_time(data, "from_date"),
        to_date=required_time(data, "to_date"),
        reprocess_behavior=field(data, "reprocess_behavior", str, "a string"),
        max_active_runs=field(data, "max_active_runs", int, "an integer"),
        is_paused=field(data, "is_paused", bool, "a boolean"),
        dag_run_conf=field(data, "dag_run_conf", dict, "an object", required=False),
        created_at=required_time(data, "created_at"),
        completed_at=_time(data, "completed_at"),
    )


def dag_run_from_json(data: Any) -> DagRun:
    """A run; a partitioned DAG's runs have `logical_date: null` and a `partition_key`/`partition_date`."""
    return DagRun(
        field(data, "dag_run_id", str, "a string"),
        _time(data, "logical_date"),
        field(data, "state", str, "a string"),
        _time(data, "start_date"),
        _time(data, "end_date"),
        partition_key=field(data, "partition_key", str, "a string", required=False),
        partition_date=_time(data, "partition_date"),
        queued_at=_time(data, "queued_at"),
        dag_versions=_dag_versions(data.get("dag_versions")),
        triggering_user_name=field(data, "triggering_user_name", str, "a string", required=False),
    )


def triggered_run_from_json(data: Any, *, method: str, path: str) -> TriggeredRun:
    """A run `POST`ed or read by its id; an answer that is not such a run says which field is wrong, and how."""
    if not isinstance(data, Mapping):
        raise _odd_run(method, path, f"the answer is not a JSON object but {kind_of(data)}")
    state, conf = data.get("state"), data.get("conf")
    if state not in RUN_STATES:
        raise _odd_run(method, path, f"state {truncate(repr(state), 60)} is none of {', '.join(RUN_STATES)}")
    if conf is not None and not isinstance(conf, Mapping):
        raise _odd_run(method, path, f"conf is {kind_of(conf)}, not an object")
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


def kind_of(value: Any) -> str:
    """What a JSON value is, never the value (it may be long or unsafe to show)."""
    return "null" if value is None else _JSON_KINDS.get(type(value), type(value).__name__)


def _odd_run(method: str, path: str, what: str) -> AirflowError:
    return AirflowError(
        f"{method} {path}: Airflow's answer is not a DAG run: {what}",
        method=method,
        path=path,
        hint="is BACKFILLCTL_AIRFLOW_URL an Airflow 3 api-server (not a proxy or another service)?",
    )


SKIP_REASONS = ("in flight", "already exists", "unknown")  # BackfillDagRunExceptionReason (Airflow 3.4)


def backfill_slot_from_json(data: Any) -> BackfillSlot:
    """A slot of `GET /backfills/{id}/dag_runs` (3.4): a reason outside Airflow's three reads as `unknown` (the
    status shows it, so only Airflow's own words are kept)."""
    reason = field(data, "exception_reason", str, "a string", required=False)
    return BackfillSlot(
        sort_ordinal=field(data, "sort_ordinal", int, "an integer"),
        logical_date=_time(data, "logical_date"),
        partition_key=field(data, "partition_key", str, "a string", required=False),
        run_id=field(data, "dag_run_id", str, "a string", required=False),
        state=field(data, "dag_run_state", str, "a string", required=False),
        exception_reason=None if reason is None else reason if reason in SKIP_REASONS else "unknown",
    )


def planned_run_from_json(data: Any) -> PlannedRun:
    """A dry-run entry: `logical_date`, or for a partitioned DAG `partition_key` and `partition_date`."""
    planned = PlannedRun(
        _time(data, "logical_date"),
        field(data, "partition_key", str, "a string", required=False),
        _time(data, "partition_date"),
    )
    if planned.logical_date is None and planned.partition_date is None:
        raise Malformed("no logical_date and no partition_date")
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
        latest_version=_dag_version(data.get("latest_dag_version")),
        rerun_with_latest_version=_flag(data.get("rerun_with_latest_version"))
        if caps.rerun_with_latest_version
        else None,
        tags=_tags(data.get("tags")),
        catchup=_flag(data.get("catchup")),
    )


def _tags(raw: Any) -> tuple[str, ...] | None:
    """The DAG's tags (`[{"name": …, "dag_id": …}]`), None when the answer has none to read."""
    if not isinstance(raw, list):
        return None
    return tuple(sorted(str(t["name"]) for t in raw if isinstance(t, Mapping) and isinstance(t.get("name"), str)))


def _dag_version(latest: Any) -> DagVersion | None:
    """The details' `latest_dag_version` (the code new runs use); None when absent."""
    found = _dag_versions([latest])
    return found[0] if found else None


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


def version_ids_from_json(data: Any) -> frozenset[str]:
    """The ids of a DAG's versions (`GET /dags/{dag_id}/dagVersions`): UUIDs its metadata database made; an entry
    without a string id says nothing and is left out."""
    items = data.get("dag_versions") if isinstance(data, Mapping) else None
    return frozenset(v["id"] for v in items or () if isinstance(v, Mapping) and isinstance(v.get("id"), str))


def _flag(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None
