"""Apply: the plan's changes, each audited (intent before, outcome after), with crash and ambiguity recovery.

If the intent cannot be written, the call is not made (fail closed). A create that may have landed
(timeout, 5xx, 503) is never blindly repeated: the DAG's backfills are listed first and a matching one
created after the intent is adopted.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from controller.adapters.airflow import AirflowClient
from controller.commands.reconcile.adoption import record_adoption
from controller.commands.reconcile.analysis import audit_of
from controller.commands.reconcile.record import Recorder
from controller.core.audit.vocabulary import Action, AuditPhase, Outcome
from controller.core.model.airflow import Backfill, BackfillRequest, RunSummary
from controller.core.model.binding import CreateFacts, Phase
from controller.core.model.chunks import Chunk, Progress
from controller.core.model.guards import Guard
from controller.core.model.ranges import ranges_json
from controller.core.model.spec import BackfillSpec, DesiredState, format_utc
from controller.core.model.stages import Promotion
from controller.core.plan.chunked import HALT
from controller.core.plan.matching import matches_request
from controller.core.plan.provenance import UNKNOWN_ORIGIN, approval_clause
from controller.core.plan.values import Item, Kind
from controller.core.plan.world import World
from controller.core.rules.chunks import chunk_text
from controller.core.rules.retrying import Backoff
from controller.errors import AirflowAmbiguous, AirflowConflict, AirflowError

log = logging.getLogger(__name__)
CREATE_BACKOFF = Backoff(attempts=3)  # creates whose answer was lost: observe, then try again after this delay
APPLIED = {Kind.PAUSE: DesiredState.PAUSED, Kind.UNPAUSE: DesiredState.ACTIVE, Kind.CANCEL: DesiredState.CANCELLED}
STEERS = {Kind.PAUSE: Action.PAUSE, Kind.UNPAUSE: Action.UNPAUSE, Kind.CANCEL: Action.CANCEL}


@dataclass(frozen=True, slots=True)
class Applied:
    item: Item
    outcome: Outcome
    error: str | None = None  # what went wrong, for the pass's error lines
    created: Backfill | None = None  # Airflow's answer to a create: the new backfill, as it was observed
    made: RunSummary | None = None  # the runs that create made: the dry run's dates, queued (None: not known)


class Applier:
    def __init__(self, client: AirflowClient, recorder: Recorder, sleep: Callable[[float], None] = time.sleep) -> None:
        self.client, self.recorder, self.sleep = client, recorder, sleep
        self.store = recorder.store

    def apply(self, item: Item, spec: BackfillSpec, world: World) -> Applied:
        if item.kind is Kind.ADOPT:
            return self._adopt(item, spec, spec.name in world.intents)
        if item.kind is Kind.CREATE:
            return self._create(item, spec, world)
        return self._steer(item, spec, audit_of(item.guard, spec, world.analysis))

    def _adopt(self, item: Item, spec: BackfillSpec, answer_lost: bool) -> Applied:
        record_adoption(self.recorder, item, spec, answer_lost=answer_lost)
        return Applied(item, Outcome.ADOPTED)

    def _steer(self, item: Item, spec: BackfillSpec, analysis: list[dict[str, object]]) -> Applied:
        """A pause, unpause or cancel; `analysis`: the verdicts behind an analysis guard's (audited with it)."""
        backfill_id = item.backfill_id
        if backfill_id is None:  # the planner only steers bound backfills
            return Applied(item, Outcome.FAILED, f"{spec.name}: no backfill to {item.kind.value}")
        call = {Kind.PAUSE: self.client.pause, Kind.UNPAUSE: self.client.unpause, Kind.CANCEL: self.client.cancel}
        request: dict[str, object] = self.client.steer_request(backfill_id, item.kind.value)
        request |= {"analysis": analysis} if analysis else {}
        approval = self.recorder.approvals.get(spec.name) if item.kind is Kind.UNPAUSE else None
        if approval is not None:  # the reviewed change behind the spec's file now (the change record names it)
            request["approval"] = approval.as_json()
        action = STEERS[item.kind]
        self.recorder.audit(
            action, AuditPhase.INTENT, spec, backfill_id=backfill_id, request=request, message=item.reason
        )
        try:
            self.store.check_lease()  # the intent was fenced; a lease lost since then stops the call too
            call[item.kind](backfill_id)
            # a halt is its own outcome (and event): never `state: paused`, nor a guard's pause
            halting = item.kind is Kind.PAUSE and item.guard == HALT
            outcome, status = (Outcome.HALTED if halting else Outcome.DONE), 200
        except AirflowConflict as exc:
            outcome, status = Outcome.ALREADY_COMPLETED, exc.status or 409
        except AirflowError as exc:
            response = {"status": exc.status, "detail": exc.detail}
            failed = Outcome.FAILED
            self.recorder.audit(
                action,
                AuditPhase.OUTCOME,
                spec,
                outcome=failed,
                backfill_id=backfill_id,
                response=response,
                message=exc.message,
            )
            return Applied(item, Outcome.FAILED, f"{spec.name}: {exc.message}")
        self.recorder.audit(
            action,
            AuditPhase.OUTCOME,
            spec,
            outcome=outcome,
            backfill_id=backfill_id,
            response={"status": status} | ({"analysis": analysis} if analysis else {}),
            message=item.reason if analysis else None,
        )
        phase, applied, guard = _steered(item, outcome)
        self.recorder.bind(
            spec, backfill_id, phase, item.reason, item.runs, applied_state=applied, guard=guard, progress=item.progress
        )
        return Applied(item, outcome)

    # --- create, with crash and ambiguity handling ---------------------------------------------------------

    def _create(self, item: Item, spec: BackfillSpec, world: World) -> Applied:
        if spec.name in world.intents:
            self.recorder.audit(
                Action.CREATE,
                AuditPhase.OBSERVATION,
                spec,
                outcome=Outcome.ABANDONED,
                message=f"an earlier create intent ({world.intents[spec.name].isoformat()}) left no backfill",
            )
        body = item.request or BackfillRequest.from_spec(spec)
        author = self.recorder.provenance.get(spec.path, UNKNOWN_ORIGIN).author or "unknown"
        if item.promoting:
            self.recorder.audit(
                Action.PROMOTE,
                AuditPhase.OBSERVATION,
                spec,
                outcome=Outcome.PROMOTED,
                message=_promoted_by(spec),
            )
        before = self.recorder.bindings.get(spec.name)
        approval = self.recorder.approvals.get(spec.name) or (before.approval if before is not None else None)
        request = self.client.create_request(body)
        intent = self.recorder.audit(
            Action.CREATE,
            AuditPhase.INTENT,
            spec,
            request={
                **request,
                "airflow": self.client.capabilities.version,  # the release the runs ran on (for the ticket)
                **({} if approval is None else {"approval": approval.as_json()}),
                **_dates_json(item),
            },
            message=_chunk_text(item, _previous_concurrency(self._progress(spec)))
            + f"requested by {spec.requested_by}, spec authored by {author}, "
            f"{approval_clause(approval, spec.approvers)}; ticket {spec.ticket}",
        )
        progress = item.progress
        if progress is not None and item.promoting:
            progress = replace(progress, promoted=True)
        self.recorder.bind(
            spec,
            before.backfill_id if before is not None and progress is not None else None,
            Phase.PENDING,
            "creating",
            created=_create_facts(item) if before is None or before.created is None else None,
            progress=progress,
            approval=approval,
        )
        for attempt in range(1, CREATE_BACKOFF.attempts + 1):
            self.store.check_lease()  # retries reuse the first intent: check the lease before each POST
            done = self._try_create(item, spec, body, intent.moment, attempt)
            if done is not None:
                return done
            if attempt < CREATE_BACKOFF.attempts:
                self.sleep(CREATE_BACKOFF.delay(attempt, random.random()))  # noqa: S311 - jitter, not a secret
        message = "gave up after ambiguous answers; no backfill was seen (one created late is adopted on a later pass)"
        return self._create_failed(item, spec, message, maybe_landed=True)

    def _try_create(
        self, item: Item, spec: BackfillSpec, body: BackfillRequest, since: datetime, attempt: int
    ) -> Applied | None:
        try:
            created = self.client.create(body)
        except AirflowConflict:
            recovered = self._recover(item, spec, since, Outcome.ADOPTED_AFTER_409)
            return recovered or self._queued_after_conflict(item, spec, maybe_landed=attempt > 1)
        except AirflowAmbiguous as exc:
            recovered = self._recover(item, spec, since, Outcome.RECOVERED)
            if recovered is None:
                log.warning(
                    "attempt #%d/%d failed; will retry after checking nothing was created: %s",
                    attempt,
                    CREATE_BACKOFF.attempts,
                    exc.message,
                )
            return recovered
        except AirflowError as exc:  # a refusal; an earlier ambiguous attempt may still have landed
            return self._create_failed(item, spec, exc.message, exc.status, exc.detail, maybe_landed=attempt > 1)
        response = {"status": 200, "backfill_id": created.id}
        chunk = None if item.chunk is None else f"{chunk_text(item.chunk)} created"
        with self.store.batch("recording a create"):  # its outcome and its binding: both or neither
            self.recorder.audit(
                Action.CREATE,
                AuditPhase.OUTCOME,
                spec,
                outcome=Outcome.CREATED,
                backfill_id=created.id,
                response=response,
                message=chunk,
            )
            self.recorder.bind(
                spec, created.id, Phase.RUNNING, "created", progress=_with_chunk(self._progress(spec), created.id)
            )
        return Applied(item, Outcome.CREATED, created=created, made=made_runs(item))

    def _recover(self, item: Item, spec: BackfillSpec, since: datetime, outcome: Outcome) -> Applied | None:
        body = item.request or BackfillRequest.from_spec(spec)
        found = [
            b for b in self.client.list_backfills(spec.dag_id) if matches_request(body, b) and b.created_at >= since
        ]
        if not found:
            return None
        backfill = max(found, key=lambda b: b.id)
        with self.store.batch("recording a recovered create"):  # its outcome and its binding: both or neither
            self.recorder.audit(
                Action.CREATE,
                AuditPhase.OUTCOME,
                spec,
                outcome=outcome,
                backfill_id=backfill.id,
                message=f"found backfill #{backfill.id} created at {backfill.created_at.isoformat()}; adopted",
            )
            # never terminal here: the outcome comes from the backfill's runs, observed right after this pass's
            # changes
            self.recorder.bind(
                spec, backfill.id, Phase.RUNNING, outcome, progress=_with_chunk(self._progress(spec), backfill.id)
            )
        return Applied(item, outcome)

    def _queued_after_conflict(self, item: Item, spec: BackfillSpec, *, maybe_landed: bool) -> Applied:
        self.recorder.audit(
            Action.CREATE,
            AuditPhase.OUTCOME,
            spec,
            outcome=Outcome.CONFLICT,
            response={"status": 409},
            message="another backfill became active on this DAG; queued",
        )
        self.recorder.bind(
            spec,
            _last_backfill(self._progress(spec)),
            Phase.QUEUED,
            "another backfill is active on this DAG",
            progress=self._progress(spec) if maybe_landed else _unasked(self._progress(spec)),
        )
        return Applied(item, Outcome.CONFLICT)

    def _create_failed(
        self,
        item: Item,
        spec: BackfillSpec,
        message: str,
        status: int | None = None,
        detail: str = "",
        *,
        maybe_landed: bool = False,
    ) -> Applied:
        self.recorder.audit(
            Action.CREATE,
            AuditPhase.OUTCOME,
            spec,
            outcome=Outcome.REJECTED,
            response={"status": status, "detail": detail},
            message=message,
        )
        # a create that may have landed keeps its pending chunk, so a late backfill is adopted, never run again
        progress = self._progress(spec) if maybe_landed else _unasked(self._progress(spec))
        self.recorder.bind(spec, _last_backfill(self._progress(spec)), Phase.BLOCKED, message, progress=progress)
        return Applied(item, Outcome.REJECTED, f"{spec.path}: {spec.name}: {message}")

    # --- a chunked spec's bookkeeping ------------------------------------------------------------------------

    def _progress(self, spec: BackfillSpec) -> Progress | None:
        binding = self.recorder.bindings.get(spec.name)
        return None if binding is None else binding.progress


