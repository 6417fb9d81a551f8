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
from datetime import datetime, timedelta
from typing import Any

from controller.adapters.airflow import AirflowClient
from controller.adapters.store import Store
from controller.commands.record import Recorder
from controller.core.audit.vocabulary import Action, AuditPhase, Outcome
from controller.core.model.airflow import BackfillRequest, TriggeredRun
from controller.core.model.binding import Binding
from controller.core.model.policy import Policy
from controller.core.model.spec import BackfillSpec, format_utc, thaw, thaw_conf
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
ClientFor = Callable[[str], AirflowClient]  # environment name → its client (opened once, on first use)


class StageRunner:
    def __init__(self, store: Store, clients: ClientFor, clock: Callable[[], datetime]) -> None:
        self.store, self.clients, self.clock = store, clients, clock
        self.keys: dict[str, str] = {}  # spec → its current rehearsal key (this pass)

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
                    versions[(where, spec.dag_id)] = self.clients(where).dag(spec.dag_id, with_tasks=False).dag_version
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
            self._settle(spec, record, recorder, self._result(spec.verify, record, where))
            return
        if record.state is not StageState.REHEARSING:
            return
        client = self.clients(where)
        slices = rehearsal.slices
        if record.backfill_ids:
            cut = slices[len(record.backfill_ids) - 1]
            done = _slice_done(client, spec, cut, record.backfill_ids[-1])
            if done is None:
                return
            if done.get("failed"):
                why = f"slice {_dates(cut)}: {done['failed']} of {sum(done.values())} run(s) failed"
                self._settle(spec, record, recorder, (StageState.FAILED, why, None))
                return
        if len(record.backfill_ids) < len(slices):
            self._next_slice(spec, where, record, slices[len(record.backfill_ids)], recorder)
            return
        # every slice done: their runs, counted once (a pass that repeats this after a crash counts the same)
        record = replace(record, runs=_total(client, spec, slices))
        if spec.verify is not None:
            self.store.save_stage(self._trigger(spec, spec.verify, record, where, recorder))
        else:
            self._settle(spec, record, recorder, (StageState.PASSED, _runs_text(record.runs), None))

    def _next_slice(self, spec: BackfillSpec, where: str, record: StageRecord, cut: Slice, recorder: Recorder) -> None:
        client = self.clients(where)
        request = BackfillRequest.from_spec(replace(spec, from_date=cut.from_date, to_date=cut.to_date))
        if not client.planned_runs(request):
            why = (
                f"slice {_dates(cut)}: the dry run lists no runs in {where}; a rehearsal where that history is "
                f"missing proves nothing: load it into {where}, or pick slices it has"
            )
            self._settle(spec, record, recorder, (StageState.FAILED, why, None))
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
            self.store.save_stage(self._trigger(spec, verify, record, PRODUCTION, recorder))
            return
        if record.state is StageState.VERIFYING:
            self._settle(spec, record, recorder, self._result(verify, record, PRODUCTION))

    def _publish(self, spec: BackfillSpec, publish: Publish, final: StageRecord, recorder: Recorder) -> None:
        rid = run_id(spec.name, PRODUCTION, Stage.PUBLISH, final.key)
        record = StageRecord(spec.name, PRODUCTION, Stage.PUBLISH, final.key, StageState.VERIFYING, self.clock())
        conf = {
            **(thaw(publish.conf) if publish.conf else {}),
            "backfillctl": _context(spec, PRODUCTION, Stage.PUBLISH, final.backfill_ids),
        }
        recorder.audit(Action.PUBLISH, AuditPhase.INTENT, spec, request={"dag_id": publish.dag_id, "run_id": rid})
        try:
            run, created = self.clients(PRODUCTION).trigger_run(publish.dag_id, rid, conf)
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

    # --- a verification run ---------------------------------------------------------------------------------

    def _trigger(
        self, spec: BackfillSpec, verify: Verify, record: StageRecord, where: str, recorder: Recorder
    ) -> StageRecord:
        """Trigger the verification run (exactly once: its id is derived); a trigger Airflow refuses fails it."""
        rid = run_id(spec.name, where, record.stage, record.key)
        ids = record.backfill_ids
        conf = {**(thaw(verify.conf) if verify.conf else {}), "backfillctl": _context(spec, where, record.stage, ids)}
        recorder.audit(
            Action.VERIFY,
            AuditPhase.INTENT,
            spec,
            request={"dag_id": verify.dag_id, "run_id": rid, "environment": where},
        )
        try:
            run, created = self.clients(where).trigger_run(verify.dag_id, rid, conf)
        except AirflowError as exc:
            if exc.status is None or exc.status >= 500:  # no answer to trust: the same id is tried again
                raise
            why = f"the verification run could not be triggered in {where}: {exc.message}"
            recorder.audit(Action.VERIFY, AuditPhase.OUTCOME, spec, outcome=Outcome.FAILED, message=why)
            return self._failed(spec, record, recorder, why)
        outcome = Outcome.TRIGGERED if created else Outcome.ADOPTED_RUN
        recorder.audit(
            Action.VERIFY,
            AuditPhase.OUTCOME,
            spec,
            outcome=outcome,
            message=f"{verify.dag_id} run {run.run_id} in {where}",
        )
        return replace(record, state=StageState.VERIFYING, run_id=run.run_id, triggered_at=self.clock())

    def _result(
        self, verify: Verify, record: StageRecord, where: str
    ) -> tuple[StageState, str, Mapping[str, Any] | None] | None:
        """The verification's result (None: not yet). Never a pass by default: a run not found, not started in
        time, timed out, failed, or a result task without `passed: true` fails."""
        rid = record.run_id or run_id(record.spec, where, record.stage, record.key)  # the id is derived
        client = self.clients(where)
        run = client.get_run(verify.dag_id, rid)
        now, limit = self.clock(), timedelta(minutes=verify.timeout_minutes)
        if run is None:
            return StageState.FAILED, f"verification run {rid} is not in {where} any more", None
        if run.state in ("queued", "running"):
            since = run.start_date or run.queued_at or record.triggered_at or record.started_at
            if now - since <= limit:
                return None
            late = "did not start" if run.start_date is None else "did not finish"
            hint = " (is the DAG paused, or its pool full?)" if run.start_date is None else ""
            return (
                StageState.FAILED,
                f"verification run {run.run_id} {late} within {verify.timeout_minutes} min{hint}",
                None,
            )
        if run.state != "success":
            return StageState.FAILED, f"verification run {run.run_id} {run.state}", None
        if verify.result_task is None:
            return StageState.PASSED, f"run {run.run_id} succeeded", None
        return _reported(client.task_result(verify.dag_id, run.run_id, verify.result_task), run, verify.result_task)

    def _settle(
        self,
        spec: BackfillSpec,
        record: StageRecord,
        recorder: Recorder,
        result: tuple[StageState, str, Mapping[str, Any] | None] | None,
    ) -> None:
        if result is None:
            return
        state, reason, metrics = result
        if record.stage is not Stage.REHEARSAL or record.run_id is not None:  # a verification ran: its own record
            recorder.audit(
                Action.VERIFY,
                AuditPhase.OBSERVATION,
                spec,
                outcome=Outcome.PASSED if state is StageState.PASSED else Outcome.FAILED,
                message=f"{record.stage.value}: {reason}",
                response=None if metrics is None else {"metrics": dict(metrics)},
            )
        if record.stage is Stage.REHEARSAL:
            self._rehearsal_ended(spec, record, recorder, state, reason)
        self.store.save_stage(replace(record, state=state, reason=reason, metrics=metrics))

    def _failed(self, spec: BackfillSpec, record: StageRecord, recorder: Recorder, why: str) -> StageRecord:
        if record.stage is Stage.REHEARSAL:
            self._rehearsal_ended(spec, record, recorder, StageState.FAILED, why)
        return replace(record, state=StageState.FAILED, reason=why)

    @staticmethod
    def _rehearsal_ended(
        spec: BackfillSpec, record: StageRecord, recorder: Recorder, state: StageState, reason: str
    ) -> None:
        outcome = Outcome.PASSED if state is StageState.PASSED else Outcome.FAILED
        recorder.audit(
            Action.REHEARSE,
            AuditPhase.OBSERVATION,
            spec,
            outcome=outcome,
            message=f"rehearsal in {record.environment}: {reason}",
        )


