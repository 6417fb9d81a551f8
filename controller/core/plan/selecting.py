"""A `select` spec at the head of its DAG's queue (pure): the first backfill over its selection, or why it does
not start.

Its selected intervals' contiguous sub-ranges are run as chunks (`plan/chunked.py`), one after the other, each
recorded in the spec's progress at the first create; halts, guards, stops and windows apply as to any chunk.
"""

from __future__ import annotations

from dataclasses import replace

from controller.core.model.binding import Phase
from controller.core.model.capabilities import unsupported_request
from controller.core.model.spec import BackfillSpec
from controller.core.plan.admission import analysis_runs, held_now, run_limit
from controller.core.plan.chunked import first_sub_range, moved_code
from controller.core.plan.values import Item, Kind
from controller.core.plan.world import Context, DryRun
from controller.core.rules.selection import Selection, max_backfills, merge_allowed, merged, too_many

UNKNOWN = (
    "select cannot be planned: the selection is not known (the range's runs were not read whole: more than the plan "
    "reads); narrow the range"
)


def selected_item(ctx: Context, spec: BackfillSpec, counted: Item, dry: DryRun) -> Item:
    """The head's item for a spec with `select` (`counted`: its create with the dry run's counts); its sub-ranges
    joined where the policy's `merge_sub_ranges` lets them (over `max_backfills`)."""
    selection = dry.selection
    if selection is not None and merge_allowed(ctx.policy, spec.dag_id):
        selection = merged(selection, max_backfills(ctx.policy, spec.dag_id))
    refused = _refused(ctx, spec, counted, selection)
    if refused is not None or selection is None:
        return refused or replace(counted, kind=Kind.BLOCKED, phase=Phase.BLOCKED, reason=UNKNOWN)
    counted = replace(counted, selection=selection, runs_to_create=len(selection.selected))
    if not selection.selected:
        return replace(counted, kind=Kind.NOOP, phase=Phase.SUCCEEDED, reason=f"nothing to re-run: {selection.text()}")
    moved = moved_code(ctx, spec)
    if moved is not None:
        return replace(counted, kind=Kind.BLOCKED, phase=Phase.BLOCKED, reason=moved)
    held = held_now(spec, ctx.policy, ctx.world, counted)
    return held or first_sub_range(spec, counted, selection, analysis_runs(spec, ctx.world))


def _refused(ctx: Context, spec: BackfillSpec, counted: Item, selection: Selection | None) -> Item | None:
    """Why the spec is refused: the Airflow line, too many sub-ranges, over its expected or allowed runs."""
    caps = ctx.world.airflow
    line = None if caps is None else unsupported_request(caps, None, select=True)
    if line is not None or selection is None or not selection.selected:
        return None if line is None else replace(counted, kind=Kind.REFUSE, phase=Phase.BLOCKED, reason=line)
    counted = replace(counted, selection=selection, runs_to_create=len(selection.selected))
    why = too_many(selection, max_backfills(ctx.policy, spec.dag_id)) or run_limit(
        spec, ctx.policy, len(selection.selected)
    )
    return None if why is None else replace(counted, kind=Kind.REFUSE, phase=Phase.BLOCKED, reason=why)
