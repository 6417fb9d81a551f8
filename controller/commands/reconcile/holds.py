"""The pass's part of emergency stops: read the holds (the stops in force, the backfills a stop paused, who
paused a managed backfill in Airflow), lift the stops that are due, and record a hand pause as a stop."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from controller.adapters.airflow import AirflowClient
from controller.adapters.store import Store
from controller.commands.reconcile.record import Recorder
from controller.core.audit.vocabulary import Action, AuditPhase, Outcome
from controller.core.model.airflow import Backfill
from controller.core.model.binding import Binding
from controller.core.model.spec import BackfillSpec, DesiredState
from controller.core.model.stops import NOT_RECORDED, EmergencyStop, EmergencyStopKind, HandPause, StopSource
from controller.core.plan.stops import LiftReason, due_lifts
from controller.core.plan.values import FindingKind, Plan
from controller.core.plan.world import Holds, World
from controller.errors import AirflowError

log = logging.getLogger(__name__)


def lift(
    store: Store, recorder: Recorder, stop: EmergencyStop, by: str, why: str, *, held: Sequence[BackfillSpec] = ()
) -> EmergencyStop:
    """Lift the stop, audited: a spec's stop names its spec, a system's (or everything's) each spec it held."""
    lifted = store.lift_stop(stop.id, by, why)
    message = f"stop #{stop.id} of {stop.kind.value} {stop.target} lifted by {by}: {why}"
    if stop.kind is EmergencyStopKind.DOWNSTREAM:
        message += f"; it held {', '.join(s.name for s in held) or 'no spec'}"
    named: dict[str, Any] = {"spec_name": stop.target} if stop.kind is EmergencyStopKind.SPEC else {}
    recorder.audit(Action.STOP, AuditPhase.OBSERVATION, None, outcome=Outcome.LIFTED, message=message, **named)
    return lifted


def with_holds(world: World, client: AirflowClient | None, store: Store) -> World:
    """The world with the stops in force, the backfills a stop paused, and who paused a managed backfill that
    Airflow shows paused without a pause of ours (from the event log, where it names the user)."""
    paused = {b.spec_name: found for b in world.bindings.values() if (found := _observed(world, b)) and found.is_paused}
    # only the bound backfills Airflow shows paused are asked: a pass with none reads no pause history at all
    stops, stop_paused = store.stops(), store.stop_paused(frozenset(b.id for b in paused.values()))
    hands: dict[int, HandPause] = {}
    if client is not None:
        for name, backfill in paused.items():
            binding = world.bindings[name]
            if binding.guard or backfill.id in stop_paused or binding.applied_state is not DesiredState.ACTIVE:
                continue
            hands[backfill.id] = _hand_pause(client, backfill.id)
    return replace(world, holds=Holds(stops, hands, stop_paused))


def _hand_pause(client: AirflowClient, backfill_id: int) -> HandPause:
    try:
        found = client.last_pause(backfill_id)
    except AirflowError as exc:  # a viewer token may not read the event log: say who is not known
        log.info("event log unavailable for backfill #%s (%s)", backfill_id, exc.message)
        return HandPause()
    if found is None:
        return HandPause()
    who, when = found
    return HandPause(who or NOT_RECORDED, when)


def _observed(world: World, binding: Binding) -> Backfill | None:
    obs = world.observations.get(binding.dag_id)
    if obs is None or binding.backfill_id is None:
        return None
    return next((b for b in obs.backfills if b.id == binding.backfill_id and b.active), None)


def lift_due(world: World, specs: Sequence[BackfillSpec], store: Store, recorder: Recorder, actor: str) -> World:
    """Lift the stops that are due (expired, named by a reviewed `resume`, a hand pause unpaused in Airflow),
    each audited; the world then holds only the others."""
    backfills = {b.spec_name: found for b in world.bindings.values() if (found := _observed(world, b)) is not None}
    lifts = due_lifts(world.holds.stops, specs, backfills, world.now)
    for due in lifts:
        lift(store, recorder, due.stop, actor, due.why, held=[s for s in specs if due.stop.covers(s)])
    gone = {d.stop.id for d in lifts if d.reason is not LiftReason.RESUMED}  # the planner resumes from the others
    return replace(world, holds=replace(world.holds, stops=tuple(s for s in world.holds.stops if s.id not in gone)))


def record_hand_stops(plan: Plan, world: World, store: Store, recorder: Recorder) -> None:
    """A managed backfill paused in Airflow by a person is a stop: recorded with who and when (where the event
    log names them), so a reviewed `resume` can name it and status shows it."""
    held = {s.target for s in world.holds.stops if s.kind is EmergencyStopKind.SPEC}
    for finding in plan.findings:
        if finding.kind is not FindingKind.DRIFT or finding.spec is None or finding.spec in held:
            continue
        hand = world.holds.hand_pauses.get(finding.backfill_id or -1, HandPause())
        reason = f"backfill #{finding.backfill_id} paused by hand in Airflow"
        stop = store.add_stop(EmergencyStopKind.SPEC, finding.spec, reason, hand.who, source=StopSource.AIRFLOW)
        who = hand.who if hand.who != NOT_RECORDED else f"(who: {NOT_RECORDED})"
        message = f"stop #{stop.id} of spec {finding.spec} by {who} (airflow): {reason}"
        recorder.audit(
            Action.STOP, AuditPhase.OBSERVATION, None, outcome=Outcome.STOPPED, message=message, spec_name=finding.spec
        )