def _reported(value: Any, run: TriggeredRun, task: str) -> tuple[StageState, str, Mapping[str, Any] | None]:
    """A result task's XCom `{passed, metrics}` decides; anything else is a failure that says what came."""
    if not isinstance(value, Mapping) or not isinstance(value.get("passed"), bool):
        return StageState.FAILED, f"run {run.run_id}: its task {task} pushed no {{passed: true|false, metrics}}", None
    metrics = value.get("metrics")
    metrics = dict(metrics) if isinstance(metrics, Mapping) else None
    if value["passed"]:
        return StageState.PASSED, f"run {run.run_id} passed", metrics
    return StageState.FAILED, f"run {run.run_id}: {task} reported passed: false", metrics


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


def _context(spec: BackfillSpec, where: str, stage: Stage, ids: tuple[int, ...]) -> dict[str, Any]:
    """What a verification or publish run is told under `conf["backfillctl"]`."""
    slices = spec.rehearsal.slices if spec.rehearsal is not None and stage is Stage.REHEARSAL else ()
    return {
        "spec": spec.name,
        "environment": where,
        "stage": stage.value,
        "from_date": format_utc(slices[0].from_date if slices else spec.from_date),
        "to_date": format_utc(slices[-1].to_date if slices else spec.to_date),
        "slices": [[format_utc(s.from_date), format_utc(s.to_date)] for s in slices],
        "backfill_ids": list(ids),
        "ticket": spec.ticket,
        "dag_run_conf": thaw_conf(spec),
    }
