"""What the store remembers of each spec (table `bindings`): its backfills, phase, run counts and more.

The JSON `detail` column holds what was added after the first schema (create facts, chunks, a guard's
pause, a refusal, the approval), so those need no migration.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

from sqlalchemy import ColumnElement, Connection, and_, bindparam, case, insert, select, update

from controller.adapters.store.database import Clock, Database, batches, decoded, json_text, stamp
from controller.adapters.store.revisions import bump_finished
from controller.adapters.store.tables import bindings
from controller.core.model.airflow import summary_from_json
from controller.core.model.binding import (
    TERMINAL,
    Ahead,
    Applied,
    Approval,
    Binding,
    BindingHead,
    Claim,
    CreateFacts,
    NotesMark,
    Phase,
    is_applied,
)
from controller.core.model.chunks import Progress
from controller.core.model.coverage import Coverage
from controller.core.model.guards import Guard
from controller.core.model.spec import DesiredState
from controller.core.plan.provenance import REFUSED as APPROVAL_GATE

# built once: building the statements (and their cache keys) per save was ~3/4 of its time (260 → 65 µs)
_PHASE = select(bindings.c.phase).where(bindings.c.spec_name == bindparam("name"))
_UPDATE = update(bindings).where(bindings.c.spec_name == bindparam("name"))
_INSERT = insert(bindings)
_JSON = ("run_counts", "detail")  # read as their text and decoded by `decoded`
_TERMINAL = frozenset(p.value for p in TERMINAL)
_BATCH = 500  # names in one `IN` list (far below SQLite's and PostgreSQL's bound-parameter limits)


class Bindings:
    def __init__(self, db: Database, clock: Clock) -> None:
        self._db, self._clock = db, clock

    def save(self, binding: Binding) -> None:
        """Insert or replace what the store remembers of one spec (one transaction); a finished one, before or after,
        bumps the revision rest summaries are keyed by (`rest_summary.py`)."""
        now = stamp(self._clock())
        values = _binding_row(binding)
        with self._db.tx(f"saving the binding of {binding.spec_name}") as conn:
            old = conn.execute(_PHASE, {"name": binding.spec_name}).first()
            if old is not None:
                conn.execute(_UPDATE, {**values, "updated_at": now, "name": binding.spec_name})
            else:
                conn.execute(_INSERT, {**values, "created_at": now, "updated_at": now})
            if binding.phase.terminal or (old is not None and old[0] in _TERMINAL):
                bump_finished(conn)

    def get(self, spec_name: str) -> Binding | None:
        with self._db.tx("reading a binding") as conn:
            row = conn.execute(select(bindings).where(bindings.c.spec_name == spec_name)).mappings().first()
            return None if row is None else _binding(dict(row))

    def all(self) -> dict[str, Binding]:
        with self._db.tx("reading bindings") as conn:
            return _bindings(conn, None)

    def named(self, names: Collection[str]) -> dict[str, Binding]:
        """The bindings of `names` the store has, read `_BATCH` names a query."""
        found: dict[str, Binding] = {}
        with self._db.tx("reading bindings") as conn:
            for batch in batches(sorted(names), _BATCH):
                found |= _bindings(conn, bindings.c.spec_name.in_(batch))
        return found

    def unfinished(self) -> list[str]:
        """The names of the bindings whose phase is not terminal."""
        c = bindings.c
        with self._db.tx("reading bindings") as conn:
            return [row[0] for row in conn.execute(select(c.spec_name).where(c.phase.not_in(sorted(_TERMINAL))))]

    def heads(self) -> dict[str, BindingHead]:
        """Every binding's head from its plain columns; the JSON detail is read only where they cannot tell whether
        the spec was applied (no backfill, not Succeeded: chunks may say)."""
        c = bindings.c
        unsure = and_(c.backfill_id.is_(None), c.phase != Phase.SUCCEEDED.value)
        detail = case((unsure, json_text(c.detail)))
        with self._db.tx("reading bindings") as conn:
            rows = conn.execute(select(c.spec_name, c.dag_id, c.phase, c.spec_digest, c.backfill_id, detail)).all()
        heads, phases = {}, {p.value: p for p in Phase}  # a dict, not `Phase(…)`: 10,000 heads, 2 lookups each
        for (name, dag_id, text, digest, backfill_id, _text), read in zip(
            rows, decoded([r[5] for r in rows]), strict=True
        ):
            phase = phases.get(text) or Phase(text)  # an unknown phase raises as `Phase(…)` does
            applied = is_applied(backfill_id, read is not None and _chunked(read), phase)
            heads[name] = BindingHead(name, dag_id, phase, digest, applied)
        return heads

    def claims(self, names: Collection[str]) -> dict[str, Claim]:
        """The claims of `names` the store has (`Binding.claim`), from the plain columns and three small parts of
        the JSON detail: the owned backfills, the chunks (a chunked spec's only) and the drain."""
        c = bindings.c
        parts = (c.detail["backfills"], c.detail["progress"], c.detail[("applied", "identity", "drain_dag")])
        query = select(c.spec_name, c.dag_id, c.backfill_id, *parts)
        found: dict[str, Claim] = {}
        with self._db.tx("reading bindings") as conn:
            for batch in batches(sorted(names), _BATCH):
                for name, dag_id, backfill_id, owned, progress, drain in conn.execute(
                    query.where(c.spec_name.in_(batch))
                ):
                    chunks = Progress.from_json(progress).ids if progress is not None else ()
                    found[name] = Claim.of(
                        name, dag_id, backfill_id, (*_owned(owned, backfill_id), *chunks), bool(drain)
                    )
        return found


def _bindings(conn: Connection, where: ColumnElement[bool] | None) -> dict[str, Binding]:
    plain = [c for c in bindings.c if c.name not in _JSON]
    query = select(*plain, *(json_text(bindings.c[name]) for name in _JSON))
    rows = conn.execute(query if where is None else query.where(where)).all()
    names, width = [*(c.name for c in plain), *_JSON], len(plain)
    documents = [decoded([row[width + i] for row in rows]) for i in range(len(_JSON))]
    named = (dict(zip(names, (*row[:width], *docs), strict=True)) for row, *docs in zip(rows, *documents, strict=True))
    return {values["spec_name"]: _binding(values) for values in named}


def _owned(listed: Any, backfill_id: int | None) -> tuple[int, ...]:
    """The detail's backfills list; a row written before it kept one has its current backfill alone."""
    return tuple(listed or (() if backfill_id is None else (backfill_id,)))


def _chunked(detail: Any) -> bool:
    """A detail's chunks (as `_binding` reads them): a spec whose chunks began is applied."""
    progress = detail.get("progress") if isinstance(detail, Mapping) else None
    return progress is not None and bool(Progress.from_json(progress).chunks)


def _binding(row: Mapping[str, Any]) -> Binding:
    """The one place a bindings row becomes a core value."""
    detail = dict(row.get("detail") or {})
    backfill_id = row["backfill_id"]
    owned = _owned(detail.get("backfills"), backfill_id)
    return Binding(
        spec_name=row["spec_name"],
        dag_id=row["dag_id"],
        backfill_id=backfill_id,
        phase=Phase(row["phase"]),
        applied_state=DesiredState(row.get("applied_state") or DesiredState.ACTIVE.value),
        spec_digest=row["spec_digest"],
        reason=detail.get("reason", ""),
        runs=None if row.get("run_counts") is None else summary_from_json(row["run_counts"]),
        created=CreateFacts.from_json(detail),
        backfills=owned,
        git_commit=row.get("git_commit"),
        airflow_url=row.get("airflow_url") or "",
        updated_at=row.get("updated_at"),
        guard=Guard.from_text(detail["guard"]) if detail.get("guard") else None,
        progress=None if detail.get("progress") is None else Progress.from_json(detail["progress"]),
        refused=bool(detail.get("refused")),
        approval_refused=_approval_refused(row["phase"], detail),
        approval=Approval.from_json(detail.get("approval")),
        applied=Applied.from_json(detail.get("applied")),
        noted=NotesMark.from_json(detail.get("noted")),
        coverage=_coverage(detail.get("coverage")),
        ahead=Ahead.from_json(detail.get("ahead")),
    )


def _coverage(data: Any) -> Coverage | None:
    """The version coverage stored when the spec ended; one this release cannot read is measured as not stored."""
    try:
        return Coverage.from_json(data) if isinstance(data, Mapping) else None
    except (KeyError, TypeError, ValueError):
        return None


def _approval_refused(phase: str, detail: Mapping[str, Any]) -> bool:
    """Whether the refusal is the approval gate's; a store written before the flag says so by its reason alone
    (read so here, once, so that a spec refused for its approvals stays refused after an upgrade)."""
    if "approval_refused" in detail or not detail.get("refused"):
        return bool(detail.get("approval_refused"))
    return phase == Phase.BLOCKED.value and str(detail.get("reason", "")).startswith(APPROVAL_GATE)


def _binding_row(binding: Binding) -> dict[str, Any]:
    """And back: the core value as the row's columns (the JSON detail keeps the reason and create facts)."""
    detail: dict[str, Any] = {"reason": binding.reason, "backfills": list(binding.backfills)}
    if binding.guard is not None:  # a guard's pause, remembered across passes (never confused with state: paused)
        detail["guard"] = str(binding.guard)
    if binding.created is not None:
        detail.update(binding.created.as_json())
    if binding.progress is not None:  # a chunked spec's chunks, one backfill each: JSON beside the rest, no migration
        detail["progress"] = binding.progress.as_json()
    if binding.refused:  # the last decision, a refusal: JSON beside the rest, no migration
        detail["refused"] = True
    if binding.approval_refused:
        detail["approval_refused"] = True
    if binding.approval is not None:  # who approved the pull request (reconcile's gate): JSON, no migration
        detail["approval"] = binding.approval.as_json()
    if binding.applied is not None:  # what it asked when first applied (the edit-in-place check): JSON, no migration
        detail["applied"] = binding.applied.as_json()
    if binding.noted is not None:  # how far its runs carry the Airflow run note: JSON, no migration
        detail["noted"] = binding.noted.as_json()
    if binding.coverage is not None:  # version coverage when it ended: JSON, no migration
        detail["coverage"] = binding.coverage.as_json()
    if binding.ahead is not None:  # a queued spec version's look-ahead: JSON, no migration
        detail["ahead"] = binding.ahead.as_json()
    return {
        "spec_name": binding.spec_name,
        "airflow_url": binding.airflow_url,
        "dag_id": binding.dag_id,
        "backfill_id": binding.backfill_id,
        "spec_digest": binding.spec_digest,
        "git_commit": binding.git_commit,
        "phase": binding.phase.value,
        "run_counts": None if binding.runs is None else binding.runs.as_json(),
        "applied_state": binding.applied_state.value,
        "detail": detail,
    }
