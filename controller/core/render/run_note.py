"""An Airflow DAG-run note naming the spec that made the run (pure). Airflow renders notes as Markdown and keeps at
most 1,000 characters; a note a person wrote is kept, ours appended once below it."""

from __future__ import annotations

from urllib.parse import quote

from controller.core.documents.escaping import md_code, md_text
from controller.core.model.run_notes import AirflowNotes, NoteField
from controller.core.model.spec import BackfillSpec

NOTE_LIMIT = 1000  # Airflow's DAG-run note column and PATCH body (max_length=1000)
SEPARATOR = "\n\n---\n"  # between a person's note and ours
FIELD_LIMIT = 200  # one field's text, so that a long reason never crowds out the rest
LABELS = {
    NoteField.TICKET: "ticket",
    NoteField.REASON: "reason",
    NoteField.REQUESTED_BY: "requested by",
    NoteField.APPROVERS: "approvers",
    NoteField.CHANGE_RECORD_URL: "change record",
}


def marker(spec_name: str) -> str:
    """The first line of our note: how a later pass knows the run carries it already."""
    return f"**backfillctl** spec {md_code(spec_name)}"


def our_note(spec: BackfillSpec, notes: AirflowNotes) -> str:
    """The note for each run of `spec`'s backfill: the marker, then one line per chosen field, escaped."""
    lines = [marker(spec.name)]
    for name in notes.fields:
        value = _value(spec, notes, name)
        if name is not NoteField.SPEC and value:
            lines.append(f"- {LABELS[name]}: {value}")
    return _cut("  \n".join(lines), NOTE_LIMIT)


def merged_note(existing: str | None, ours: str, spec_name: str) -> str | None:
    """The note to write on a run that has `existing` (None: leave it, ours is there or there is no room). Ours
    replaces nothing a person wrote: it is appended once, shortened to the marker when the rest does not fit."""
    current = existing or ""
    if marker(spec_name) in current:
        return None
    if not current.strip():
        return ours
    for candidate in (ours, marker(spec_name)):
        if len(current) + len(SEPARATOR) + len(candidate) <= NOTE_LIMIT:
            return current + SEPARATOR + candidate
    return None


def _value(spec: BackfillSpec, notes: AirflowNotes, name: NoteField) -> str:
    if name is NoteField.TICKET:
        return md_code(spec.ticket)
    if name is NoteField.REASON:
        return md_text(_cut(spec.reason, FIELD_LIMIT))
    if name is NoteField.REQUESTED_BY:
        return md_text(_cut(spec.requested_by, FIELD_LIMIT))
    if name is NoteField.APPROVERS:
        return md_text(_cut(", ".join(spec.approvers), FIELD_LIMIT))
    if name is NoteField.CHANGE_RECORD_URL and notes.change_record_url:
        url = notes.change_record_url.format(spec=quote(spec.name, safe=""), ticket=quote(spec.ticket, safe=""))
        return f"<{url}>" if _linkable(url) else ""
    return ""


def _linkable(url: str) -> bool:
    """An autolink only for http(s) URLs with nothing that ends or escapes one (the schema checked the template)."""
    return url.startswith(("https://", "http://")) and not any(c in url for c in "<> \n\\")


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
