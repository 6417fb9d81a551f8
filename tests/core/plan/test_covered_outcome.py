"""A spec's outcome held to its version coverage (pure): only a `select` spec whose runs all succeeded and whose
selection is not covered ends CompletedWithFailures; for every other spec coverage is information."""

from __future__ import annotations

from controller.core.model.airflow import DagVersion
from controller.core.model.binding import Phase
from controller.core.model.coverage import Coverage, Gap, Missed, TargetSource
from controller.core.plan.outcome import covered_outcome, covered_outcomes
from controller.core.plan.values import Item, Kind, Plan
from tests.core.specs import loaded, text

V2 = DagVersion(2)
HOLDS = Coverage(V2, TargetSource.AT_END, intervals=3, covered=3, missed=())
MISSED = Coverage(
    V2, TargetSource.AT_END, intervals=3, covered=2, missed=(Missed("2025-01-02", Gap.OTHER_CODE, (DagVersion(1),)),)
)
SELECTING = loaded(text(reprocess="completed") + "select: {code_version: 2}\n").spec
WHOLE = loaded(text(reprocess="completed")).spec


def _item(phase: Phase, reason: str = "2 run(s) succeeded", *, selects: bool = True) -> Item:
    spec = SELECTING if selects else WHOLE
    return Item(spec.name, spec.dag_id, Kind.NOOP, phase, reason, 7, source=spec)


def test_a_select_spec_not_covered_completes_with_failures_saying_why() -> None:
    held = covered_outcome(_item(Phase.SUCCEEDED), MISSED)
    assert (held.phase, held.reason) == (
        Phase.COMPLETED_WITH_FAILURES,
        "2 run(s) succeeded; the selection is not covered: version coverage: 2 of 3 intervals on DAG version 2 "
        "(1 other code)",
    )
    bare = covered_outcome(_item(Phase.SUCCEEDED, ""), MISSED)
    assert bare.reason == (
        "the selection is not covered: version coverage: 2 of 3 intervals on DAG version 2 (1 other code)"
    )


def test_coverage_is_information_for_every_other_outcome_and_spec() -> None:
    kept = [
        _item(Phase.SUCCEEDED),  # covered
        _item(Phase.SUCCEEDED, selects=False),  # no select: its runs say its outcome
        _item(Phase.COMPLETED_WITH_FAILURES, "failed: 2025-01-01"),  # already not a success
        _item(Phase.CANCELLED, "cancelled"),
    ]
    found = [HOLDS, MISSED, MISSED, MISSED]
    assert [covered_outcome(i, c) for i, c in zip(kept, found, strict=True)] == kept
    assert covered_outcome(_item(Phase.SUCCEEDED), None) == _item(Phase.SUCCEEDED)  # not measured: as observed


def test_a_plan_changes_only_where_a_selection_is_not_covered() -> None:
    plan = Plan((_item(Phase.SUCCEEDED),), ())
    assert covered_outcomes(plan, {}) is plan
    assert covered_outcomes(plan, {"other": MISSED}) is plan
    (held,) = covered_outcomes(plan, {"s": MISSED}).items
    assert held.phase is Phase.COMPLETED_WITH_FAILURES
