"""Emergency stops: `backfillctl stop` (pause at once, record the stop), its list and lift, and the pass's part
(read the holds, lift the stops that are due, record a hand pause found in Airflow as a stop).

The actor of a CLI stop is whoever the store credentials let write (`BACKFILLCTL_ACTOR`, `GITHUB_ACTOR` or the OS
user): only as trustworthy as those credentials. The reusable workflow's stop job runs with GitHub's identity: its
`--source workflow` is recorded as such only with the job's OIDC token (BACKFILLCTL_OIDC_TOKEN) proving the policy's
`stop_workflow` ran it (`core.rules.oidc`); an unproven claim is a `cli` stop that says what it claimed. Either way
the workflow's actor (the token's, once proven) must be an owner or on-call.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from controller.adapters.airflow import AirflowClient
from controller.adapters.gitsource import GitSource
from controller.adapters.oidc import IssuerError, issuer_keys
from controller.adapters.store import Store
from controller.commands.reconcile.holds import lift
from controller.commands.reconcile.opening import open_reconciler
from controller.commands.reconcile.record import Recorder
from controller.commands.reconcile.spec_source import last_good_policy
from controller.commands.reconcile.specfiles import validate_paths
from controller.commands.runtime.session import open_store
from controller.commands.runtime.settings import Settings
from controller.core.audit.vocabulary import Action, AuditPhase, Outcome
from controller.core.model.binding import Binding, Phase
from controller.core.model.policy import Policy
from controller.core.model.spec import BackfillSpec, format_utc
from controller.core.model.stops import EmergencyStop, EmergencyStopKind, StopSource, covers
from controller.core.plan.stops import (
    STOP,
    affected,
    check_target,
    find_stop,
    lifters,
    may_lift,
    may_stop,
    owners_of_system,
    stoppers,
)
from controller.core.rules.oidc import Proof, Unproven, parse, prove
from controller.errors import AirflowConflict, AirflowError, StoreError

if TYPE_CHECKING:
    from controller.commands.reconcile.reconciler import Reconciler

log = logging.getLogger(__name__)
TRUST = (
    "a cli stop's actor is only as trustworthy as the store credentials used (a workflow stop's is GitHub's, proven "
    "by the job's OIDC token)"
)


@dataclass(frozen=True, slots=True)
class StopResult:
    stop: EmergencyStop
    paused: tuple[tuple[str, int], ...]  # (spec, backfill id) paused at once
    held: tuple[str, ...]  # specs held (not created, unpaused or next-chunked) from now on
    failed: tuple[str, ...] = ()  # pauses Airflow refused (the next pass pauses them)
    unproven: str | None = None  # a claimed source that was not proven, and why (the stop is then `cli`)


@dataclass(frozen=True, slots=True)
class Origin:
    """Where a stop is recorded as coming from, by whom, and (a claim not proven) what was claimed and why not."""

    source: StopSource
    actor: str
    unproven: str | None = None


def stop_origin(
    claimed: StopSource,
    settings: Settings,
    trusted: Policy | None,
    now: datetime,
    keys: Callable[[str], Any] = issuer_keys,
) -> Origin:
    """`claimed` as it may be recorded: `workflow` only with a token that proves the `trusted` policy's (the last
    reconciled one's) stop workflow ran this stop (its actor then the token's); else `cli`, saying why."""
    if claimed is not StopSource.WORKFLOW:
        return Origin(claimed, settings.actor)
    try:
        proof = _prove(settings, trusted, now, keys)
    except Unproven as exc:
        return Origin(StopSource.CLI, settings.actor, f"claimed source workflow, not proven: {exc}")
    return Origin(StopSource.WORKFLOW, proof.actor)


def _prove(settings: Settings, trusted: Policy | None, now: datetime, keys: Callable[[str], Any]) -> Proof:
    expected = trusted.stop_workflow if trusted is not None else None
    if expected is None:
        raise Unproven("the policy at the last reconciled commit names no stop_workflow")
    if settings.oidc_token is None:
        raise Unproven("no BACKFILLCTL_OIDC_TOKEN was given")
    token = parse(settings.oidc_token.reveal())  # the header first: an `alg: none` token fetches nothing
    try:
        issued = keys(expected.issuer)
    except IssuerError as exc:
        raise Unproven(exc.message) from None
    return prove(token, issued, expected, now)


BREAK_GLASS = (
    "the store is unreachable, so no stop can be recorded: pause the backfill in Airflow instead (its UI, or "
    "`PUT /api/v2/backfills/ID/pause`); the next pass records that pause as a stop made by hand and never undoes "
    'it (docs/operations.md, "The store is down")'
)


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
    unproven: str | None = None,
) -> StopResult:
    """Record the stop (every later create or unpause intent is refused in its transaction), then pause each
    affected managed backfill at once, each with its intent and outcome: a spec whose file is invalid too, by the
    binding the store keeps (a stop never waits on a file being right)."""
    stop = store.add_stop(kind, target, reason, actor, source=source, expires_at=expires_at)
    held = affected(specs, kind, target)
    message = f"stop #{stop.id} of {kind.value} {target} by {actor} ({source.value}): {reason}"
    if kind is EmergencyStopKind.DOWNSTREAM:  # a stop of a system names each spec it holds
        message += f"; holds {', '.join(s.name for s in held) or 'no spec yet'}"
    message += f" ({unproven})" if unproven else ""
    named: dict[str, Any] = {"spec_name": target} if kind is EmergencyStopKind.SPEC else {}
    recorder.audit(Action.STOP, AuditPhase.OBSERVATION, None, outcome=Outcome.STOPPED, message=message, **named)
    paused, failed = [], []
    by_name = {s.name: s for s in specs}
    for name, binding in sorted(store.bindings().items()):
        spec = by_name.get(name)
        covered = covers(kind, target, spec) if spec is not None else kind is EmergencyStopKind.ALL or name == target
        if not covered or binding.backfill_id is None or binding.phase.terminal:
            continue
        if _pause(client, recorder, spec, binding, binding.backfill_id, stop=stop):
            paused.append((name, binding.backfill_id))
        else:
            failed.append(name)
    return StopResult(stop, tuple(paused), tuple(s.name for s in held), tuple(failed), unproven)


def _pause(
    client: AirflowClient,
    recorder: Recorder,
    spec: BackfillSpec | None,
    binding: Binding,
    backfill_id: int,
    *,
    stop: EmergencyStop,
) -> bool:
    """Pause the binding's backfill for the stop (`spec` None: its file is invalid; the record names it by its
    binding)."""
    named: dict[str, Any] = {} if spec is not None else {"spec_name": binding.spec_name, "dag_id": binding.dag_id}
    request = client.steer_request(backfill_id, "pause")
    recorder.audit(
        Action.PAUSE, AuditPhase.INTENT, spec, backfill_id=backfill_id, request=request, message=stop.held, **named
    )
    try:
        client.pause(backfill_id)
        outcome, response = Outcome.DONE, {"status": 200}
    except AirflowConflict as exc:
        outcome, response = Outcome.ALREADY_COMPLETED, {"status": exc.status or 409}
    except AirflowError as exc:
        failure = {"status": exc.status, "detail": exc.detail}
        recorder.audit(
            Action.PAUSE,
            AuditPhase.OUTCOME,
            spec,
            outcome=Outcome.FAILED,
            backfill_id=backfill_id,
            response=failure,
            **named,
        )
        return False
    recorder.audit(
        Action.PAUSE, AuditPhase.OUTCOME, spec, outcome=outcome, backfill_id=backfill_id, response=response, **named
    )
    if outcome is Outcome.DONE and spec is not None:
        recorder.bind(spec, backfill_id, Phase.PAUSED, stop.held, guard=STOP)
    return True


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
    claimed: StopSource,
    expires_at: datetime | None,
    keys: Callable[[str], Any] = issuer_keys,
) -> StopResult:
    """Pause at once and record the stop, whatever else is wrong: an invalid sibling or policy is no reason to wait
    (the policy then is the last reconciled one); an unreachable store is the one thing that stops it, and then the
    error says the break-glass step."""
    try:
        with open_reconciler(settings, lists_dags=False) as reconciler:  # it pauses; it lists no DAG
            found = reconciler.load()
            policy = (last_good_policy(reconciler.store) if found.policy_errors else None) or found.policy
            specs = list(found.valid)
            check_target(specs, frozenset(reconciler.store.bindings()), policy, kind, target)
            origin = stop_origin(claimed, settings, last_good_policy(reconciler.store), datetime.now(UTC), keys)
            settings = replace(settings, actor=origin.actor)
            if claimed is StopSource.WORKFLOW:  # owners and on-call only: proven, the token's actor; else as before
                may_stop(settings.actor, _teams(), stoppers(policy, specs, kind, target), f"stop {kind.value} {target}")
            return stop_now(
                reconciler.store,
                reconciler.client,
                _recorder(settings, reconciler.store, reconciler, policy),
                specs,
                kind=kind,
                target=target,
                reason=reason,
                actor=origin.actor,
                source=origin.source,
                expires_at=expires_at,
                unproven=origin.unproven,
            )
    except StoreError as exc:
        raise StoreError(exc.message, hint=BREAK_GLASS) from None


def lift_with_settings(settings: Settings, name: str, reason: str) -> EmergencyStop:
    """An owner's lift: the actor must be one of those who may lift it (`core.plan.stops.lifters`), judged by the
    policy at the last reconciled commit (a pull request cannot name itself an owner and lift before review)."""
    store = open_store(settings)
    with store:
        stop = find_stop(store.stops(), name)
        result = validate_paths([], settings.specs_dir, datetime.now(UTC))
        policy = last_good_policy(store) or result.policy
        may_lift(settings.actor, _teams(), lifters(policy, list(result.split().valid), stop), f"lift stop #{stop.id}")
        git = GitSource(settings.specs_dir)
        recorder = Recorder(settings, store, git.head(), {}, "", policy=policy, bindings=dict(store.bindings()))
        return lift(
            store, recorder, stop, settings.actor, reason, held=affected(result.split().valid, stop.kind, stop.target)
        )


def result_lines(result: StopResult) -> list[str]:
    stop = result.stop
    until = f" until {format_utc(stop.expires_at)}" if stop.expires_at else " until an owner lifts it"
    lines = [f"stop #{stop.id} of {stop.kind.value} {stop.target} by {stop.actor} ({stop.source.value}){until}"]
    lines += [f"  note: {result.unproven}; recorded as {stop.source.value}"] if result.unproven else []
    lines += [f"  paused {spec} (backfill #{backfill_id})" for spec, backfill_id in result.paused]
    lines += [f"  held {spec}: nothing is created, unpaused or next-chunked" for spec in result.held]
    lines += [f"  error: could not pause {spec}; the next pass pauses it" for spec in result.failed]
    return [*lines, f"note: {TRUST}"]


def _teams() -> frozenset[str]:
    """The teams the workflow found the actor in (BACKFILLCTL_ACTOR_TEAMS, space-separated)."""
    return frozenset(os.environ.get("BACKFILLCTL_ACTOR_TEAMS", "").split())


def system_owners(settings: Settings, system: str) -> list[str]:
    return owners_of_system(validate_paths([], settings.specs_dir, datetime.now(UTC)).policy, system)
