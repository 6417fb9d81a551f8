"""The audit log's words, declared once (pure): what a record says was done (`Action`), where in a call it was
written (`AuditPhase`), how it ended (`Outcome`, or for an `observe` record the spec's new `Phase`), and which
of those are notification events (`event_of`).

Every (action, outcome) a record can hold has a row in `OUTCOMES`, with its event or None (not an event): a
word added to an enum without a decision fails tests/core/audit/test_audit_vocabulary.py. A `finding` record's
outcome is the finding's kind; the planner's kinds are no events (`core/plan` names them), but `Outcome.STUCK` and
the alerts (an invalid file or policy, an edit in place: `Alert`) are.
The records keep these words as plain text (a StrEnum is a str): the hashed body is what it always was.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum
from types import MappingProxyType

from controller.core.model.binding import Phase
from controller.core.model.notify_policy import Alert, Event


class Action(StrEnum):
    """What a record is about; `audit show --action` accepts exactly these."""

    ADOPT = "adopt"  # a backfill found in Airflow is bound to its spec
    AUDIT_KEY = "audit-key"  # `audit adopt-key` keyed the chain, `audit rotate-key` changed its key
    CANCEL = "cancel"
    CREATE = "create"
    FINDING = "finding"  # something seen that needs a person (drift, an unmanaged backfill, stuck runs, …)
    LEASE = "lease"  # the reconciler's lease (taken over when its holder's expired)
    NOTE = "note"  # Airflow run notes written on a backfill's runs (the policy's `airflow_notes`), one record a pass
    OBSERVE = "observe"  # a spec's phase changed, as observed in Airflow; the outcome is the new `Phase`
    PAUSE = "pause"
    PROMOTE = "promote"  # `promote: true` after a canary chunk
    PUBLISH = "publish"  # the publish run, triggered once after the final verification passed
    RECONCILE = "reconcile"  # a pass, a refusal of the whole pass, `--allow-dirty`
    REHEARSE = "rehearse"  # a rehearsal slice's backfill in the rehearsing environment, and the rehearsal's result
    STOP = "stop"  # an emergency stop recorded or lifted (`backfillctl stop`, the workflow's stop job, a hand pause)
    UNLOCK = "unlock"  # `store unlock LEASE_ID`
    UNPAUSE = "unpause"
    VERIFY = "verify"  # a verification run: triggered (intent/outcome), then its result


class AuditPhase(StrEnum):
    INTENT = "intent"  # written and committed before a mutating call
    OUTCOME = "outcome"  # what the call did
    OBSERVATION = "observation"  # what was seen (phases, findings, adoptions, passes)


class Outcome(StrEnum):
    # what a create did
    CREATED = "created"
    RECOVERED = "recovered-after-ambiguous"  # no answer, but the backfill was found created after the intent
    ADOPTED_AFTER_409 = "adopted-after-409"  # a 409, and the backfill it conflicted with was our own create
    CONFLICT = "conflict"  # another backfill became active on the DAG: queued
    REJECTED = "rejected"  # Airflow refused it, or it gave up after ambiguous answers
    ABANDONED = "abandoned"  # an earlier create intent left no backfill
    # what a pause, unpause or cancel did
    DONE = "done"
    HALTED = "halted"  # the pause of a halt (too many failed runs): not `state: paused`, not a guard's pause
    ALREADY_COMPLETED = "already-completed"  # 409: Airflow had finished the backfill first
    FAILED = "failed"
    # what a verification or publish trigger did, and how a verification or rehearsal ended
    TRIGGERED = "triggered"
    ADOPTED_RUN = "adopted-run"  # the run with the derived id existed already (a retried trigger): not a second one
    PASSED = "passed"
    # observations
    ADOPTED = "adopted"
    PROMOTED = "promoted"
    STUCK = "stuck"  # a finding: runs queued for too long while none runs
    # the controller's own records
    APPLIED = "applied"  # a pass that changed something
    NO_CHANGES = "no-changes"  # a pass that found something but changed nothing
    IDLE = "idle"  # an idle reconciler's hourly liveness record
    REFUSED = "refused"  # a pass refused (a stale `--plan-checksum`)
    ALLOW_DIRTY = "allow-dirty"  # `--allow-dirty` applied spec files no commit holds
    HISTORY_RESET = "history-reset"  # an Airflow answered kept backfills differently (reset, restored): history dropped
    TAKEN_OVER = "taken-over"  # the lease of a reconciler that is gone
    RELEASED = "released"  # a lease released by hand
    ROTATED = "rotated"  # the audit chain's key changed (`audit rotate-key`); `adopted` keyed it
    # emergency stops
    STOPPED = "stopped"  # a stop recorded
    LIFTED = "lifted"  # a stop lifted: by an owner, its expiry, a reviewed resume, or an unpause in Airflow


_CALL: Mapping[str, Event | None] = {Outcome.DONE: None, Outcome.ALREADY_COMPLETED: None, Outcome.FAILED: None}
# the event of each phase a spec is observed to enter (a phase entered by a call is that call's event)
PHASE_EVENTS: Mapping[str, Event | None] = MappingProxyType(
    {
        Phase.PENDING: None,
        Phase.QUEUED: None,
        Phase.RUNNING: None,
        Phase.PAUSED: Event.PAUSED,
        Phase.AWAITING_PROMOTION: None,  # the canary's chunk finished; its create was the `created` event
        Phase.HALTED: Event.HALTED,  # a halt between two chunks (a halt mid-chunk is the pause's `halted`)
        Phase.SUCCEEDED: Event.SUCCEEDED,
        Phase.COMPLETED_WITH_FAILURES: Event.COMPLETED_WITH_FAILURES,
        Phase.CANCELLED: Event.CANCELLED,
        Phase.BLOCKED: Event.REFUSED,
        Phase.ORPHANED: Event.ORPHANED,
        Phase.AWAITING_REHEARSAL: None,  # waiting is not news; the rehearsal's own records are
        Phase.VERIFICATION_FAILED: Event.VERIFICATION_FAILED,
    }
)
# per action, every outcome its records can hold, and the event it is (None: not an event)
OUTCOMES: Mapping[Action, Mapping[str, Event | None]] = MappingProxyType(
    {
        Action.ADOPT: {Outcome.ADOPTED: None},
        Action.AUDIT_KEY: {Outcome.ADOPTED: None, Outcome.ROTATED: None},
        Action.CANCEL: _CALL,  # the `cancelled` event is the observed Cancelled phase: cancelling takes a while
        Action.CREATE: {
            Outcome.CREATED: Event.CREATED,
            Outcome.RECOVERED: Event.CREATED,
            Outcome.ADOPTED_AFTER_409: Event.CREATED,
            Outcome.CONFLICT: None,
            Outcome.REJECTED: None,  # the spec is Blocked: the observed phase says `refused`
            Outcome.ABANDONED: None,
        },
        Action.FINDING: {Outcome.STUCK: Event.STUCK, **dict.fromkeys(Alert, Event.INVALID)},  # other kinds: none
        Action.LEASE: {Outcome.TAKEN_OVER: None},
        Action.NOTE: {Outcome.DONE: None},  # a run note is no event: the runs are what it annotates
        Action.OBSERVE: PHASE_EVENTS,
        Action.PAUSE: {**_CALL, Outcome.DONE: Event.PAUSED, Outcome.HALTED: Event.HALTED},
        Action.PROMOTE: {Outcome.PROMOTED: Event.PROMOTED},
        Action.RECONCILE: {
            Outcome.APPLIED: None,
            Outcome.NO_CHANGES: None,
            Outcome.IDLE: None,
            Outcome.REFUSED: Event.REFUSED,
            Outcome.ALLOW_DIRTY: None,
            Outcome.HISTORY_RESET: None,
        },
        Action.STOP: {Outcome.STOPPED: None, Outcome.LIFTED: None},  # its pauses and the Paused phase send the events
        Action.UNLOCK: {Outcome.RELEASED: None},
        Action.UNPAUSE: _CALL,
        # a slice's create is `created` (no event: the rehearsal's result is); a failed slice or verification fails it
        Action.REHEARSE: {
            Outcome.CREATED: None,
            Outcome.PASSED: Event.REHEARSED,
            Outcome.FAILED: Event.VERIFICATION_FAILED,
        },
        Action.VERIFY: {
            Outcome.TRIGGERED: None,
            Outcome.ADOPTED_RUN: None,
            Outcome.PASSED: Event.VERIFIED,
            # one event per failure: a rehearsal's is its `rehearse` failure, a canary's the Halted phase, the
            # final one the VerificationFailed phase (which carries the outcome and the report)
            Outcome.FAILED: None,
        },
        Action.PUBLISH: {
            Outcome.TRIGGERED: Event.PUBLISHED,
            Outcome.ADOPTED_RUN: Event.PUBLISHED,
            Outcome.FAILED: None,
        },
    }
)
ACTIONS = tuple(Action)  # in `audit show --action`'s help, in this order


def event_of(action: str, phase: str, outcome: str | None) -> Event | None:
    """The notification event a record is, if any: intents, and words without a row, are none."""
    if phase == AuditPhase.INTENT or outcome is None or action not in ACTIONS:
        return None
    return OUTCOMES[Action(action)].get(outcome)
