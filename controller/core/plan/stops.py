"""Emergency stops and hand pauses (pure): what holds a spec, and which stops are due to be lifted.

A stop is recorded in the store by `backfillctl stop` (the store credentials' word), by the reusable workflow's
stop job (GitHub's identity), or by a pass that found a managed backfill paused in Airflow (Airflow's identity,
where its event log names the user). A stop holds every spec it names, or every spec listing its downstream
system: nothing is created, unpaused or next-chunked for it. It is lifted by an owner (`stop lift`), by its
expiry, by a reviewed `resume` that names it (`resume: "stop #3: warehouse recovered"`), and a stop made in
Airflow also by unpausing the backfill in Airflow.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from controller.core.model.airflow import Backfill
from controller.core.model.guards import Guard, GuardKind
from controller.core.model.logins import one_of
from controller.core.model.policy import Policy
from controller.core.model.spec import BackfillSpec, format_utc
from controller.core.model.stops import NOT_RECORDED, EmergencyStop, EmergencyStopKind, StopSource, covers
from controller.errors import Refused, UsageError

STOP = Guard(GuardKind.STOP)  # a stop's pause on an item (never `state: paused`, never drift)


def affected(specs: Sequence[BackfillSpec], kind: EmergencyStopKind, target: str) -> list[BackfillSpec]:
    return [s for s in specs if covers(kind, target, s)]


def lifters(policy: Policy, specs: Sequence[BackfillSpec], stop: EmergencyStop) -> tuple[str, ...]:
    """Who may lift `stop`: the owners of its system (a spec's stop: of every system the spec lists; a stop of
    everything: of every system); a stop no owner covers, only the actor who placed it. An on-call login never
    lifts, even its own stop: the expiry, a reviewed `resume` or an owner does."""
    owners = _owners(policy, _systems(policy, specs, stop.kind, stop.target))
    owners = owners or ([stop.actor] if stop.actor != NOT_RECORDED else [])
    return tuple(o for o in owners if not one_of(o, policy.oncall))


def stop_owners(policy: Policy, specs: Sequence[BackfillSpec], stop: EmergencyStop) -> tuple[str, ...]:
    """The owners of the systems `stop` covers (): an owner-less stop): a reviewed `resume` naming an owner's stop
    needs one of them to approve it."""
    return tuple(_owners(policy, _systems(policy, specs, stop.kind, stop.target)))


def stoppers(policy: Policy, specs: Sequence[BackfillSpec], kind: EmergencyStopKind, target: str) -> tuple[str, ...]:
    """Who may stop through GitHub's identity (the stop workflow): the owners of the systems the stop covers and
    the policy's on-call logins; () when no owner covers it (a stop only ever reduces the load: anyone may)."""
    owners = _owners(policy, _systems(policy, specs, kind, target))
    return tuple(dict.fromkeys((*owners, *policy.oncall))) if owners else ()


def _systems(policy: Policy, specs: Sequence[BackfillSpec], kind: EmergencyStopKind, target: str) -> list[str]:
    """The downstream systems a stop covers: every one, its own, or those its spec lists."""
    if kind is EmergencyStopKind.ALL:
        return list(policy.budgets)
    if kind is EmergencyStopKind.DOWNSTREAM:
        return [target]
    return [d for s in affected(specs, kind, target) for d in s.downstream]


def _owners(policy: Policy, systems: Iterable[str]) -> list[str]:
    budgets = policy.budgets
    return list(dict.fromkeys(o for name in systems if name in budgets for o in budgets[name].owners))


def check_target(
    specs: Sequence[BackfillSpec], bound: Collection[str], policy: Policy, kind: EmergencyStopKind, target: str
) -> None:
    """A stop names a spec that exists (a valid file, or a spec the store binds), or a downstream system of the
    policy (a typo must not stop nothing)."""
    if kind is EmergencyStopKind.SPEC and not affected(specs, kind, target) and target not in bound:
        names = ", ".join(sorted(s.name for s in specs)[:5]) or "none"
        raise UsageError(f"stop {target}: no spec named {target!r} in the specs directory", hint=f"specs: {names}")
    systems = {b.name for b in policy.downstream}
    if kind is EmergencyStopKind.DOWNSTREAM and target not in systems:
        raise UsageError(
            f"stop --downstream {target}: the policy has no downstream system {target!r}",
            hint=f"systems in specs/policy.yaml: {', '.join(sorted(systems)) or 'none'}",
        )


def find_stop(stops: Sequence[EmergencyStop], name: str) -> EmergencyStop:
    """The stop in force of a spec or system name, or of an id (`#3` or `3`)."""
    wanted = name.removeprefix("#")
    found = [s for s in stops if s.target == name or str(s.id) == wanted]
    if not found:
        shown = ", ".join(f"#{s.id} {s.target}" for s in stops) or "none"
        raise UsageError(f"stop lift {name}: no stop in force names {name!r}", hint=f"stops in force: {shown}")
    return found[0]


