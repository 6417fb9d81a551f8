"""The policy's `notify:` section as a value (pure): the webhook receivers, and which events notify whom.

What an audited event sends, and to whom, is `core/audit/notify.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Event(StrEnum):
    """The notification events a policy may subscribe to; which audit record is which event is
    `core/audit/vocabulary.py`."""

    CREATED = "created"
    PROMOTED = "promoted"
    PAUSED = "paused"
    HALTED = "halted"
    STUCK = "stuck"
    SUCCEEDED = "succeeded"
    COMPLETED_WITH_FAILURES = "completed_with_failures"
    CANCELLED = "cancelled"
    REFUSED = "refused"
    ORPHANED = "orphaned"
    REHEARSED = "rehearsed"  # a rehearsal (its slices and their verification) succeeded
    VERIFIED = "verified"  # a verification run passed (after a canary, or the last backfill)
    VERIFICATION_FAILED = "verification_failed"  # a verification run failed, timed out or could not start
    PUBLISHED = "published"  # the publish run was triggered
    INVALID = "invalid"  # a spec file or the policy is invalid, or an applied spec was edited in place


class Alert(StrEnum):
    """The planner's findings that need a person now and notify (`Event.INVALID`): one declaration of their words,
    which the planner's finding kinds and the audit vocabulary both use."""

    INVALID_SPEC = "invalid-spec"  # a spec file with errors: Blocked alone
    INVALID_POLICY = "invalid-policy"  # the policy has errors: creates and resumes held
    EDITED_IN_PLACE = "edited-in-place"  # an applied spec's create-time fields changed in its file


EVENTS: tuple[str, ...] = tuple(Event)
DEFAULT_STUCK_MINUTES = 30


@dataclass(frozen=True, slots=True)
class Receiver:
    name: str
    webhook_env: str  # the environment variable holding the URL (a secret: never in a file or an output)
    format: str = "slack"


@dataclass(frozen=True, slots=True)
class NotifyPolicy:
    receivers: tuple[Receiver, ...] = ()
    events: tuple[str, ...] = EVENTS
    default_receivers: tuple[str, ...] = ()
    stuck_after_minutes: int = DEFAULT_STUCK_MINUTES

    def receiver(self, name: str) -> Receiver | None:
        return next((r for r in self.receivers if r.name == name), None)


NO_NOTIFY = NotifyPolicy()


def parse_notify(data: Mapping[str, Any] | None) -> NotifyPolicy:
    """Build the value from the policy's `notify:` block (already schema-valid)."""
    if not data:
        return NO_NOTIFY
    receivers = tuple(
        Receiver(name, raw["webhook_env"], raw.get("format", "slack"))
        for name, raw in sorted((data.get("receivers") or {}).items())
    )
    return NotifyPolicy(
        receivers=receivers,
        events=tuple(data.get("events", EVENTS)),
        default_receivers=tuple(data.get("default_receivers", ())),
        stuck_after_minutes=int(data.get("stuck_after_minutes", DEFAULT_STUCK_MINUTES)),
    )