def _steered(item: Item, outcome: Outcome) -> tuple[Phase, DesiredState | None, Guard | None]:
    """What a pause, unpause or cancel leaves bound: its phase, the state it applied, the guard that paused it."""
    # a cancelled backfill becomes terminal once observed (its runs counted), not when asked
    phase = Phase.RUNNING if item.kind is Kind.CANCEL else item.phase
    # a 409 means Airflow finished it first: nothing was paused or cancelled, so nothing is recorded as such
    applied = APPLIED[item.kind] if outcome is Outcome.DONE else None
    guard = item.guard if item.kind is Kind.PAUSE else None  # a guard's pause is not `state: paused`
    return phase, None if guard is not None else applied, guard


def _with_chunk(progress: Progress | None, backfill_id: int) -> Progress | None:
    """The progress with its pending chunk created as `backfill_id` (None for a spec without chunks)."""
    if progress is None or progress.pending is None:
        return progress
    return progress.with_chunk(progress.pending.chunk(backfill_id))


def _unasked(progress: Progress | None) -> Progress | None:
    """The progress without its pending chunk: the create was refused, nothing exists to adopt."""
    return None if progress is None else replace(progress, pending=None)


def _last_chunk(progress: Progress | None) -> Chunk | None:
    return progress.chunks[-1] if progress is not None and progress.chunks else None


