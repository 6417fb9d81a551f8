"""`backfillctl status` and `report`: what to show, from Airflow (read only) or from the store (offline)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from controller.commands import audit as audit_cmd
from controller.commands.session import open_reconciler
from controller.commands.settings import Settings
from controller.commands.validate import validate_paths
from controller.core.render import status
from controller.core.render.change_record import ChangeRecord, change_record
from controller.errors import UsageError


@dataclass(frozen=True, slots=True)
class StatusView:
    rows: list[status.StatusRow]
    incomplete: bool  # some spec could not be observed: the command exits 1
    offline: bool  # no Airflow configured: the rows are what the store last recorded


def status_view(settings: Settings, now: datetime, name: str | None = None) -> StatusView:
    if settings.airflow_url is None:
        specs = validate_paths([], settings.specs_dir, now).specs
        rows = status.stored_rows(specs, audit_cmd.stored_bindings(settings))
        view = StatusView(rows, incomplete=False, offline=True)
    else:
        with open_reconciler(settings, read_only=True) as reconciler:
            current, _specs, world = reconciler.plan(with_dry_runs=False)
            rows = status.status_rows(current, reconciler.store.bindings(), world.analysis, world.stages)
        view = StatusView(rows, incomplete=any(i.error for i in current.items), offline=False)
    if name is None:
        return view
    chosen = [r for r in view.rows if r.spec == name]
    if not chosen:
        raise UsageError(f"no spec named {name!r}", hint="`backfillctl status` lists every spec")
    return StatusView(chosen, view.incomplete, view.offline)


def report_document(settings: Settings, name: str, now: datetime) -> ChangeRecord:
    """The change record of one spec, from the store and its audit events."""
    specs = validate_paths([], settings.specs_dir, now).specs
    spec = next((s for s in specs if s.name == name), None)
    if spec is None:
        raise UsageError(f"no spec named {name!r} under {settings.specs_dir}", hint="the name is the file name")
    stored, events, stages = audit_cmd.spec_record(settings, name)
    retries = [s for s in specs if s.retry_of == name]  # follow-ups over its failed runs (`new --retry-failed-of`)
    return change_record(spec, stored, events, retries, stages)
