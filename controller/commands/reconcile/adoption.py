"""Adoption: a backfill the spec's create made, bound to it after a lost answer, a lost save or a lost store, with
what a pass that saw it would have recorded: its outcome record, its terminal notification, the create's outcome."""

from __future__ import annotations

from controller.commands.reconcile.record import Recorder
from controller.core.audit.vocabulary import Action, AuditPhase, Outcome
from controller.core.model.airflow import RunSummary
from controller.core.model.binding import Binding, CreateFacts
from controller.core.model.spec import BackfillSpec, format_utc
from controller.core.plan.outcome import outcome_reason
from controller.core.plan.values import Item


def record_adoption(recorder: Recorder, item: Item, spec: BackfillSpec, *, answer_lost: bool) -> None:
    """Bind what the spec's create made (a lost answer, a lost save, a lost store) with its outcome, in one
    transaction: a finished one gets the outcome record a pass that saw it finish writes, and its terminal
    notification when this store knew the spec (a lost store's history is recorded, not announced again: the
    store that was lost sent it). A create whose answer was lost (`answer_lost`: its intent has no outcome) gets
    the outcome it would have had: recovered, the `created` event."""
    before = recorder.bindings.get(spec.name)
    with recorder.store.batch("recording an adoption"):
        if answer_lost and item.progress is None:
            recorder.audit(
                Action.CREATE,
                AuditPhase.OUTCOME,
                spec,
                outcome=Outcome.RECOVERED,
                backfill_id=item.backfill_id,
                message=f"the create's answer was lost (the process stopped after its intent); backfill "
                f"#{item.backfill_id} is what it created",
            )
        for backfill_id, message in _adoptions(item, before):
            recorder.audit(
                Action.ADOPT,
                AuditPhase.OBSERVATION,
                spec,
                outcome=Outcome.ADOPTED,
                backfill_id=backfill_id,
                message=message,
            )
        reason = item.reason
        if item.phase.terminal:  # its outcome, as the pass that saw it finish records it
            reason = outcome_reason(item.phase, item.runs or RunSummary({}))
            recorder.audit(
                Action.OBSERVE,
                AuditPhase.OBSERVATION,
                spec,
                outcome=item.phase,
                notify=before is not None,
                backfill_id=item.backfill_id,
                message=reason,
            )
        # the dates its runs' queue times show it made or re-ran: what its outcome counts from now on
        created = None if item.dates is None else CreateFacts(dates=item.dates, whole=item.whole)
        recorder.bind(spec, item.backfill_id, item.phase, reason, item.runs, created=created, progress=item.progress)


def _adoptions(item: Item, before: Binding | None) -> list[tuple[int | None, str]]:
    """One audited adoption per backfill: a chunked spec's chunks found after a lost store each get theirs."""
    owned = before.backfills if before is not None else ()
    chunks = [c for c in (item.progress.chunks if item.progress else ()) if c.backfill_id not in owned]
    if len(chunks) <= 1:
        return [(item.backfill_id, item.reason)]
    return [
        (c.backfill_id, f"chunk {k}: {format_utc(c.first)} → {format_utc(c.last)}; {item.reason}")
        for k, c in enumerate(chunks, 1)
    ]
