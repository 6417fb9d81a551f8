"""Run notes (the policy's `airflow_notes`, opt-in): each run of a managed backfill on the chosen DAGs carries an
Airflow DAG-run note naming its spec and ticket, written once as the runs appear.

A pass lists at most one page of runs per spec whose notes are not complete and writes at most `NOTES_PER_PASS`
notes; a store mark per backfill says how far it got, so a finished spec costs nothing. Nothing here may stop
reconciling: a failure is logged once a pass and the mark stays where it was.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from controller.adapters.airflow import AirflowClient
from controller.adapters.store import Store
from controller.commands.reconcile.record import Recorder
from controller.core.audit.vocabulary import Action, AuditPhase, Outcome
from controller.core.model.binding import Binding
from controller.core.model.policy import Policy
from controller.core.model.spec import BackfillSpec, format_utc
from controller.core.plan.run_notes import NOTES_PER_PASS, NoteWork, advanced, notes_due
from controller.core.render.run_note import merged_note, our_note
from controller.errors import AirflowAuthError, AirflowError

log = logging.getLogger(__name__)

EDIT_PERMISSION = "DAG-run edit (`can_edit on DAG Runs`, or the DAG's `DAG Runs` edit) on"


@dataclass(frozen=True, slots=True)
class Noted:
    """What one spec's notes did this pass."""

    spec: str
    backfill_id: int
    written: int  # runs whose note this pass wrote
    kept: int  # of those, runs whose person's note was kept (ours appended below it)
    failed: str = ""  # why it stopped ("": it did not)


class NoteWriter:
    def __init__(self, client: AirflowClient, store: Store, budget: int = NOTES_PER_PASS) -> None:
        self.client, self.store, self.budget = client, store, budget

    def annotate(self, specs: Sequence[BackfillSpec], policy: Policy, recorder: Recorder) -> list[Noted]:
        """Note the next runs of every spec the policy's `airflow_notes` covers; the marks and one audit record a
        spec that got notes are saved."""
        notes, by_name = policy.airflow_notes, {s.name: s for s in specs}
        if notes is None:
            return []
        due = notes_due(specs, recorder.bindings, notes, self.budget)
        done = [self._note(work, our_note(by_name[work.spec], notes), recorder.bindings) for work in due]
        for noted in done:
            if noted.written:
                recorder.audit(
                    Action.NOTE,
                    AuditPhase.OUTCOME,
                    by_name[noted.spec],
                    outcome=Outcome.DONE,
                    notify=False,
                    backfill_id=noted.backfill_id,
                    response={"runs_noted": noted.written, "persons_notes_kept": noted.kept},
                    message=f"Airflow run notes written on {noted.written} runs"
                    + (f" ({noted.kept} below a person's note, kept)" if noted.kept else ""),
                )
            if noted.failed:
                log.warning("%s: run notes: %s", noted.spec, noted.failed)
        return done

    def _note(self, work: NoteWork, ours: str, bindings: dict[str, Binding]) -> Noted:
        written = kept = 0
        through: datetime | None = None  # the runs up to this date are done
        try:
            runs = self.client.noted_runs(work.dag_id, work.dates[0], work.dates[-1], len(work.dates))
            wanted = set(work.dates)
            for run in runs:
                text = merged_note(run.note, ours, work.spec) if run.logical_date in wanted else None
                if text is not None:  # not a run another backfill left between this one's dates
                    self.client.set_run_note(work.dag_id, run.run_id, text)
                    written, kept = written + 1, kept + bool((run.note or "").strip())
                through = run.logical_date
            if len(runs) < len(work.dates):  # the whole window was one page: no date in it has another run
                through = work.dates[-1]
            failed = ""
        except AirflowAuthError:
            failed = f"Airflow refused the login: run notes need {EDIT_PERMISSION} DAG {work.dag_id}"
        except AirflowError as exc:
            failed = f"{exc}; the next pass goes on" + (f" after {format_utc(through)}" if through else "")
        self._mark(work, through, bindings)
        return Noted(work.spec, work.backfill_id, written, kept, failed)

    def _mark(self, work: NoteWork, through: datetime | None, bindings: dict[str, Binding]) -> None:
        binding = bindings[work.spec]
        mark = advanced(work, through, binding.noted)
        if mark != binding.noted:
            bindings[work.spec] = replace(binding, noted=mark)
            self.store.save_binding(bindings[work.spec])
