"""A stage's runs in Airflow: a verification run triggered exactly once (its `dag_run_id` is derived, so a trigger
retried after a lost answer or a crash finds its run), its result read, and the stage record settled and audited.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

from controller.adapters.airflow import AirflowClient
from controller.adapters.store import Store
from controller.commands.reconcile.record import Recorder
from controller.core.audit.vocabulary import Action, AuditPhase, Outcome
from controller.core.model.airflow import TriggeredRun
from controller.core.model.spec import BackfillSpec, format_utc, thaw, thaw_conf
from controller.core.model.stages import Stage, StageRecord, StageState, Verify, run_id
from controller.errors import AirflowError

# (environment, a DAG both Airflows have) → the environment's client (opened once, on first use: the DAG's
# version ids show it is not production's Airflow)
ClientFor = Callable[[str, str], AirflowClient]


class StageRuns:
    def __init__(self, store: Store, clients: ClientFor, clock: Callable[[], datetime]) -> None:
        self.store, self.clients, self.clock = store, clients, clock

    def trigger(
        self, spec: BackfillSpec, verify: Verify, record: StageRecord, where: str, recorder: Recorder
    ) -> StageRecord:
        """Trigger the verification run (exactly once: its id is derived); a trigger Airflow refuses fails it."""
        rid = run_id(spec.name, where, record.stage, record.key)
        ids = record.backfill_ids
        conf = {
            **(thaw(verify.conf) if verify.conf else {}),
            "backfillctl": run_context(spec, where, record.stage, ids),
        }
        recorder.audit(
            Action.VERIFY,
            AuditPhase.INTENT,
            spec,
            request={"dag_id": verify.dag_id, "run_id": rid, "environment": where},
        )
        try:
            run, created = self.clients(where, spec.dag_id).trigger_run(verify.dag_id, rid, conf)
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

    def result(
        self, verify: Verify, record: StageRecord, where: str
    ) -> tuple[StageState, str, Mapping[str, Any] | None] | None:
        """The verification's result (None: not yet). Never a pass by default: a run not found, not started in
        time, timed out, failed, or a result task without `passed: true` fails."""
        rid = record.run_id or run_id(record.spec, where, record.stage, record.key)  # the id is derived
        client = self.clients(where, verify.dag_id)
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
        return reported(client.task_result(verify.dag_id, run.run_id, verify.result_task), run, verify.result_task)

    def settle(
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


def reported(value: Any, run: TriggeredRun, task: str) -> tuple[StageState, str, Mapping[str, Any] | None]:
    """A result task's XCom `{passed, metrics}` decides; anything else is a failure that says what came."""
    if not isinstance(value, Mapping) or not isinstance(value.get("passed"), bool):
        return StageState.FAILED, f"run {run.run_id}: its task {task} pushed no {{passed: true|false, metrics}}", None
    metrics = value.get("metrics")
    metrics = dict(metrics) if isinstance(metrics, Mapping) else None
    if value["passed"]:
        return StageState.PASSED, f"run {run.run_id} passed", metrics
    return StageState.FAILED, f"run {run.run_id}: {task} reported passed: false", metrics


def run_context(spec: BackfillSpec, where: str, stage: Stage, ids: tuple[int, ...]) -> dict[str, Any]:
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
