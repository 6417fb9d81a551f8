"""Emergency stops and hand pauses as values (pure): what a stop names, where it came from, what a held spec's
item says, and a stop as a change record shows it. What holds a spec and which stops are due to lift is
`core/plan/stops.py`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from controller.core.model.spec import BackfillSpec, format_utc


class EmergencyStopKind(StrEnum):
    """What an emergency stop names: one spec, a downstream system (every spec listing it), or everything."""

    SPEC = "spec"
    DOWNSTREAM = "downstream"
    ALL = "all"


EVERYTHING = "everything"  # the target of a stop of everything (`stop --all`)


class StopSource(StrEnum):
    CLI = "cli"  # as trustworthy as the store credentials the caller used
    WORKFLOW = "workflow"  # GitHub's identity: the reusable workflow's stop job, owners only
    AIRFLOW = "airflow"  # a pause made in Airflow's UI or API, found by a pass


NOT_RECORDED = "not recorded"


@dataclass(frozen=True, slots=True)
class EmergencyStop:
    id: int
    kind: EmergencyStopKind
    target: str
    reason: str
    actor: str
    source: StopSource
    created_at: datetime
    expires_at: datetime | None = None

    def covers(self, spec: BackfillSpec) -> bool:
        return covers(self.kind, self.target, spec)

    def expired(self, now: datetime) -> bool:
        return self.expires_at is not None and self.expires_at <= now

    @property
    def held(self) -> str:
        """What a held spec's item says."""
        if self.source is StopSource.AIRFLOW:
            who = f"by {self.actor}" if self.actor != NOT_RECORDED else f"(who: {NOT_RECORDED})"
            return (
                f"paused by hand in Airflow {who} at {format_utc(self.created_at)} (stop #{self.id}); "
                f'lift: unpause it in Airflow, or merge `resume: "stop #{self.id}: …"`'
            )
        until = f" (until {format_utc(self.expires_at)})" if self.expires_at is not None else ""
        return f"stop #{self.id}: stopped by {self.actor} ({self.source.value}): {self.reason}{until}"


@dataclass(frozen=True, slots=True)
class StopHistory:
    """A stop as a spec's change record shows it: the stop, and its lift if it was lifted."""

    stop: EmergencyStop
    lifted_at: datetime | None = None
    lifted_by: str | None = None
    lift_reason: str | None = None

    def text(self) -> str:
        s = self.stop
        lifted = (
            f"; lifted {format_utc(self.lifted_at)} by {self.lifted_by}: {self.lift_reason}"
            if self.lifted_at is not None
            else "; in force"
        )
        return (
            f"stop #{s.id} of {s.kind.value} {s.target} by {s.actor} ({s.source.value}) at "
            f"{format_utc(s.created_at)}: {s.reason}{lifted}"
        )


@dataclass(frozen=True, slots=True)
class HandPause:
    """A managed backfill's pause found in Airflow's event log (`pause_backfill`), or not found there."""

    who: str = NOT_RECORDED
    when: datetime | None = None


def covers(kind: EmergencyStopKind, target: str, spec: BackfillSpec) -> bool:
    """Whether a stop of `kind` naming `target` holds `spec`."""
    if kind is EmergencyStopKind.ALL:
        return True
    if kind is EmergencyStopKind.SPEC:
        return target == spec.name
    return target in spec.downstream
