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

IMMUTABLE = (*BACKFILL_FIELDS, "select")  # what a create sends, and what chose it, can never change in place
CHUNKED_MUTABLE = "max_active_runs"  # …except this one on a chunked spec: the next chunk is a new backfill
# what may change after apply (the spec's field names are its YAML keys): a change to one is judged like a new spec
MUTABLE = (
    "state",
    "promote",
    "resume",
    "acknowledged",
    "execution",
    "windows",
    "notify",
    "rehearsal",
    "verify",
    "publish",
    "writes",
    "rollback",
)
HINT = (
    "create a new spec; the applied backfill cannot be changed in place (only "
    + ", ".join(f"`{name}`" for name in MUTABLE[:-1])
    + f" and `{MUTABLE[-1]}` may change)"
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
    return spec.identity().get(name)  # a field an identity holds only when set (`drain_dag`) is None when not


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One create-time field that differs from what was applied."""

    field: str
    before: object
    after: object

    def text(self) -> str:
        return f"{self.field} {_show(self.before)} → {_show(self.after)}"


def edited_fields(applied: Mapping[str, object], chunked: bool, spec: BackfillSpec) -> tuple[FieldChange, ...]:
    """The create-time fields of `spec` that differ from `applied` (`BackfillSpec.identity` when it was applied,
    `chunked` then): the one rule behind `validate --base` and every pass's edit-in-place check."""
    now = spec.identity()
    return tuple(
        FieldChange(field, applied.get(field), now.get(field))
        for field in IMMUTABLE
        if applied.get(field) != now.get(field)
        and not (field == CHUNKED_MUTABLE and chunked and spec.execution is not None)
    )


def mutable_changes(before: BackfillSpec, after: BackfillSpec) -> frozenset[str]:
    """The mutable fields `after` changes (and `max_active_runs` of a chunked spec): what a newer policy still judges
    on a spec already applied."""
    changed = {name for name in MUTABLE if getattr(before, name) != getattr(after, name)}
    if before.max_active_runs != after.max_active_runs:
        changed.add(CHUNKED_MUTABLE)
    return frozenset(changed)


def immutability(base: Mapping[str, BackfillSpec], head: Mapping[str, LoadedSpec], ref: str) -> list[Diagnostic]:
    """Errors for applied fields that changed; a warning for every deleted spec."""
    found: list[Diagnostic] = []
    for name, item in sorted(head.items()):
        before = base.get(name)
        if before is None:
            continue
        for change in edited_fields(before.identity(), before.execution is not None, item.spec):
            field = change.field
            found.append(
                Diagnostic(
                    item.doc.locate((field,)) if field in item.doc.data else item.doc.locate((), at_key=False),
                    f"{field} changed from {_show(change.before)} to {_show(change.after)} since {ref}"
                    f"{_why(field, before, item.spec)}",
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
