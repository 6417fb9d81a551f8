"""What a pull request changes in specs/, and the rules for changes (pure).

A spec that exists at the base ref may change only what is not sent to Airflow (`state`, `promote`,
`resume`, `execution`, `windows`, `notify`, `rehearsal`, `verify`, `publish`, `writes`, `rollback`, …): its
backfill may already exist in Airflow, and Airflow cannot change a backfill's dates, DAG, reprocess behaviour or
limits in place. One exception: a chunked spec (with `execution` at the base and at head) may change
`max_active_runs`, which applies from its next chunk. A rename is a delete plus an add. A deletion is allowed and
cancels nothing (a warning says so).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from controller.core.checks.loaded import LoadedSpec
from controller.core.documents.diagnostics import Diagnostic, Location, Severity
from controller.core.model.airflow import BACKFILL_FIELDS
from controller.core.model.spec import BackfillSpec

IMMUTABLE = BACKFILL_FIELDS  # what a create sends can never change in place
CHUNKED_MUTABLE = "max_active_runs"  # …except this one on a chunked spec: the next chunk is a new backfill
HINT = (
    "create a new spec; the applied backfill cannot be changed in place (only `state`, `promote`, `resume`, "
    "`execution`, `windows`, `notify`, `rehearsal`, `verify`, `publish`, `writes` and `rollback` may change)"
)


class Change(StrEnum):
    ADDED = "added"
    CHANGED = "changed"
    STATE_ONLY = "state-only"
    UNCHANGED = "unchanged"
    DELETED = "deleted"


@dataclass(frozen=True, slots=True)
class SpecChange:
    name: str
    change: Change
    path: str


def classify(base: Mapping[str, BackfillSpec], head: Mapping[str, LoadedSpec]) -> list[SpecChange]:
    """Per spec name (names, not paths: a renamed file is a delete plus an add)."""
    out = [SpecChange(name, _kind(base.get(name), item.spec), item.spec.path) for name, item in head.items()]
    out += [SpecChange(name, Change.DELETED, spec.path) for name, spec in base.items() if name not in head]
    return sorted(out, key=lambda c: c.name)


def _kind(before: BackfillSpec | None, after: BackfillSpec) -> Change:
    if before is None:
        return Change.ADDED
    if before.digest == after.digest:
        return Change.UNCHANGED
    if all(_value(before, f) == _value(after, f) for f in IMMUTABLE):
        return Change.STATE_ONLY if before.state != after.state else Change.CHANGED
    return Change.CHANGED


def _value(spec: BackfillSpec, name: str) -> object:
    return spec.identity()[name]


def immutability(base: Mapping[str, BackfillSpec], head: Mapping[str, LoadedSpec], ref: str) -> list[Diagnostic]:
    """Errors for applied fields that changed; a warning for every deleted spec."""
    found: list[Diagnostic] = []
    for name, item in sorted(head.items()):
        before = base.get(name)
        if before is None:
            continue
        for field in IMMUTABLE:
            old, new = _value(before, field), _value(item.spec, field)
            if old == new or (field == CHUNKED_MUTABLE and _chunked(before, item.spec)):
                continue
            found.append(
                Diagnostic(
                    item.doc.locate((field,)) if field in item.doc.data else item.doc.locate((), at_key=False),
                    f"{field} changed from {_show(old)} to {_show(new)} since {ref}{_why(field, before, item.spec)}",
                    _hint(field, before, item.spec),
                )
            )
    for name, spec in sorted(base.items()):
        if name not in head:
            found.append(
                Diagnostic(
                    Location(spec.path, 1, 1),
                    f"spec {name!r} is deleted since {ref}",
                    "deleting a spec cancels nothing; set `state: cancelled` to stop its backfill",
                    Severity.WARNING,
                )
            )
    return found


def _chunked(before: BackfillSpec, after: BackfillSpec) -> bool:
    """Chunked at the base and at head: each chunk is a new Airflow backfill, so the next one can take new limits."""
    return before.execution is not None and after.execution is not None


def _why(field: str, before: BackfillSpec, after: BackfillSpec) -> str:
    if field != CHUNKED_MUTABLE:
        return ""
    if before.execution is None and after.execution is not None:
        return ", in the same change that adds `execution`"
    if before.execution is not None and after.execution is None:
        return ", in the same change that removes `execution`"
    return ""


def _hint(field: str, before: BackfillSpec, after: BackfillSpec) -> str:
    if field == CHUNKED_MUTABLE and before.execution is None and after.execution is not None:
        return (
            "the running backfill is not chunked: Airflow cannot change its max_active_runs; "
            "create a new spec to run the rest with another limit"
        )
    if field == CHUNKED_MUTABLE and before.execution is not None and after.execution is None:
        return "keep `execution` to change max_active_runs from the next chunk, or create a new spec"
    if field == CHUNKED_MUTABLE:
        return (
            "create a new spec; Airflow cannot change an applied backfill's max_active_runs "
            "(a spec with `execution` may change it: it applies from the next chunk)"
        )
    return HINT


def _show(value: object) -> str:
    return "unset" if value is None else repr(value)
