"""Emergency stops: `backfillctl stop` (pause at once, record the stop), its list and lift, and the pass's part
(read the holds, lift the stops that are due, record a hand pause found in Airflow as a stop).

The actor of a CLI stop is whoever the store credentials let write (`BACKFILLCTL_ACTOR`, `GITHUB_ACTOR` or the OS
user): only as trustworthy as those credentials. The reusable workflow's stop job runs with GitHub's identity and
checks it against the system's owners first (`--source workflow`).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from controller.adapters.airflow import AirflowClient
from controller.adapters.gitsource import GitSource
from controller.adapters.store import Store
from controller.commands.holds import lift
from controller.commands.record import Recorder
from controller.commands.session import open_reconciler
from controller.commands.settings import Settings
from controller.commands.validate import validate_paths
from controller.core.audit.vocabulary import Action, AuditPhase, Outcome
from controller.core.model.binding import Phase
from controller.core.model.policy import Policy
from controller.core.model.spec import BackfillSpec, format_utc
from controller.core.plan.stops import EmergencyStop, EmergencyStopKind, StopSource
from controller.errors import AirflowConflict, AirflowError, Refused, UsageError

if TYPE_CHECKING:
    from controller.commands.reconcile import Reconciler

log = logging.getLogger(__name__)
TRUST = (
    "the actor is only as trustworthy as the store credentials used (the workflow's stop job uses GitHub's identity)"
)


@dataclass(frozen=True, slots=True)
class StopResult:
    stop: EmergencyStop
    paused: tuple[tuple[str, int], ...]  # (spec, backfill id) paused at once
    held: tuple[str, ...]  # specs held (not created, unpaused or next-chunked) from now on
    failed: tuple[str, ...] = ()  # pauses Airflow refused (the next pass pauses them)


def affected(specs: Sequence[BackfillSpec], kind: EmergencyStopKind, target: str) -> list[BackfillSpec]:
    return [s for s in specs if (s.name == target if kind is EmergencyStopKind.SPEC else target in s.downstream)]


def check_target(specs: Sequence[BackfillSpec], policy: Policy, kind: EmergencyStopKind, target: str) -> None:
    """A stop names a spec that exists or a downstream system of the policy (a typo must not stop nothing)."""
    if kind is EmergencyStopKind.SPEC and not affected(specs, kind, target):
        names = ", ".join(sorted(s.name for s in specs)[:5]) or "none"
        raise UsageError(f"stop {target}: no spec named {target!r} in the specs directory", hint=f"specs: {names}")
    systems = {b.name for b in policy.downstream}
    if kind is EmergencyStopKind.DOWNSTREAM and target not in systems:
        raise UsageError(
            f"stop --downstream {target}: the policy has no downstream system {target!r}",
            hint=f"systems in specs/policy.yaml: {', '.join(sorted(systems)) or 'none'}",
        )


def owners_of(policy: Policy, specs: Sequence[BackfillSpec], stop: EmergencyStop) -> tuple[str, ...]:
    """Who may lift the stop: its system's owners, or the owners of every system its spec lists (and its
    requester and approvers when none of them has owners)."""
    budgets = {b.name: b for b in policy.downstream}
    systems = (
        [stop.target]
        if stop.kind is EmergencyStopKind.DOWNSTREAM
        else [d for s in affected(specs, stop.kind, stop.target) for d in s.downstream]
    )
    owners = [o for name in systems if name in budgets for o in budgets[name].owners]
    if not owners and stop.kind is EmergencyStopKind.SPEC:
        owners = [p for s in affected(specs, stop.kind, stop.target) for p in (s.requested_by, *s.approvers)]
    return tuple(dict.fromkeys(owners))


def stop_now(
    store: Store,
    client: AirflowClient,
    recorder: Recorder,
    specs: Sequence[BackfillSpec],
    *,
    kind: EmergencyStopKind,
    target: str,
    reason: str,
    actor: str,
    source: StopSource,
    expires_at: datetime | None,
) -> StopResult:
    """Record the stop (every later create or unpause intent is refused in its transaction), then pause each
    affected managed backfill at once, each with its intent and outcome."""
    stop = store.add_stop(kind, target, reason, actor, source=source, expires_at=expires_at)
    message = f"stop #{stop.id} of {kind.value} {target} by {actor} ({source.value}): {reason}"
    recorder.audit(Action.STOP, AuditPhase.OBSERVATION, None, outcome=Outcome.STOPPED, message=message)
    paused, failed = [], []
    held = affected(specs, kind, target)
    for spec in held:
        binding = store.binding(spec.name)
        backfill_id = None if binding is None else binding.backfill_id
        if backfill_id is None or binding is None or binding.phase.terminal:
            continue
        if _pause(client, recorder, spec, backfill_id=backfill_id, stop=stop):
            paused.append((spec.name, backfill_id))
        else:
            failed.append(spec.name)
    return StopResult(stop, tuple(paused), tuple(s.name for s in held), tuple(failed))


def _pause(
    client: AirflowClient,
    recorder: Recorder,
    spec: BackfillSpec,
    *,
    backfill_id: int,
    stop: EmergencyStop,
) -> bool:
    request = {"method": "PUT", "path": f"/api/v2/backfills/{backfill_id}/pause"}
    recorder.audit(Action.PAUSE, AuditPhase.INTENT, spec, backfill_id=backfill_id, request=request, message=stop.held)
    try:
        client.pause(backfill_id)
        outcome, response = Outcome.DONE, {"status": 200}
    except AirflowConflict as exc:
        outcome, response = Outcome.ALREADY_COMPLETED, {"status": exc.status or 409}
    except AirflowError as exc:
        failure = {"status": exc.status, "detail": exc.detail}
        recorder.audit(
            Action.PAUSE, AuditPhase.OUTCOME, spec, outcome=Outcome.FAILED, backfill_id=backfill_id, response=failure
        )
        return False
    recorder.audit(Action.PAUSE, AuditPhase.OUTCOME, spec, outcome=outcome, backfill_id=backfill_id, response=response)
    if outcome is Outcome.DONE:
        recorder.bind(spec, backfill_id, Phase.PAUSED, stop.held, guard="stop")
    return True


def find_stop(store: Store, name: str) -> EmergencyStop:
    """The stop in force of a spec or system name, or of an id (`#3` or `3`)."""
    stops = store.stops()
    wanted = name.removeprefix("#")
    found = [s for s in stops if s.target == name or str(s.id) == wanted]
    if not found:
        shown = ", ".join(f"#{s.id} {s.target}" for s in stops) or "none"
        raise UsageError(f"stop --lift {name}: no stop in force names {name!r}", hint=f"stops in force: {shown}")
    return found[0]


def list_lines(stops: Sequence[EmergencyStop]) -> list[str]:
    if not stops:
        return ["no stops in force"]
    lines = []
    for s in stops:
        until = f" until {format_utc(s.expires_at)}" if s.expires_at else ""
        lines.append(
            f"#{s.id} {s.kind.value} {s.target}: {s.reason} — by {s.actor} ({s.source.value}) at "
            f"{format_utc(s.created_at)}{until}"
        )
    return [*lines, f"note: {TRUST}"]


# --- the command's sessions ---------------------------------------------------------------------------------


def _recorder(settings: Settings, store: Store, reconciler: Reconciler, policy: Policy) -> Recorder:
    return Recorder(
        settings,
        store,
        reconciler.commit,
        reconciler.provenance,
        reconciler.airflow_url,
        policy=policy,
        bindings=dict(store.bindings()),
    )


def stop_with_settings(  # noqa: PLR0917 - the stop's fields
    settings: Settings,
    kind: EmergencyStopKind,
    target: str,
    reason: str,
    source: StopSource,
    expires_at: datetime | None,
) -> StopResult:
    with open_reconciler(settings) as reconciler:
        specs, policy = reconciler.load()
        check_target(specs, policy, kind, target)
        if source is StopSource.WORKFLOW:  # GitHub's identity: only the system's owners
            probe = EmergencyStop(0, kind, target, reason, settings.actor, source, datetime.now(UTC))
            require_owner(settings, owners_of(policy, specs, probe), f"stop {kind.value} {target}")
        recorder = _recorder(settings, reconciler.store, reconciler, policy)
        return stop_now(
            reconciler.store,
            reconciler.client,
            recorder,
            specs,
            kind=kind,
            target=target,
            reason=reason,
            actor=settings.actor,
            source=source,
            expires_at=expires_at,
        )


def lift_with_settings(settings: Settings, name: str, reason: str) -> EmergencyStop:
    """An owner's lift: the actor must be one of the owners of the stop's system (or spec)."""
    store = Store(settings.store_url, audit_key=settings.audit_key)
    with store:
        stop = find_stop(store, name)
        result = validate_paths([], settings.specs_dir, datetime.now(UTC))
        require_owner(settings, owners_of(result.policy, result.specs, stop), f"lift stop #{stop.id}")
        git = GitSource(settings.specs_dir)
        recorder = Recorder(settings, store, git.head(), {}, "", policy=result.policy, bindings=dict(store.bindings()))
        return lift(store, recorder, stop, settings.actor, reason)


def result_lines(result: StopResult) -> list[str]:
    stop = result.stop
    until = f" until {format_utc(stop.expires_at)}" if stop.expires_at else " until an owner lifts it"
    lines = [f"stop #{stop.id} of {stop.kind.value} {stop.target} by {stop.actor} ({stop.source.value}){until}"]
    lines += [f"  paused {spec} (backfill #{backfill_id})" for spec, backfill_id in result.paused]
    lines += [f"  held {spec}: nothing is created, unpaused or next-chunked" for spec in result.held]
    lines += [f"  error: could not pause {spec}; the next pass pauses it" for spec in result.failed]
    return [*lines, f"note: {TRUST}"]


def require_owner(settings: Settings, owners: Sequence[str], what: str) -> None:
    """The actor is an owner (a login, or a team the workflow found the actor in: BACKFILLCTL_ACTOR_TEAMS)."""
    teams = set(os.environ.get("BACKFILLCTL_ACTOR_TEAMS", "").split())
    if not owners or settings.actor in owners or teams & set(owners):
        return
    raise Refused(
        f"{what}: only an owner may ({', '.join(owners)}); the actor is {settings.actor}",
        hint="ask an owner; a stop also lifts at its expiry or when a reviewed `resume` names it",
    )


def system_owners(settings: Settings, system: str) -> list[str]:
    result = validate_paths([], settings.specs_dir, datetime.now(UTC))
    budgets = {b.name: b for b in result.policy.downstream}
    if system not in budgets:
        raise UsageError(f"--owners {system}: the policy has no downstream system {system!r}")
    return list(budgets[system].owners)
