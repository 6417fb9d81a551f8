"""The policy's `airflow_notes` (pure): which DAGs' managed runs carry an Airflow DAG-run note, and what it says."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from fnmatch import fnmatchcase
from typing import Any


class NoteField(StrEnum):
    """What a run note may say besides its spec (the policy's `airflow_notes.fields`, in this order)."""

    SPEC = "spec"
    TICKET = "ticket"
    REASON = "reason"
    REQUESTED_BY = "requested_by"
    APPROVERS = "approvers"
    CHANGE_RECORD_URL = "change_record_url"


DEFAULT_FIELDS = (NoteField.SPEC, NoteField.TICKET)


@dataclass(frozen=True, slots=True)
class AirflowNotes:
    """Opt-in: a note is visible to every reader of the DAG, so only the DAGs and fields a team chose."""

    dags: tuple[str, ...]
    fields: tuple[NoteField, ...] = DEFAULT_FIELDS
    change_record_url: str | None = None  # a template with {spec} and {ticket} (the field `change_record_url`)

    def covers(self, dag_id: str) -> bool:
        return any(fnmatchcase(dag_id, glob) for glob in self.dags)


def parse_notes(raw: dict[str, Any] | None) -> AirflowNotes | None:
    """The value of a document that passed the policy schema (None: notes are off)."""
    if raw is None:
        return None
    fields = tuple(NoteField(f) for f in raw.get("fields", [f.value for f in DEFAULT_FIELDS]))
    ordered = tuple(f for f in NoteField if f in fields or f is NoteField.SPEC)  # the spec is always named
    return AirflowNotes(tuple(raw["dags"]), ordered, raw.get("change_record_url"))
