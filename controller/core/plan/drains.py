"""The plan with what each `drain_dag` create holds back (pure): the DAG's schedule and `catchup`, read with its
details for the plan only and never in its checksum (the drain itself is in the create's request, which is); and a
finished drain's outcome saying that its DAG is left paused, never by backfillctl undone."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from controller.core.checks.drain import drain_owners
from controller.core.model.drain import DrainHold
from controller.core.model.policy import Policy
from controller.core.plan.values import Item, Kind, Plan

DRAINED = "is paused by drain (not a stop)"  # the words `status` and the notification carry


def draining(plan: Plan) -> list[str]:
    """The DAGs a planned create drains: the only ones whose details the plan reads for it."""
    return sorted({i.dag_id for i in plan.items if _drains(i)})


def with_drain(plan: Plan, holds: Mapping[str, DrainHold]) -> Plan:
    """Each create that drains its DAG, with what it holds back (a DAG not in `holds`: not known, said so)."""
    items = tuple(
        replace(i, drain=holds.get(i.dag_id, DrainHold(i.dag_id, unknown="the DAG's details were not read")))
        if _drains(i)
        else i
        for i in plan.items
    )
    return replace(plan, items=items)


def _drains(item: Item) -> bool:
    return item.kind is Kind.CREATE and item.request is not None and bool(item.request.drain_dag)


def drained_outcomes(plan: Plan, policy: Policy) -> Plan:
    """Each finished `drain_dag` spec's outcome says that Airflow pauses its DAG once none of its runs is left
    unfinished, that this is no stop and backfillctl never unpauses it, and whose decision unpausing is: `status`, the
    change record and the terminal notification (the audit record's message) carry it."""
    items = tuple(_with_pause(i, policy) for i in plan.items)
    return plan if items == plan.items else replace(plan, items=items)


def paused_by_drain(dag_id: str, owners: Sequence[tuple[str, Sequence[str]]]) -> str:
    """The words for a DAG a finished drain left paused (the next spec on it is blocked with `queue.drained_pause`)."""
    who = "; ".join(f"{system} ({', '.join(names)})" for system, names in owners)
    decide = f"; unpausing it is for its downstream owners to decide: {who}" if who else ""
    return (
        f"DAG {dag_id} {DRAINED} once none of its runs is left unfinished: backfillctl never unpauses it, and specs "
        f"queued on it wait until a person unpauses it{decide}"
    )


def _with_pause(item: Item, policy: Policy) -> Item:
    spec = item.source
    if spec is None or not spec.drain_dag or not item.phase.terminal or item.backfill_id is None:
        return item  # nothing to reprocess: no backfill, so no drain
    if DRAINED in item.reason:
        return item  # recorded with it
    note = paused_by_drain(item.dag_id, drain_owners(spec, policy))
    return replace(item, reason=f"{item.reason}; {note}" if item.reason else note)
