"""`backfillctl status` and `report`: what to show, from Airflow (read only) or from the store (offline)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from controller.adapters.store import Reconciled
from controller.commands.reconcile.applied import applied_yet, last_author, spec_at, view_applied
from controller.commands.reconcile.lookahead import said
from controller.commands.reconcile.opening import open_reconciler
from controller.commands.reconcile.specfiles import validate_paths
from controller.commands.runtime.session import open_store
from controller.commands.runtime.settings import Settings
from controller.commands.verbs import audit as audit_cmd
from controller.core.audit.chain import AuditRecord
from controller.core.model.binding import Binding, Phase
from controller.core.model.policy import Policy
from controller.core.model.spec import BackfillSpec
from controller.core.render import status
from controller.core.render.change_record import ChangeRecord, change_record
from controller.core.render.links import ui_base
from controller.core.rules.liveness import Liveness
from controller.errors import AirflowUnavailable, UsageError


@dataclass(frozen=True, slots=True)
class StatusView:
    rows: list[status.StatusRow]
    incomplete: bool  # some spec could not be observed, or is invalid: the command exits 1
    offline: bool  # the rows are what the store last recorded: no Airflow configured, or it is unreachable
    liveness: Liveness | None = None  # the dead-man's check (None: no interval declared)
    outage: str | None = None  # Airflow is configured and unreachable: why (the rows are the stored view)


def status_view(
    settings: Settings, now: datetime, name: str | None = None, *, expect_every: timedelta | None = None
) -> StatusView:
    """Every spec's row, and the dead-man's check (`expect_every`, else the policy's `liveness.expect_every`).
    Airflow unreachable: the stored view, each row stale, and why (`outage`) — never a spec Blocked for it."""
    outage, server = None, None
    if settings.airflow_url is None:
        rows, incomplete, policy, last = _stored_view(settings, now)
    else:
        try:
            with open_reconciler(settings, read_only=True) as reconciler:
                # what plan says of a queued spec reconcile will refuse at the head, status says too
                viewed = reconciler.plan(with_dry_runs=False, ahead=True)
                current, world = viewed.plan, viewed.world
                rows = status.status_rows(current, reconciler.store.bindings(), world.analysis, world.stages)
                last, policy = reconciler.store.last_reconciled(), viewed.policy
                server = reconciler.client.capabilities
            incomplete = any(i.error for i in current.items)
        except AirflowUnavailable as exc:
            outage = exc.message
            rows, incomplete, policy, last = _stored_view(settings, now)
    if settings.airflow_url is not None:  # where a person sees each backfill (3.4's page once the server says so)
        rows = status.with_links(rows, ui_base(settings.airflow_url), None if outage else server)
    every = expect_every or policy.expect_every
    alive = None if every is None else Liveness(None if last is None else last.last_pass_at, every, now)
    if name is not None:
        rows = [r for r in rows if r.spec == name]
        if not rows:
            raise UsageError(f"no spec named {name!r}", hint="`backfillctl status` lists every spec")
    return StatusView(rows, incomplete, settings.airflow_url is None or outage is not None, alive, outage)


def _stored_view(settings: Settings, now: datetime) -> tuple[list[status.StatusRow], bool, Policy, Reconciled | None]:
    """What the store last recorded, every spec in the tree (an invalid file and an edit Blocked as a pass shows
    them), with the policy and the last reconciled commit."""
    with open_store(settings, read_only=True) as store:
        bindings, last = store.bindings(), store.last_reconciled()
    applied = dict.fromkeys(n for n, b in bindings.items() if applied_yet(b))
    found = validate_paths([], settings.specs_dir, now, applied=applied).split()
    specs, edits = view_applied(found.valid, bindings, settings.specs_dir)
    rows = status.stored_rows(specs, bindings, found.invalid, edits)
    rows = _with_kept_ahead(rows, {s.name: s for s in specs}, bindings, found.policy)
    return rows, bool(found.invalid or edits or found.policy_errors), found.policy, last


def _with_kept_ahead(
    rows: Sequence[status.StatusRow],
    specs: Mapping[str, BackfillSpec],
    bindings: Mapping[str, Binding],
    policy: Policy,
) -> list[status.StatusRow]:
    """Each queued spec's judgement reconcile kept, said as the online view says it (by the policy of now)."""
    out = []
    for row in rows:
        spec, binding = specs.get(row.spec), bindings.get(row.spec)
        ahead = binding.ahead if binding is not None else None
        if spec is None or ahead is None or ahead.digest != spec.digest or row.phase != Phase.QUEUED.value:
            out.append(row)
            continue
        words, refusal = said(ahead, spec, policy, fresh=False)
        out.append(replace(row, note=f"{row.note}; {words}", refused_at_head=refusal) if words else row)
    return out


def report_document(settings: Settings, name: str, now: datetime) -> ChangeRecord:
    """The change record of one spec, from the store and its audit events: of a spec whose file is gone too (a
    finished spec tidied away, a file the policy turned invalid), rebuilt from the commit its records name."""
    specs = validate_paths([], settings.specs_dir, now).specs
    spec = next((s for s in specs if s.name == name), None)
    kept = audit_cmd.spec_record(settings, name, spec.downstream if spec is not None else ())
    gone = None
    if spec is None:
        spec, gone = _from_history(settings, name, kept.events)
        kept = audit_cmd.spec_record(settings, name, spec.downstream)
    stored = kept.binding
    retries = [s for s in specs if s.retry_of == name]  # follow-ups over its failed runs (`new --retry-failed-of`)
    applied, edits = view_applied([spec], {name: stored} if stored is not None else {}, settings.specs_dir)
    edit = edits.get(name)
    edited = None if edit is None or gone is not None else edit.text()
    return change_record(
        applied[0],
        stored,
        kept.events,
        retries,
        kept.stages,
        edited=edited,
        file_gone=gone,
        stops=kept.stops,
        acknowledged_by=None if spec.acknowledged is None or gone else last_author(settings.specs_dir, spec),
    )


def _from_history(settings: Settings, name: str, events: Sequence[AuditRecord]) -> tuple[BackfillSpec, str]:
    """A spec whose file is not in the folder (now), as git holds it at the last commit its audit records name, and
    the line that says so; a name the store does not know is a usage error."""
    named = [e.entry for e in events if e.entry.spec_commit and e.entry.spec_path]
    if not events:
        raise UsageError(
            f"no spec named {name!r} under {settings.specs_dir}, and the store has no record of it",
            hint="the name is the file name; `backfillctl audit show` lists what the store knows",
        )
    if not named:
        raise UsageError(
            f"{name!r} has records in the store but its file is gone and no record names its commit",
            hint=f"`backfillctl audit show --spec {name}` shows its records",
        )
    last = named[-1]
    commit, path = str(last.spec_commit), str(last.spec_path)
    spec = spec_at(settings.specs_dir, commit, name)
    if spec is None:
        raise UsageError(
            f"{name!r}: its file is gone, and git no longer has it at commit {commit[:12]}",
            hint=f"`backfillctl audit show --spec {name}` shows its records",
        )
    return (
        spec,
        f"{path} is no longer in the specs folder: this record is the store's, the spec as of commit {commit[:12]}",
    )
