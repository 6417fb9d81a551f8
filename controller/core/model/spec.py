"""The backfill spec as an immutable, typed value (pure).

`parse_spec` turns a schema-valid document into a `BackfillSpec`: dates become aware UTC datetimes (a
date means 00:00 UTC), lists become tuples, `dag_run_conf` a read-only mapping.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, date, datetime
from enum import StrEnum
from functools import partial
from types import MappingProxyType
from typing import Any

from controller.core.documents.yamlsafe import Document
from controller.core.model.guards import Window
from controller.core.model.stages import DEFAULT_VERIFY_TIMEOUT_MINUTES, Promotion, Publish, Rehearsal, Slice, Verify


class ReprocessBehavior(StrEnum):
    NONE = "none"
    FAILED = "failed"
    COMPLETED = "completed"


class DesiredState(StrEnum):
    ACTIVE = "active"
    PAUSED = "paused"
    CANCELLED = "cancelled"


@dataclass(frozen=True, slots=True)
class SourceFile:
    """A spec or policy file as read by an adapter: display path, file stem and raw bytes; `reread`, when the
    adapter can read a file again by its path (None if it no longer can), lets a validator drop the bytes and the
    document once the per-file checks are done and load them again only to place a later diagnostic (one function
    for every file: nothing is kept per file)."""

    path: str
    stem: str
    raw: bytes
    reread: Callable[[str], bytes | None] | None = field(default=None, compare=False, repr=False)


STOP_NAMED = re.compile(r"\bstop #(\d+)\b", re.IGNORECASE)  # how a `resume` names an emergency stop
PUBLISH = "publish"  # the spec key of a publish run (a finished spec owes it: never at rest)


@dataclass(frozen=True, slots=True)
class Execution:
    """How a large spec runs: chunks of at most `chunk_runs`, a canary chunk first, a failure halt."""

    chunk_runs: int | None = None  # None: one backfill, unless the policy sets a default chunk size
    canary_runs: int | None = None
    halt_on_failure_ratio: float | None = None
    halt_min_finished: int | None = None  # None: the default (chunks.HALT_MIN_FINISHED)
    promotion: Promotion = Promotion.MANUAL  # what lets the canary continue: `promote: true`, or its verification


NO_EXECUTION = Execution()


@dataclass(frozen=True, slots=True)
class Select:
    """The code history is to be made by (`select`): a DAG version_number, or a versioned bundle's version
    (exactly one; the schema says so)."""

    code_version: int | None = None
    bundle_version: str | None = None

    def text(self) -> str:
        return f"version {self.code_version}" if self.bundle_version is None else f"bundle {self.bundle_version}"


@dataclass(frozen=True, slots=True)
class BackfillSpec:
    name: str
    dag_id: str
    from_date: datetime
    to_date: datetime
    reprocess_behavior: ReprocessBehavior
    max_active_runs: int
    ticket: str
    reason: str
    requested_by: str
    approvers: tuple[str, ...]
    path: str
    digest: str
    run_backwards: bool = False
    dag_run_conf: Mapping[str, Any] | None = None
    run_on_latest_version: bool | None = None
    drain_dag: bool = False  # Airflow 3.4+: no scheduled runs during the backfill, the DAG paused after it
    state: DesiredState = DesiredState.ACTIVE
    expected_runs: int | None = None
    downstream: tuple[str, ...] = ()
    notify: tuple[str, ...] = ()  # receivers declared in the policy's notify section
    windows: tuple[Window, ...] | None = None  # None: the policy's windows; (): `always`
    execution: Execution | None = None  # None: not set (a policy default chunk size may still apply)
    promote: bool = False  # lets a chunked spec continue after its canary chunk
    resume: str | None = None  # a new value lets a Halted spec continue
    acknowledged: str | None = None  # a reviewed acceptance of its failures (--fail-on-failures passes it)
    retry_of: str | None = None  # the spec whose failed runs this one re-runs (its change record links here)
    rehearsal: Rehearsal | None = None  # slices run first in the environment production rehearses in
    verify: Verify | None = None  # the verification DAG run after a rehearsal, a canary and the last backfill
    publish: Publish | None = None  # triggered once, after the final verification passed
    writes: tuple[str, ...] = ()  # the tables the backfill rewrites (shown; owners notified)
    rollback: str | None = None  # how to undo it (shown in the PR comment and the change record)
    select: Select | None = None  # re-run only the intervals other code made (None: the whole range)

    @property
    def resumed_stops(self) -> frozenset[int]:
        """The emergency stop ids its reviewed `resume` names (`stop #3: warehouse recovered`)."""
        return frozenset(int(n) for n in STOP_NAMED.findall(self.resume or ""))

    def conf_json(self) -> str | None:
        """`dag_run_conf` as canonical JSON (for identity comparisons), or None when unset."""
        return None if self.dag_run_conf is None else canonical_json(thaw(self.dag_run_conf))

    def identity(self) -> dict[str, Any]:
        """The fields that define the backfill in Airflow; they must not change once applied."""
        return (
            {
                "dag_id": self.dag_id,
                "from_date": format_utc(self.from_date),
                "to_date": format_utc(self.to_date),
                "reprocess_behavior": self.reprocess_behavior.value,
                "max_active_runs": self.max_active_runs,
                "run_backwards": self.run_backwards,
                "dag_run_conf": self.conf_json(),
                "run_on_latest_version": self.run_on_latest_version,
            }
            | ({"drain_dag": True} if self.drain_dag else {})
            | self._select_identity()
        )  # absent unless set: identities
        # stored before these fields hold

    def _select_identity(self) -> dict[str, Any]:
        """`select` once applied: its sub-ranges were chosen for this target, so a new target is a new spec."""
        chosen = self.select
        return {} if chosen is None else {"select": {k: v for k, v in asdict(chosen).items() if v is not None}}

    def with_identity(self, identity: Mapping[str, Any]) -> BackfillSpec:
        """This spec asking what an earlier `identity()` asked: its create-time fields as they were applied."""
        conf = identity.get("dag_run_conf")
        return replace(
            self,
            dag_id=identity["dag_id"],
            from_date=parse_date(identity["from_date"]),
            to_date=parse_date(identity["to_date"]),
            reprocess_behavior=ReprocessBehavior(identity["reprocess_behavior"]),
            max_active_runs=identity["max_active_runs"],
            run_backwards=bool(identity.get("run_backwards")),
            dag_run_conf=None if conf is None else _freeze(json.loads(conf)),
            run_on_latest_version=identity.get("run_on_latest_version"),
            drain_dag=bool(identity.get("drain_dag")),
            select=_select(identity.get("select")),
        )

    def rehearsal_key(self, bundle_version: str | None) -> str:
        """What a rehearsal proves, as a short digest: the fields that create the backfill (without the range:
        the slices stand for it), the DAG's bundle version where it rehearses, and `attempt`. A changed `notify`
        keeps the key; a fixed DAG (a new bundle version) or a new `attempt` changes it."""
        facts: dict[str, Any] = {k: v for k, v in self.identity().items() if k not in ("from_date", "to_date")}
        rehearsal = self.rehearsal
        facts["slices"] = (
            [[format_utc(s.from_date), format_utc(s.to_date)] for s in rehearsal.slices] if rehearsal else []
        )
        facts["attempt"] = rehearsal.attempt if rehearsal else None
        facts["bundle_version"] = bundle_version
        return hashlib.sha256(canonical_json(facts).encode()).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class InvalidSpec:
    """A spec file with errors: Blocked alone, with its located errors, while every other spec is planned. `name`
    and `dag_id` are what the file says (the file stem and "" when it cannot say); `spec` when it loaded."""

    path: str
    name: str
    dag_id: str
    errors: tuple[str, ...]
    spec: BackfillSpec | None = None

    def reason(self) -> str:
        more = f" (and {len(self.errors) - 1} more)" if len(self.errors) > 1 else ""
        return f"invalid spec: {self.errors[0]}{more}; fix the file (`backfillctl validate` lists every error)"


def parse_date(text: str) -> datetime:
    """`2025-01-01` → 2025-01-01T00:00Z; an RFC 3339 date-time → the same instant in UTC."""
    if len(text) == 10:
        return datetime.combine(date.fromisoformat(text), datetime.min.time(), tzinfo=UTC)
    value = datetime.fromisoformat(text.upper().replace(" ", "T"))
    if value.tzinfo is None:
        raise ValueError(f"{text!r} has no UTC offset")
    return value.astimezone(UTC)


def format_utc(value: datetime) -> str:
    """RFC 3339 in UTC with a `Z`, seconds precision unless sub-second parts are set."""
    return value.astimezone(UTC).isoformat().replace("+00:00", "Z")


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def digest(raw: bytes) -> str:
    return "sha256:" + hashlib.sha256(raw).hexdigest()


def parse_spec(doc: Document, source: SourceFile, shared: dict[Any, Any] | None = None) -> BackfillSpec:
    """Build the value from a document that passed the schema (dates were format-checked there).

    `shared`, kept across the specs of one tree, makes equal values that specs often repeat (DAG, requester,
    approvers, downstream, receivers, dates: all strings, tuples of strings or UTC datetimes) one object."""
    data: dict[str, Any] = doc.data
    conf = data.get("dag_run_conf")
    one = _same if shared is None else partial(_one, shared)
    return BackfillSpec(
        name=data["name"],
        dag_id=one(data["dag_id"]),
        from_date=one(parse_date(data["from_date"])),
        to_date=one(parse_date(data["to_date"])),
        reprocess_behavior=ReprocessBehavior(data["reprocess_behavior"]),
        max_active_runs=data["max_active_runs"],
        ticket=data["ticket"],
        reason=data["reason"],
        requested_by=one(data["requested_by"]),
        approvers=one(tuple(data["approvers"])),
        path=source.path,
        digest=digest(source.raw),
        run_backwards=data.get("run_backwards", False),
        dag_run_conf=None if conf is None else _freeze(conf),
        run_on_latest_version=data.get("run_on_latest_version"),
        drain_dag=bool(data.get("drain_dag", False)),
        state=DesiredState(data.get("state", "active")),
        expected_runs=data.get("expected_runs"),
        downstream=one(tuple(data.get("downstream", ()))),
        notify=one(tuple(data.get("notify", ()))),
        windows=_windows(data.get("windows")),
        execution=_execution(data.get("execution")),
        promote=bool(data.get("promote", False)),
        resume=data.get("resume"),
        acknowledged=data.get("acknowledged"),
        retry_of=data.get("retry_of"),
        rehearsal=_rehearsal(data.get("rehearsal")),
        verify=_verify(data.get("verify")),
        publish=_publish(data.get(PUBLISH)),
        writes=tuple(data.get("writes", ())),
        rollback=data.get("rollback"),
        select=_select(data.get("select")),
    )


def _select(raw: dict[str, Any] | None) -> Select | None:
    return None if raw is None else Select(raw.get("code_version"), raw.get("bundle_version"))


def _execution(raw: dict[str, Any] | None) -> Execution | None:
    if raw is None:
        return None
    return Execution(
        raw.get("chunk_runs"),
        raw.get("canary_runs"),
        raw.get("halt_on_failure_ratio"),
        raw.get("halt_min_finished"),
        Promotion(raw.get("promotion", Promotion.MANUAL.value)),
    )


def _rehearsal(raw: dict[str, Any] | None) -> Rehearsal | None:
    if raw is None:
        return None
    slices = tuple(Slice(parse_date(s["from_date"]), parse_date(s["to_date"])) for s in raw["slices"])
    return Rehearsal(slices, raw.get("attempt", 1))


def _verify(raw: dict[str, Any] | None) -> Verify | None:
    if raw is None:
        return None
    timeout = raw.get("timeout_minutes", DEFAULT_VERIFY_TIMEOUT_MINUTES)
    return Verify(raw["dag_id"], _frozen_conf(raw), timeout, raw.get("result_task"))


def _publish(raw: dict[str, Any] | None) -> Publish | None:
    return None if raw is None else Publish(raw["dag_id"], _frozen_conf(raw))


def _frozen_conf(raw: dict[str, Any]) -> Mapping[str, Any] | None:
    """A verify or publish `conf`, read-only like `dag_run_conf` (None when unset)."""
    conf = raw.get("conf")
    return None if conf is None else _freeze(conf)


def _same(value: Any) -> Any:
    return value


def _one(shared: dict[Any, Any], value: Any) -> Any:
    """The first equal value seen, for strings, tuples of strings and datetimes (a settled spec skips the
    schema: anything else, e.g. 1 and True, which are equal keys, stays as it is)."""
    kind = type(value)
    if kind is str or kind is datetime or (kind is tuple and all(type(item) is str for item in value)):
        return shared.setdefault(value, value)
    return value


def _windows(raw: Any) -> tuple[Window, ...] | None:
    if raw is None:
        return None
    if raw == "always":
        return ()
    return tuple(Window(tuple(w["days"]), w["start"], w["end"], w["timezone"]) for w in raw)


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return MappingProxyType({k: _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """A plain, JSON-serialisable copy of a frozen JSON value (mappings as dicts, tuples as lists)."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [thaw(v) for v in value]
    return value


def thaw_conf(spec: BackfillSpec) -> dict[str, Any] | None:
    """A plain, JSON-serialisable copy of the spec's dag_run_conf."""
    return None if spec.dag_run_conf is None else dict(thaw(spec.dag_run_conf))
