"""A finished backfill's outcome (pure): the terminal phase its own runs say, and the reason that says why."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from controller.core.model.airflow import Backfill, RunSummary
from controller.core.model.binding import Phase
from controller.core.model.coverage import Coverage
from controller.core.model.spec import DesiredState
from controller.core.plan.values import Item, Plan
from controller.core.rules.schedules import failed_partitions_text


def terminal_phase(backfill: Backfill, runs: RunSummary, applied: DesiredState | None) -> Phase:
    """Cancelled, else CompletedWithFailures when a run of its own failed or its outcome is not known for some
    dates (re-run by others before it was recorded: never reported as success), else Succeeded. `applied` is the
    state reconcile last applied to it (None: never applied, an adopted backfill)."""
    if applied is DesiredState.CANCELLED or (backfill.is_paused and runs.never_started):
        return Phase.CANCELLED
    return Phase.COMPLETED_WITH_FAILURES if runs.count("failed") or runs.unknown else Phase.SUCCEEDED


def covered_outcome(item: Item, found: Coverage | None) -> Item:
    """A `select` spec is done when its selection is: with its runs succeeded but an interval's latest run not on the
    target (failed, never ran, other code), it ends CompletedWithFailures, the coverage line saying why. For other
    specs coverage is information: their outcome is their runs'."""
    spec = item.source
    if found is None or found.holds or spec is None or spec.select is None or item.phase is not Phase.SUCCEEDED:
        return item
    why = f"the selection is not covered: {found.text()}"
    return replace(item, phase=Phase.COMPLETED_WITH_FAILURES, reason=f"{item.reason}; {why}" if item.reason else why)


def covered_outcomes(plan: Plan, measured: Mapping[str, Coverage | None]) -> Plan:
    """The plan with each spec's outcome held to its coverage measured at its end (`covered_outcome`)."""
    items = tuple(covered_outcome(i, measured.get(i.spec)) for i in plan.items)
    return plan if items == plan.items else replace(plan, items=items)


def outcome_reason(phase: Phase, runs: RunSummary) -> str:
    return _own_outcome(phase, runs) + unknown_text(runs)


def unknown_text(runs: RunSummary) -> str:
    """`; outcome unknown for 3 date(s) re-run before backfillctl recorded them: 2025-01-01 re-run by …`."""
    lost = [r for r in runs.reruns if r.own is None]
    if not lost:
        return ""
    more = f" and {len(lost) - 1} more" if len(lost) > 1 else ""
    return f"; outcome unknown for {len(lost)} date(s) re-run before backfillctl recorded them: {lost[0].text()}{more}"


def _own_outcome(phase: Phase, runs: RunSummary) -> str:
    if phase is Phase.COMPLETED_WITH_FAILURES and not runs.count("failed"):
        return f"{runs.count('success')} run(s) succeeded"
    if phase is Phase.COMPLETED_WITH_FAILURES and runs.failed_partitions:
        return failed_partitions_text(runs.failed_partitions)
    if phase is Phase.COMPLETED_WITH_FAILURES:
        listed = ", ".join(d.date().isoformat() for d in runs.failed_dates)
        more = runs.failed_unlisted
        if more and not listed:
            return f"failed: {more} run(s)"
        return "failed: " + listed + (f" and {more} more" if more else "")
    if phase is Phase.CANCELLED:
        return f"cancelled; {runs.never_started} queued run(s) never started"
    return f"{runs.count('success')} run(s) succeeded"
