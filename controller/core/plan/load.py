"""The plan with the load its creates set off (pure): each create's `DagLoad`, and the findings of the policy
rule `asset_consumers` (issue 27 §3). Added after the plan is made, so no decision and no checksum depends on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from controller.core.model.load import DagLoad, consumers_message, unnamed_consumers
from controller.core.model.policy import Policy
from controller.core.plan.values import Finding, FindingKind, Item, Kind, Plan


def creates(plan: Plan) -> list[str]:
    """The DAGs with a planned create that knows its run count: the only ones whose load is read."""
    return sorted({i.dag_id for i in plan.items if _counted_create(i)})


def with_load(plan: Plan, loads: Mapping[str, DagLoad], policy: Policy) -> Plan:
    """Each counted create with its DAG's load; a create whose runs trigger DAGs its `downstream` leaves out
    is a finding where the DAG's policy rule sets `asset_consumers`."""
    items = tuple(
        replace(i, load=loads[i.dag_id]) if _counted_create(i) and i.dag_id in loads else i for i in plan.items
    )
    found = [f for i in items if (f := _consumers_finding(i, policy)) is not None]
    return replace(plan, items=items, findings=plan.findings + tuple(found))


def _counted_create(item: Item) -> bool:
    return item.kind is Kind.CREATE and item.runs_to_create is not None and item.source is not None


def _consumers_finding(item: Item, policy: Policy) -> Finding | None:
    rule = policy.rule_for(item.dag_id)
    if item.load is None or item.source is None or rule is None or rule.asset_consumers is None:
        return None
    unnamed = unnamed_consumers(item.load, item.source.downstream)
    if not unnamed:
        return None
    message = consumers_message(item.dag_id, item.load, unnamed, rule.index, rule.asset_consumers)
    if rule.asset_consumers == "require_downstream":
        message += f"; validate refuses spec {item.spec} until its downstream names them"
    return Finding(FindingKind.ASSET_CONSUMERS, item.dag_id, message, item.spec)
