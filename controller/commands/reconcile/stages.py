"""The stages around a spec's backfills, in Airflow: rehearsals in another environment, verification runs, publish.

One reconciler drives every environment (one store, one lease, one audit chain): `StageRunner.records` reads what
the planner needs (each rehearsing spec's record under its current rehearsal key: one DAG read in the rehearsing
environment per DAG), and `advance` takes the steps `core.plan.stages.due` lists — a rehearsal's next slice, a
verification's trigger or result, the publish run — each audited. A verification or publish run has a derived
`dag_run_id`: a trigger retried after a lost answer or a crash finds its run (409) instead of starting a second.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from controller.adapters.airflow import AirflowClient
from controller.adapters.store import Store
from controller.commands.reconcile.record import Recorder
from controller.commands.reconcile.stage_runs import ClientFor, StageRuns, run_context
from controller.core.audit.vocabulary import Action, AuditPhase, Outcome
from controller.core.model.airflow import BackfillRequest
from controller.core.model.binding import Binding
from controller.core.model.policy import Policy
from controller.core.model.spec import BackfillSpec, thaw
from controller.core.model.stages import (
    PRODUCTION,
    Publish,
    Rehearsal,
    Slice,
    Stage,
    StageRecord,
    StageState,
    Verify,
    run_id,
)
from controller.core.plan.stages import StageStep, rehearses
from controller.errors import AirflowError, ConfigError, LockHeld, Stopped

log = logging.getLogger(__name__)


class StageRunner:
    def __init__(self, store: Store, clients: ClientFor, clock: Callable[[], datetime]) -> None:
        self.store, self.clients, self.clock = store, clients, clock
        self.keys: dict[str, str] = {}  # spec → its current rehearsal key (this pass)
        self.runs = StageRuns(store, clients, clock)  # verification runs, and settling a stage's record

    # --- what the planner sees ------------------------------------------------------------------------

    def records(
        self, specs: Sequence[BackfillSpec], policy: Policy, bindings: Mapping[str, Binding]
    ) -> dict[tuple[str, Stage], StageRecord]:
        """Per (spec, stage) the record that counts: a rehearsal's under the current key (only for specs not
        created in production yet), the latest canary and final verification and publish run."""
        rows = self.store.stages()
        found: dict[tuple[str, Stage], StageRecord] = {}
        latest: dict[str, StageRecord] = {}  # each spec's latest rehearsal (what a created spec's status shows)
        for row in rows:  # oldest first: the latest wins
            if row.stage is not Stage.REHEARSAL:
                found[(row.spec, row.stage)] = row
            else:
                latest[row.spec] = row
        by_key = {(r.spec, r.environment, r.key): r for r in rows if r.stage is Stage.REHEARSAL}
        self.keys = {}
        versions: dict[tuple[str, str], str | None] = {}
        for spec in specs:
            where = rehearses(spec, policy)
            binding = bindings.get(spec.name)
            if where is None:
                continue
            if binding is not None and (binding.backfill_id or binding.progress):  # created: its rehearsal is done
                if spec.name in latest:
                    found[(spec.name, Stage.REHEARSAL)] = latest[spec.name]
                continue
            try:
                if (where, spec.dag_id) not in versions:  # one DAG read a pass per DAG and environment
                    client = self.clients(where, spec.dag_id)  # opened once: proven not production's Airflow
                    versions[(where, spec.dag_id)] = client.dag(spec.dag_id, with_tasks=False).dag_version
            except (AirflowError, ConfigError) as exc:  # production waits, and says why each pass
                log.warning("rehearsal of %s: DAG %s in %s not read: %s", spec.name, spec.dag_id, where, exc.message)
                continue
            key = spec.rehearsal_key(versions[(where, spec.dag_id)])
            self.keys[spec.name] = key
            record = by_key.get((spec.name, where, key))
            if record is not None:
                found[(spec.name, Stage.REHEARSAL)] = record
        return found

    # --- the steps ----------------------------------------------------------------------------------------

    def advance(
        self,
        steps: Sequence[StageStep],
        specs: Sequence[BackfillSpec],
        records: Mapping[tuple[str, Stage], StageRecord],
        recorder: Recorder,
        finals: Mapping[str, tuple[int, ...]],
    ) -> None:
        """Take each step; an error is logged and the step is taken again next pass (nothing is lost)."""
        by_name = {s.name: s for s in specs}
        for step in steps:
            spec = by_name[step.spec]
            current = records.get((spec.name, step.stage))
            try:
                if step.stage is Stage.REHEARSAL and spec.rehearsal is not None and spec.name in self.keys:
                    self._rehearse(spec, spec.rehearsal, step.environment, current, recorder)
                elif step.stage in (Stage.FINAL, Stage.CANARY) and spec.verify is not None:
                    self._verification(spec, spec.verify, step.stage, current, recorder, ids=finals.get(spec.name, ()))
                elif step.stage is Stage.PUBLISH and spec.publish is not None:
                    self._publish(spec, spec.publish, records[(spec.name, Stage.FINAL)], recorder)
            except LockHeld:  # a lost lease: no further change (the pass ends with it)
                raise
            except (AirflowError, ConfigError, Stopped) as exc:
                log.warning("%s of %s: %s; tried again next pass", step.stage.value, spec.name, exc.message)

    def _rehearse(
        self, spec: BackfillSpec, rehearsal: Rehearsal, where: str, record: StageRecord | None, recorder: Recorder
    ) -> None:
        if record is None:
            record = StageRecord(
                spec.name, where, Stage.REHEARSAL, self.keys[spec.name], StageState.REHEARSING, self.clock()
            )
            self.store.save_stage(record)
        if record.state is StageState.VERIFYING and spec.verify is not None:
            self.runs.settle(spec, record, recorder, self.runs.result(spec.verify, record, where))
            return
        if record.state is not StageState.REHEARSING:
            return
        client = self.clients(where, spec.dag_id)
        slices = rehearsal.slices
        if record.backfill_ids:
            cut = slices[len(record.backfill_ids) - 1]
            done = _slice_done(client, spec, cut, record.backfill_ids[-1])
            if done is None:
                return
            if done.get("failed"):
                why = f"slice {_dates(cut)}: {done['failed']} of {sum(done.values())} run(s) failed"
                self.runs.settle(spec, record, recorder, (StageState.FAILED, why, None))
                return
        if len(record.backfill_ids) < len(slices):
            self._next_slice(spec, where, record, slices[len(record.backfill_ids)], recorder)
            return
        # every slice done: their runs, counted once (a pass that repeats this after a crash counts the same)
        record = replace(record, runs=_total(client, spec, slices))
        if spec.verify is not None:
            self.store.save_stage(self.runs.trigger(spec, spec.verify, record, where, recorder))
        else:
            self.runs.settle(spec, record, recorder, (StageState.PASSED, _runs_text(record.runs), None))

    def _next_slice(self, spec: BackfillSpec, where: str, record: StageRecord, cut: Slice, recorder: Recorder) -> None:
        client = self.clients(where, spec.dag_id)
        request = BackfillRequest.from_spec(replace(spec, from_date=cut.from_date, to_date=cut.to_date))
        if not client.planned_runs(request):
            why = (
                f"slice {_dates(cut)}: the dry run lists no runs in {where}; a rehearsal where that history is "
                f"missing proves nothing: load it into {where}, or pick slices it has"
            )
            self.runs.settle(spec, record, recorder, (StageState.FAILED, why, None))
            return
        mine = set(record.backfill_ids)
        found = [
            b
            for b in client.list_backfills(spec.dag_id)  # a create whose answer was lost is found, not repeated
            if (b.from_date, b.to_date) == (cut.from_date, cut.to_date)
            and b.created_at >= record.started_at
            and b.id not in mine
        ]
        if found:
            backfill = found[0]
        else:
            body = {"environment": where, "body": client.backfill_body(request)}
            recorder.audit(Action.REHEARSE, AuditPhase.INTENT, spec, request=body)
            backfill = client.create(request)
            recorder.audit(
                Action.REHEARSE,
                AuditPhase.OUTCOME,
                spec,
                outcome=Outcome.CREATED,
                backfill_id=backfill.id,
                message=f"rehearsal slice {_dates(cut)} in {where}: backfill #{backfill.id}",
            )
        self.store.save_stage(replace(record, backfill_ids=(*record.backfill_ids, backfill.id)))

    def _verification(
        self,
        spec: BackfillSpec,
        verify: Verify,
        stage: Stage,
        record: StageRecord | None,
        recorder: Recorder,
        *,
        ids: tuple[int, ...],
    ) -> None:
        key = ("canary-" if stage is Stage.CANARY else "b") + "-".join(
            str(i) for i in ids[: 1 if stage is Stage.CANARY else None]
        )
        if record is None or record.key != key:
            record = StageRecord(
                spec.name, PRODUCTION, stage, key, StageState.VERIFYING, self.clock(), backfill_ids=ids
            )
            self.store.save_stage(self.runs.trigger(spec, verify, record, PRODUCTION, recorder))
            return
        if record.state is StageState.VERIFYING:
            self.runs.settle(spec, record, recorder, self.runs.result(verify, record, PRODUCTION))

    def _publish(self, spec: BackfillSpec, publish: Publish, final: StageRecord, recorder: Recorder) -> None:
        rid = run_id(spec.name, PRODUCTION, Stage.PUBLISH, final.key)
        record = StageRecord(spec.name, PRODUCTION, Stage.PUBLISH, final.key, StageState.VERIFYING, self.clock())
        conf = {
            **(thaw(publish.conf) if publish.conf else {}),
            "backfillctl": run_context(spec, PRODUCTION, Stage.PUBLISH, final.backfill_ids),
        }
        recorder.audit(Action.PUBLISH, AuditPhase.INTENT, spec, request={"dag_id": publish.dag_id, "run_id": rid})
        try:
            run, created = self.clients(PRODUCTION, publish.dag_id).trigger_run(publish.dag_id, rid, conf)
        except AirflowError as exc:
            if exc.status is None or exc.status >= 500:  # no answer to trust: the same id is tried again
                raise
            why = f"the publish run could not be triggered: {exc.message}"  # settled: a person must look
            recorder.audit(Action.PUBLISH, AuditPhase.OUTCOME, spec, outcome=Outcome.FAILED, message=why)
            self.store.save_stage(replace(record, state=StageState.FAILED, reason=why))
            return
        outcome = Outcome.TRIGGERED if created else Outcome.ADOPTED_RUN
        recorder.audit(Action.PUBLISH, AuditPhase.OUTCOME, spec, outcome=outcome, message=f"publish run {run.run_id}")
        self.store.save_stage(replace(record, state=StageState.PASSED, run_id=run.run_id, triggered_at=self.clock()))


def _slice_done(client: AirflowClient, spec: BackfillSpec, cut: Slice, backfill_id: int) -> dict[str, int] | None:
    """A finished slice's runs by state (None: still running)."""
    backfill = client.get_backfill(backfill_id)
    if backfill.active:
        return None
    runs = client.run_summary(spec.dag_id, cut.from_date, cut.to_date)
    return None if runs.unfinished else dict(runs.counts)


def _total(client: AirflowClient, spec: BackfillSpec, slices: Sequence[Slice]) -> dict[str, int]:
    """The runs of every slice by state (one read per slice, once per rehearsal)."""
    out: dict[str, int] = {}
    for cut in slices:
        for state, n in client.run_summary(spec.dag_id, cut.from_date, cut.to_date).counts.items():
            out[state] = out.get(state, 0) + n
    return out


def _runs_text(runs: Mapping[str, int] | None) -> str:
    return f"{(runs or {}).get('success', 0)} run(s) succeeded"


def _dates(cut: Slice) -> str:
    return f"{cut.from_date.date().isoformat()}..{cut.to_date.date().isoformat()}"
