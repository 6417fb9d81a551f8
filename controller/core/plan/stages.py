"""Rehearsals and verifications as gates (pure): what a spec waits on, and what its stage records say.

A World carries, per (spec, stage), the record that counts this pass (for a rehearsal: the one with the current
rehearsal key; the commands compute the key, it needs the DAG's version in the rehearsing environment):

- a spec that rehearses is not created in production until its rehearsal passed (`rehearsal_gate`);
- a spec with `verify` is Succeeded only once its final verification passed, else VerificationFailed (`verified`);
- a canary with `promotion: on_verification` continues when its verification passed, halts when it failed
  (`canary_gate`).

`due` lists the stage steps the commands are to take this pass (start a rehearsal, trigger a verification or the
publish run), so the rules for what comes next live here and the commands only do the I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from controller.core.model.binding import Phase
from controller.core.model.policy import Policy
from controller.core.model.spec import BackfillSpec
from controller.core.model.stages import PRODUCTION, Promotion, Stage, StageRecord, StageState
from controller.core.plan.values import Item, Kind

StageRecords = Mapping[tuple[str, Stage], StageRecord]


def rehearses(spec: BackfillSpec, policy: Policy) -> str | None:
    """The environment the spec rehearses in (None: it does not rehearse)."""
    where = policy.rehearsal_environment
    return where.name if spec.rehearsal is not None and where is not None else None


def rehearsal_gate(spec: BackfillSpec, policy: Policy, records: StageRecords) -> Item | None:
    """A spec not created yet waits in AwaitingRehearsal until its rehearsal passed (None: nothing holds it)."""
    where = rehearses(spec, policy)
    if where is None or spec.rehearsal is None:
        return None
    record = records.get((spec.name, Stage.REHEARSAL))
    if record is not None and record.state is StageState.PASSED:
        return None

    def waiting(reason: str, *, failed: bool = False) -> Item:
        kind = Kind.NOOP if failed else Kind.WAIT
        item = Item(spec.name, spec.dag_id, kind, Phase.AWAITING_REHEARSAL, reason, source=spec)
        return replace(item, stage=Stage.REHEARSAL, stage_failed=failed)

    if record is None:
        return waiting(f"waiting for its rehearsal in {where}")
    if record.state is StageState.FAILED:
        again = spec.rehearsal.attempt + 1
        fix = f"fix the DAG or the spec, then set rehearsal.attempt: {again}"
        return waiting(f"rehearsal in {where} failed: {record.reason}; {fix}", failed=True)
    if record.state is StageState.VERIFYING:
        return waiting(f"rehearsal in {where}: its slices succeeded; verifying (run {record.run_id})")
    slices = len(spec.rehearsal.slices)
    current = f" (backfill #{record.backfill_ids[-1]})" if record.backfill_ids else ""
    return waiting(f"rehearsing in {where}: slice {max(1, len(record.backfill_ids))} of {slices}{current}")


def verified(item: Item, records: StageRecords) -> Item:
    """A spec with `verify` whose backfills all succeeded: Succeeded once its final verification passed,
    VerificationFailed when it failed, Running (verifying) until then."""
    spec = item.source
    if spec is None or spec.verify is None or item.phase is not Phase.SUCCEEDED or item.backfill_id is None:
        return item
    record = records.get((spec.name, Stage.FINAL))
    if record is None:
        why = f"{item.reason}; verifying with {spec.verify.dag_id}"
        return replace(item, phase=Phase.RUNNING, reason=why, stage=Stage.FINAL)
    if record.state is StageState.PASSED:
        return replace(item, reason=f"{item.reason}; verified (run {record.run_id})", stage=Stage.FINAL)
    if record.state is StageState.FAILED:
        why = f"verification failed: {record.reason}"
        return replace(item, phase=Phase.VERIFICATION_FAILED, reason=why, stage=Stage.FINAL, stage_failed=True)
    return replace(
        item, phase=Phase.RUNNING, reason=f"{item.reason}; verifying (run {record.run_id})", stage=Stage.FINAL
    )


def canary_gate(spec: BackfillSpec, records: StageRecords) -> tuple[StageState | None, str | None]:
    """A canary that its verification promotes: (None, None) when the spec is promoted by hand; else the
    verification's state (None: not triggered yet) and what it said."""
    execution = spec.execution
    if execution is None or execution.promotion is not Promotion.ON_VERIFICATION:
        return None, None
    record = records.get((spec.name, Stage.CANARY))
    if record is None:
        return None, f"verifying with {spec.verify.dag_id if spec.verify else '?'}"
    return record.state, record.reason or (None if record.run_id is None else f"run {record.run_id}")


@dataclass(frozen=True, slots=True)
class StageStep:
    """One thing the commands are to do this pass for a spec's stage."""

    spec: str
    stage: Stage
    environment: str


def due(
    specs: Sequence[BackfillSpec], policy: Policy, items: Sequence[Item], records: StageRecords
) -> tuple[StageStep, ...]:
    """The stage steps this pass: rehearsals not passed yet (started or advanced), verifications the plan waits on
    (the final one, a canary's), and the publish run once the final verification passed."""
    by_name = {s.name: s for s in specs}
    steps: list[StageStep] = []
    for item in items:
        spec = by_name.get(item.spec)
        if spec is None:
            continue
        if item.phase is Phase.AWAITING_REHEARSAL and not item.stage_failed:
            steps.append(StageStep(spec.name, Stage.REHEARSAL, rehearses(spec, policy) or PRODUCTION))
        elif item.stage is Stage.FINAL and item.phase is Phase.RUNNING:
            steps.append(StageStep(spec.name, Stage.FINAL, PRODUCTION))
        elif item.stage is Stage.CANARY and item.phase is Phase.AWAITING_PROMOTION and not item.stage_failed:
            steps.append(StageStep(spec.name, Stage.CANARY, PRODUCTION))
        final = records.get((spec.name, Stage.FINAL))
        published = records.get((spec.name, Stage.PUBLISH))
        if spec.publish is not None and final is not None and final.state is StageState.PASSED and published is None:
            steps.append(StageStep(spec.name, Stage.PUBLISH, PRODUCTION))
    return tuple(steps)