def _one_of(actor: str, teams: Collection[str], allowed: Sequence[str]) -> bool:
    """The actor is allowed: by login (case-insensitive), or by a team the workflow found the actor in."""
    return one_of(actor, allowed) or any(one_of(t, allowed) for t in teams)


def may_lift(actor: str, teams: Collection[str], allowed: Sequence[str], what: str) -> None:
    """The actor may lift: one of `allowed`. Nobody allowed: only the expiry or a reviewed `resume` lifts it."""
    if allowed and _one_of(actor, teams, allowed):
        return
    who = ", ".join(allowed) or "nobody by hand"
    raise Refused(
        f"{what}: only {who} may; the actor is {actor}",
        hint="ask an owner; a stop also lifts at its expiry or when a reviewed `resume` names it "
        "(on-call logins may stop, never lift)",
    )


def may_stop(actor: str, teams: Collection[str], allowed: Sequence[str], what: str) -> None:
    """The actor may stop (no owner covers the target: anyone may; a stop only reduces the load)."""
    if not allowed or _one_of(actor, teams, allowed):
        return
    raise Refused(
        f"{what}: only {', '.join(allowed)} may; the actor is {actor}",
        hint="ask an owner or the on-call, or pause the backfill in Airflow (the next pass records it as a stop)",
    )


def owners_of_system(policy: Policy, system: str) -> list[str]:
    """The owners of a downstream system of the policy (`stop --owners`)."""
    budgets = {b.name: b for b in policy.downstream}
    if system not in budgets:
        raise UsageError(f"--owners {system}: the policy has no downstream system {system!r}")
    return list(budgets[system].owners)


def named_by_resume(spec: BackfillSpec) -> frozenset[int]:
    """The stop ids the spec's reviewed `resume` value names (`stop #3`)."""
    return spec.resumed_stops


def stop_of(spec: BackfillSpec, stops: Iterable[EmergencyStop], now: datetime) -> EmergencyStop | None:
    """The first (oldest) stop that holds the spec now: unexpired, and not named by its `resume`."""
    lifted = named_by_resume(spec)
    held = [s for s in stops if s.covers(spec) and not s.expired(now) and s.id not in lifted]
    return min(held, key=lambda s: s.id, default=None)


def resumed_from(spec: BackfillSpec, stops: Iterable[EmergencyStop]) -> EmergencyStop | None:
    """A stop of the spec its `resume` names: the planner unpauses what that stop paused."""
    lifted = named_by_resume(spec)
    return next((s for s in stops if s.covers(spec) and s.id in lifted), None)


class LiftReason(StrEnum):
    """Why a pass lifts a stop (`due_lifts`); a reviewed resume's stop stays in the planner's view, which resumes
    the spec from it."""

    EXPIRED = "expired"
    RESUMED = "reviewed resume"
    UNPAUSED = "unpaused in Airflow"


@dataclass(frozen=True, slots=True)
class Lift:
    stop: EmergencyStop
    reason: LiftReason
    why: str  # the words recorded with the lift


def due_lifts(
    stops: Sequence[EmergencyStop],
    specs: Sequence[BackfillSpec],
    backfills: Mapping[str, Backfill],
    now: datetime,
) -> list[Lift]:
    """The stops a pass lifts, each with why: expired, named by a spec's reviewed `resume`, or (a pause made in
    Airflow) unpaused there. `backfills`: each spec's bound backfill as observed now."""
    lifts: list[Lift] = []
    for stop in stops:
        covered = [s for s in specs if stop.covers(s)]
        if stop.expired(now):
            lifts.append(Lift(stop, LiftReason.EXPIRED, f"expired at {format_utc(stop.expires_at or now)}"))
        elif resumed := [s for s in covered if stop.id in named_by_resume(s)]:
            if stop.kind is EmergencyStopKind.SPEC or len(resumed) == len(covered):
                why = f"{LiftReason.RESUMED} of {resumed[0].name}: {resumed[0].resume}"
                lifts.append(Lift(stop, LiftReason.RESUMED, why))
        elif stop.source is StopSource.AIRFLOW and _unpaused(covered, backfills):
            lifts.append(Lift(stop, LiftReason.UNPAUSED, str(LiftReason.UNPAUSED)))
    return lifts


def _unpaused(covered: Sequence[BackfillSpec], backfills: Mapping[str, Backfill]) -> bool:
    seen = [backfills.get(s.name) for s in covered]
    return bool(seen) and all(b is None or not b.active or not b.is_paused for b in seen)
