"""The planner's stage gates (core/plan/stages.py): production waits for its rehearsal, a spec with `verify` is
Succeeded only after its final verification, a canary with `promotion: on_verification` is promoted or halted
by its verification; and `due` lists exactly the stage steps the commands are to take."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from controller.core.model.airflow import RunSummary
from controller.core.model.binding import Phase
from controller.core.model.chunks import Progress
from controller.core.model.policy import Policy
from controller.core.model.spec import Execution
from controller.core.model.stages import (
    PRODUCTION,
    Environment,
    Promotion,
    Publish,
    Rehearsal,
    Slice,
    Stage,
    StageRecord,
    StageState,
    Verify,
)
from controller.core.plan.queue import make_plan
from controller.core.plan.stages import StageStep, canary_gate, due, rehearsal_gate, verified
from controller.core.plan.values import Item, Kind
from controller.core.plan.world import World
from tests.core.plan.test_plan import JAN1, NOW, backfill, bound, dates, decided, spec, world
from tests.core.plan.test_plan_chunks import airflow, chunk, days, one, row, runs, ten
from tests.core.plan.test_plan_chunks import world as chunk_world

STAGED = Policy(
    environments=(Environment("staging", "S_URL", "S_TOKEN"), Environment(PRODUCTION, rehearse_in="staging"))
)
SLICES = Rehearsal((Slice(JAN1, JAN1 + timedelta(days=1)), Slice(JAN1 + timedelta(days=4), JAN1 + timedelta(days=5))))
VERIFY = Verify("orders_verify", timeout_minutes=30)


def record(stage: Stage, state: StageState, **extra: object) -> StageRecord:
    where = "staging" if stage is Stage.REHEARSAL else PRODUCTION
    return StageRecord("s", where, stage, "k", state, NOW, **extra)  # type: ignore[arg-type]


def staged(w: World, *records: StageRecord) -> World:
    return replace(w, stages={(r.spec, r.stage): r for r in records})


def test_a_rehearsing_spec_is_not_created_until_its_rehearsal_passed() -> None:
    s = spec(rehearsal=SLICES)
    w = world(dry={"s": dates(7)})
    assert decided(make_plan([s], STAGED, w)) == [
        ("s", "wait", "AwaitingRehearsal", "waiting for its rehearsal in staging", None)
    ]
    going = staged(w, record(Stage.REHEARSAL, StageState.REHEARSING, backfill_ids=(41,)))
    plan = make_plan([s], STAGED, going)
    assert decided(plan) == [
        ("s", "wait", "AwaitingRehearsal", "rehearsing in staging: slice 1 of 2 (backfill #41)", None)
    ]
    assert plan.items[0].moving
    verifying = staged(w, record(Stage.REHEARSAL, StageState.VERIFYING, backfill_ids=(41, 42), run_id="r1"))
    assert decided(make_plan([s], STAGED, verifying))[0][3] == (
        "rehearsal in staging: its slices succeeded; verifying (run r1)"
    )
    passed = staged(w, record(Stage.REHEARSAL, StageState.PASSED, backfill_ids=(41, 42)))
    assert [i.kind.value for i in make_plan([s], STAGED, passed).items] == ["create"]


def test_a_failed_rehearsal_is_settled_with_its_reason_and_the_fix() -> None:
    s = spec(rehearsal=SLICES)
    failed = record(Stage.REHEARSAL, StageState.FAILED, reason="slice 2025-01-01..2025-01-02: 1 of 2 run(s) failed")
    plan = make_plan([s], STAGED, staged(world(dry={"s": dates(7)}), failed))
    assert decided(plan) == [
        (
            "s",
            "noop",
            "AwaitingRehearsal",
            "rehearsal in staging failed: slice 2025-01-01..2025-01-02: 1 of 2 run(s) failed; fix the DAG or the "
            "spec, then set rehearsal.attempt: 2",
            None,
        )
    ]
    (item,) = plan.items
    assert (item.moving, item.stage_failed, item.stage) == (False, True, Stage.REHEARSAL)
    assert due([s], STAGED, plan.items, {}) == ()


def test_without_environments_a_rehearsal_gates_nothing() -> None:
    s = spec(rehearsal=SLICES)
    assert [i.kind.value for i in make_plan([s], Policy(), world(dry={"s": dates(7)})).items] == ["create"]


def test_a_created_spec_is_never_sent_back_to_rehearse() -> None:
    s = spec(rehearsal=SLICES)
    plan = make_plan([s], STAGED, world(backfill(4, s), bindings={"s": bound("s", 4)}))
    assert decided(plan) == [("s", "noop", "Running", "in sync", 4)]


def test_succeeded_only_after_the_final_verification() -> None:
    s = spec(verify=VERIFY)
    finished = world(backfill(4, s, active=False), bindings={"s": bound("s", 4)}, runs={4: RunSummary({"success": 7})})
    plan = make_plan([s], Policy(), finished)
    assert decided(plan) == [("s", "noop", "Running", "7 run(s) succeeded; verifying with orders_verify", 4)]
    assert due([s], Policy(), plan.items, {}) == (StageStep("s", Stage.FINAL, PRODUCTION),)
    verifying = record(Stage.FINAL, StageState.VERIFYING, run_id="v1")
    assert decided(make_plan([s], Policy(), staged(finished, verifying)))[0][2:4] == (
        "Running",
        "7 run(s) succeeded; verifying (run v1)",
    )
    passed = replace(verifying, state=StageState.PASSED)
    assert decided(make_plan([s], Policy(), staged(finished, passed)))[0][2:4] == (
        "Succeeded",
        "7 run(s) succeeded; verified (run v1)",
    )
    failed = replace(verifying, state=StageState.FAILED, reason="verification run v1 failed")
    plan = make_plan([s], Policy(), staged(finished, failed))
    assert decided(plan)[0][2:4] == ("VerificationFailed", "verification failed: verification run v1 failed")
    assert (plan.items[0].phase.terminal, plan.items[0].stage_failed) == (True, True)


def test_failed_runs_are_not_verified_and_a_recorded_outcome_is_kept() -> None:
    s = spec(verify=VERIFY)
    failing = world(
        backfill(4, s, active=False),
        bindings={"s": bound("s", 4)},
        runs={4: RunSummary({"success": 6, "failed": 1}, failed_dates=(JAN1,))},
    )
    assert decided(make_plan([s], Policy(), failing))[0][2] == "CompletedWithFailures"
    recorded = world(bindings={"s": replace(bound("s", 4), phase=Phase.SUCCEEDED, reason="7 run(s) succeeded")})
    assert decided(make_plan([s], Policy(), recorded)) == [("s", "noop", "Succeeded", "7 run(s) succeeded", 4)]


def test_publish_is_due_once_the_final_verification_passed_and_not_again() -> None:
    s = spec(verify=VERIFY, publish=Publish("orders_publish"))
    recorded = world(bindings={"s": replace(bound("s", 4), phase=Phase.SUCCEEDED, reason="done")})
    plan = make_plan([s], Policy(), recorded)
    passed = {("s", Stage.FINAL): record(Stage.FINAL, StageState.PASSED, run_id="v1")}
    assert due([s], Policy(), plan.items, passed) == (StageStep("s", Stage.PUBLISH, PRODUCTION),)
    published = {**passed, ("s", Stage.PUBLISH): record(Stage.PUBLISH, StageState.PASSED, run_id="p1")}
    assert due([s], Policy(), plan.items, published) == ()


CANARY = Execution(chunk_runs=4, canary_runs=2, promotion=Promotion.ON_VERIFICATION)


def canary_world() -> World:
    progress = Progress(10, (chunk(1, 0, 1),))
    return chunk_world(
        airflow(1, 0, 1, active=False), progress=progress, backfill_id=1, runs_of={1: runs(success=2)}, dry=days(2, 9)
    )


def test_a_canary_promoted_by_its_verification() -> None:
    s = ten(execution=CANARY, verify=VERIFY)
    w = canary_world()
    item = one(make_plan([s], Policy(), w))
    assert row(item) == (
        "noop",
        "AwaitingPromotion",
        "canary chunk finished (2 succeeded, 0 failed); verifying with orders_verify",
        None,
    )
    assert (item.moving, item.stage) == (True, Stage.CANARY)
    assert due([s], Policy(), (item,), {}) == (StageStep("s", Stage.CANARY, PRODUCTION),)
    passed = one(make_plan([s], Policy(), staged(w, record(Stage.CANARY, StageState.PASSED, run_id="c1"))))
    assert (passed.kind.value, passed.promoting, passed.chunk) == ("create", True, (2, 3))
    failed = record(Stage.CANARY, StageState.FAILED, reason="verification run c1 failed")
    halted = one(make_plan([s], Policy(), staged(w, failed)))
    assert row(halted) == (
        "noop",
        "Halted",
        "the canary's verification failed: verification run c1 failed; fix the cause, then merge `promote: true` to "
        "continue",
        None,
    )
    assert not halted.moving
    assert (halted.stage, halted.chunk) == (Stage.CANARY, (1, 3))  # the canary's verification is what failed
    verifying = one(make_plan([s], Policy(), staged(w, record(Stage.CANARY, StageState.VERIFYING, run_id="c1"))))
    assert (verifying.reason, verifying.stage) == (
        "canary chunk finished (2 succeeded, 0 failed); run c1",
        Stage.CANARY,
    )
    for kept in (item, halted, verifying):  # the store keeps the chunks' progress through the wait
        assert kept.progress is not None
        assert [(c.backfill_id, c.summary) for c in kept.progress.chunks] == [(1, runs(success=2))]


def test_a_manual_canary_still_waits_for_promote() -> None:
    s = ten(execution=replace(CANARY, promotion=Promotion.MANUAL), verify=VERIFY)
    item = one(make_plan([s], Policy(), canary_world()))
    assert item.reason.endswith("check its output, then merge `promote: true` to continue")
    assert (item.stage, item.moving) == (None, False)


def test_the_rehearsal_gates_item_is_the_specs_own() -> None:
    s = spec(dag="orders", rehearsal=SLICES)
    gate = rehearsal_gate(s, STAGED, {})
    waiting = Item("s", "orders", Kind.WAIT, Phase.AWAITING_REHEARSAL, "waiting for its rehearsal in staging")
    assert gate == replace(waiting, stage=Stage.REHEARSAL)
    assert gate is not None
    assert gate.source is s  # status and the PR comment read the spec from it
    started = rehearsal_gate(s, STAGED, {("s", Stage.REHEARSAL): record(Stage.REHEARSAL, StageState.REHEARSING)})
    assert started is not None
    assert started.reason == "rehearsing in staging: slice 1 of 2"  # no backfill created yet
    assert rehearsal_gate(spec(), STAGED, {}) is None
    assert rehearsal_gate(s, Policy(), {}) is None


def test_verified_names_the_final_stage_in_each_state() -> None:
    s = spec(verify=VERIFY)
    done = Item("s", "d", Kind.NOOP, Phase.SUCCEEDED, "7 run(s) succeeded", 4, source=s)

    def after(state: StageState, reason: str | None = None) -> Item:
        return verified(done, {("s", Stage.FINAL): record(Stage.FINAL, state, run_id="v1", reason=reason)})

    assert verified(done, {}) == replace(
        done, phase=Phase.RUNNING, reason="7 run(s) succeeded; verifying with orders_verify", stage=Stage.FINAL
    )
    assert after(StageState.VERIFYING) == replace(
        done, phase=Phase.RUNNING, reason="7 run(s) succeeded; verifying (run v1)", stage=Stage.FINAL
    )
    assert after(StageState.PASSED) == replace(done, reason="7 run(s) succeeded; verified (run v1)", stage=Stage.FINAL)
    assert after(StageState.FAILED, "verification run v1 failed") == replace(
        done,
        phase=Phase.VERIFICATION_FAILED,
        reason="verification failed: verification run v1 failed",
        stage=Stage.FINAL,
        stage_failed=True,
    )
    unverified = replace(done, source=spec())
    assert verified(unverified, {}) == unverified


def test_a_verification_in_flight_is_due_every_pass_until_it_settles() -> None:
    s = spec(verify=VERIFY)
    finished = world(backfill(4, s, active=False), bindings={"s": bound("s", 4)}, runs={4: RunSummary({"success": 7})})
    verifying = staged(finished, record(Stage.FINAL, StageState.VERIFYING, run_id="v1"))
    plan = make_plan([s], Policy(), verifying)
    assert due([s], Policy(), plan.items, verifying.stages) == (StageStep("s", Stage.FINAL, PRODUCTION),)


def test_canary_gate_says_what_its_verification_said() -> None:
    s = ten(execution=CANARY, verify=VERIFY)

    def gate(state: StageState, **extra: object) -> tuple[StageState | None, str | None]:
        return canary_gate(s, {("s", Stage.CANARY): record(Stage.CANARY, state, **extra)})

    assert canary_gate(s, {}) == (None, "verifying with orders_verify")
    assert canary_gate(ten(execution=CANARY), {}) == (None, "verifying with ?")  # validate refuses such a spec
    assert gate(StageState.VERIFYING, run_id="c1") == (StageState.VERIFYING, "run c1")
    assert gate(StageState.VERIFYING) == (StageState.VERIFYING, None)
    assert gate(StageState.FAILED, run_id="c1", reason="verification run c1 failed") == (
        StageState.FAILED,
        "verification run c1 failed",
    )
    assert canary_gate(ten(execution=replace(CANARY, promotion=Promotion.MANUAL), verify=VERIFY), {}) == (None, None)
    assert canary_gate(spec(verify=VERIFY), {}) == (None, None)


def test_due_takes_only_the_steps_of_stages_the_plan_waits_on() -> None:
    rehearsing, checking = spec("r", rehearsal=SLICES), spec("v", verify=VERIFY)
    canary, manual = ten("c", execution=CANARY, verify=VERIFY), ten("m", execution=CANARY)
    plain, passed = spec("p"), spec("x", verify=VERIFY)
    gate = rehearsal_gate(rehearsing, STAGED, {})
    assert gate is not None
    items = (
        Item("gone", "d", Kind.NOOP, Phase.RUNNING, "its file was deleted"),  # not a spec in the tree: skipped
        gate,
        Item("p", "d", Kind.NOOP, Phase.RUNNING, "in sync", 3),  # running, no stage
        replace(Item("v", "d", Kind.NOOP, Phase.RUNNING, "verifying with orders_verify", 4), stage=Stage.FINAL),
        replace(Item("x", "d", Kind.NOOP, Phase.SUCCEEDED, "verified (run v1)", 5), stage=Stage.FINAL),
        replace(Item("c", "d", Kind.NOOP, Phase.AWAITING_PROMOTION, "verifying"), stage=Stage.CANARY),
        Item("m", "d", Kind.NOOP, Phase.AWAITING_PROMOTION, "merge `promote: true`"),  # promoted by hand
    )
    specs = [rehearsing, checking, canary, manual, plain, passed]
    assert due(specs, STAGED, items, {}) == (
        StageStep("r", Stage.REHEARSAL, "staging"),
        StageStep("v", Stage.FINAL, PRODUCTION),
        StageStep("c", Stage.CANARY, PRODUCTION),
    )
