"""No false green: a spec is terminal only when none of its runs is queued or running (pure planner)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from controller.core.model.airflow import Backfill, DagInfo, RunSummary
from controller.core.model.binding import Binding, Phase
from controller.core.model.policy import Policy
from controller.core.model.spec import BackfillSpec, DesiredState, ReprocessBehavior
from controller.core.plan.queue import make_plan
from controller.core.plan.values import Finding, Kind
from controller.core.plan.world import DagObservation, World

T0 = datetime(2025, 1, 1, tzinfo=UTC)
DONE = datetime(2025, 2, 1, tzinfo=UTC)
NOW = datetime(2026, 11, 1, tzinfo=UTC)
INFO = DagInfo(
    "d", is_paused=False, is_stale=False, has_import_errors=False, is_backfillable=True, depends_on_past=None
)
SPEC = BackfillSpec(
    name="s",
    dag_id="d",
    from_date=T0,
    to_date=datetime(2025, 1, 4, tzinfo=UTC),
    reprocess_behavior=ReprocessBehavior.NONE,
    max_active_runs=2,
    ticket="CHG-1",
    reason="truth test",
    requested_by="a",
    approvers=("b",),
    path="specs/s.yaml",
    digest="d1",
)
COMPLETED = Backfill(7, "d", SPEC.from_date, SPEC.to_date, "none", 2, False, None, T0, DONE)


def plan_for(runs: RunSummary, *, bound: bool):
    bindings = {"s": Binding("s", "d", 7, Phase.RUNNING)} if bound else {}
    world = World({"d": DagObservation("d", INFO, (COMPLETED,), {7: runs})}, bindings, now=NOW)
    return make_plan([SPEC], Policy(), world)


@pytest.mark.parametrize("bound", [True, False], ids=["bound", "adopted"])
def test_completed_backfill_with_queued_runs_is_running_and_a_loud_finding(bound: bool) -> None:
    plan = plan_for(RunSummary({"success": 126, "queued": 17318, "running": 2}), bound=bound)
    (item,) = plan.items
    assert (item.kind, item.phase) == (Kind.NOOP if bound else Kind.ADOPT, Phase.RUNNING)
    if bound:
        assert item.reason == "backfill #7 marked complete early; 17318 queued and 2 running run(s) remain"
    assert plan.findings == (
        Finding(
            "completed-early",
            "d",
            "Airflow marked backfill #7 complete while 17318 queued and 2 running run(s) remain: it no longer holds "
            "the DAG's backfill slot and cannot be paused or cancelled through the backfill API; the runs go on. "
            "To stop them, pause the DAG or mark the runs failed in Airflow; backfillctl keeps counting them",
            "s",
            7,
        ),
    )


@pytest.mark.parametrize(
    ("counts", "phase", "reason"),
    [
        ({"success": 4}, Phase.SUCCEEDED, "4 run(s) succeeded"),
        ({"success": 2, "failed": 2}, Phase.COMPLETED_WITH_FAILURES, "failed: 2 run(s)"),  # no dates listed
    ],
)
def test_completed_backfill_with_all_runs_finished_is_terminal(
    counts: dict[str, int], phase: Phase, reason: str
) -> None:
    plan = plan_for(RunSummary(counts), bound=True)
    (item,) = plan.items
    assert (item.kind, item.phase, item.reason) == (Kind.NOOP, phase, reason)
    assert plan.findings == ()


def test_a_queue_waits_behind_a_backfill_completed_early() -> None:
    later = BackfillSpec(**{**{f: getattr(SPEC, f) for f in SPEC.__slots__}, "name": "t", "path": "specs/t.yaml"})
    world = World(
        {"d": DagObservation("d", INFO, (COMPLETED,), {7: RunSummary({"queued": 3})})},
        {"s": Binding("s", "d", 7, Phase.RUNNING)},
        now=NOW,
    )
    plan = make_plan([SPEC, later], Policy(), world)
    assert [(i.spec, i.kind, i.phase, i.reason) for i in plan.items][1] == (
        "t",
        Kind.WAIT,
        Phase.QUEUED,
        "queued behind s",
    )


def test_a_cancelled_backfill_waits_for_its_running_run_before_it_is_cancelled() -> None:
    world = World(
        {"d": DagObservation("d", INFO, (COMPLETED,), {7: RunSummary({"running": 1, "failed": 3})})},
        {"s": Binding("s", "d", 7, Phase.RUNNING, DesiredState.CANCELLED)},
        now=NOW,
    )
    plan = make_plan([SPEC], Policy(), world)
    (item,) = plan.items
    assert (item.kind, item.phase, item.reason) == (Kind.NOOP, Phase.RUNNING, "cancelled; 1 running run(s) will finish")
    assert plan.findings == (
        Finding("still-running", "d", "cancel fails only queued runs; 1 running run(s) will finish", "s", 7),
    )
    done = World(
        {"d": DagObservation("d", INFO, (COMPLETED,), {7: RunSummary({"success": 1, "failed": 3}, never_started=3)})},
        world.bindings,
        now=NOW,
    )
    (item,) = make_plan([SPEC], Policy(), done).items
    assert (item.phase, item.reason) == (Phase.CANCELLED, "cancelled; 3 queued run(s) never started")


def test_a_deleted_specs_dag_that_cannot_be_observed_is_an_incomplete_plan() -> None:
    world = World(
        {"gone-dag": DagObservation("gone-dag", None, error="GET /api/v2/backfills -> 500: boom")},
        {"gone": Binding("gone", "gone-dag", 3, Phase.RUNNING)},
        now=NOW,
    )
    plan = make_plan(
        [SPEC], Policy(), World({**world.observations, "d": DagObservation("d", INFO)}, world.bindings, now=NOW)
    )
    assert plan.findings == (
        Finding(
            "observation-incomplete",
            "gone-dag",
            "DAG gone-dag was not fully observed: GET /api/v2/backfills -> 500: boom",
            cause="GET /api/v2/backfills -> 500: boom",
        ),
    )
    assert not plan.complete


def test_every_dags_queue_head_asks_for_its_dry_run() -> None:
    other = BackfillSpec(
        **{**{f: getattr(SPEC, f) for f in SPEC.__slots__}, "name": "t", "dag_id": "e", "path": "specs/t.yaml"}
    )
    observed = {"d": DagObservation("d", INFO), "e": DagObservation("e", replace(INFO, dag_id="e"))}
    plan = make_plan([SPEC, other], Policy(), World(observed, now=NOW))
    assert plan.dry_runs_needed == ("s", "t")
    assert [(i.spec, i.kind, i.reason) for i in plan.items] == [
        ("s", Kind.WAIT, "awaiting dry run"),
        ("t", Kind.WAIT, "awaiting dry run"),
    ]


def test_findings_are_sorted_by_dag_kind_spec_then_backfill() -> None:
    late, early = (replace(COMPLETED, id=i, completed_at=None) for i in (1, 2))
    world = World(
        {"d": DagObservation("d", INFO, (late, early))},
        {"b-gone": Binding("b-gone", "d", 1, Phase.RUNNING), "a-gone": Binding("a-gone", "d", 2, Phase.RUNNING)},
        now=NOW,
    )
    plan = make_plan([], Policy(), world)
    assert [(f.kind, f.spec, f.backfill_id) for f in plan.findings] == [
        ("orphaned", "a-gone", 2),
        ("orphaned", "b-gone", 1),
    ]