def _last_backfill(progress: Progress | None) -> int | None:
    """The backfill a chunked spec keeps when its next chunk's create fails (its last chunk's)."""
    chunk = _last_chunk(progress)
    return None if chunk is None else chunk.backfill_id


def _previous_concurrency(progress: Progress | None) -> int | None:
    chunk = _last_chunk(progress)
    return None if chunk is None else chunk.max_active_runs


def _chunk_text(item: Item, previous: int | None) -> str:
    """`chunk 3 of 7: 2025-01-05T00:00:00Z → 2025-01-06T23:00:00Z (48 runs), max_active_runs 2 → 4; `"""
    if item.chunk is None or item.request is None:
        return ""
    request = item.request
    runs = item.progress.pending.runs if item.progress is not None and item.progress.pending is not None else None
    concurrency = f"max_active_runs {request.max_active_runs}"
    if previous is not None and previous != request.max_active_runs:
        concurrency = f"max_active_runs {previous} → {request.max_active_runs} from this chunk"
    return (
        f"{chunk_text(item.chunk)}: {format_utc(request.from_date)} → {format_utc(request.to_date)} ({runs:,} runs), "
        f"{concurrency}; "
    )


def made_runs(item: Item) -> RunSummary | None:
    """The runs a create Airflow answered made: the dates its dry run listed, each queued (Airflow creates a
    backfill's runs, queued, in the create's own transaction), so the pass need not read them again."""
    count = sum(r.count for r in item.dates) if item.dates is not None else item.runs_to_create
    return None if count is None else RunSummary({"queued": count} if count else {})


def _create_facts(item: Item) -> CreateFacts:
    first, last = item.partitions or (None, None)
    return CreateFacts(
        item.runs_to_create, item.runs_in_range, item.first_date, item.last_date, first, last, dates=item.dates
    )


def _dates_json(item: Item) -> dict[str, Any]:
    """The dates the dry run listed, as ranges (first, last, count), beside the body in the create intent."""
    return {} if item.dates is None else {"dates": ranges_json(item.dates)}


def _promoted_by(spec: BackfillSpec) -> str:
    on_verification = spec.execution is not None and spec.execution.promotion is Promotion.ON_VERIFICATION
    return "the canary's verification passed" if on_verification else "`promote: true` after the canary"
