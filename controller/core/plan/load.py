"""The plan with the load its creates set off (pure): each create's `DagLoad`, and the policy rule
`asset_consumers`: `warn` is a finding, `require_downstream` refuses the create whose runs trigger
DAGs its spec does not name. Decided after the plan is made and never in its checksum (a consumer DAG added in
Airflow must not make a reviewed plan stale: reconcile decides the refusal again from what Airflow says then).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from controller.core.model.binding import Phase
from controller.core.model.chunks import Progress
from controller.core.model.load import AssetConsumers, DagLoad, consumers_message
from controller.core.model.policy import Policy, Rule
from controller.core.plan.values import Finding, FindingKind, Item, Kind, Plan
from controller.core.rules.consumers import consumers_fix, unnamed_consumers

REQUIRE: AssetConsumers = "require_downstream"


def creates(plan: Plan) -> list[str]:
    """The DAGs with a planned create that knows its run count: the only ones whose load is read."""
    return sorted({i.dag_id for i in plan.items if _counted_create(i)})


def required(plan: Plan, policy: Policy) -> list[str]:
    """The DAGs with a counted create whose policy rule sets `asset_consumers: require_downstream`: the only
    ones whose assets reconcile reads (a pass without such a create reads none)."""
    return sorted({i.dag_id for i in plan.items if _counted_create(i) and _requiring(i, policy) is not None})


def with_load(plan: Plan, loads: Mapping[str, DagLoad], policy: Policy) -> Plan:
    """Each counted create with its DAG's load; a create whose runs trigger DAGs its `downstream` leaves out
    is a finding where the DAG's policy rule says `asset_consumers: warn`, and refused where it says
    `require_downstream`."""
    items = tuple(
        replace(i, load=loads[i.dag_id]) if _counted_create(i) and i.dag_id in loads else i for i in plan.items
    )
    found = [f for i in items if (f := _consumers_finding(i, policy)) is not None]
    return refuse_unnamed(replace(plan, items=items, findings=plan.findings + tuple(found)), loads, policy)


def refuse_unnamed(plan: Plan, loads: Mapping[str, DagLoad], policy: Policy) -> Plan:
    """Each counted create under `asset_consumers: require_downstream` refused while its runs trigger DAGs its
    spec does not name, or while Airflow cannot say which DAGs they trigger (the rule fails closed); the plan
    keeps the checksum it had before (see the module's docstring)."""
    items = tuple(_refused(i, loads.get(i.dag_id), policy) for i in plan.items)
    if items == plan.items:
        return plan
    return replace(plan, items=items, unmetered=plan.checksum())


def _counted_create(item: Item) -> bool:
    return item.kind is Kind.CREATE and item.runs_to_create is not None and item.source is not None


def _requiring(item: Item, policy: Policy) -> Rule | None:
    rule = policy.rule_for(item.dag_id)
    return rule if rule is not None and rule.asset_consumers == REQUIRE else None


def _refused(item: Item, load: DagLoad | None, policy: Policy) -> Item:
    rule = _requiring(item, policy)
    if load is None or rule is None or item.source is None or not _counted_create(item):
        return item
    named = f"policy rule {rule.index + 1} (asset_consumers: {REQUIRE}) requires the spec's downstream to name them"
    if load.assets is None:
        why = load.assets_unknown or "assets: not known"
        reason = f"the DAGs each run of {item.dag_id} triggers cannot be read ({why}), and {named}"
    else:
        unnamed = unnamed_consumers(load, item.source.downstream, policy)
        if not unnamed:
            return item
        message = consumers_message(item.dag_id, load, unnamed, rule.index, REQUIRE)
        reason = f"{message}: {consumers_fix(unnamed, policy)}"
    # a refused chunk is not pending: nothing was asked of Airflow, nothing is to be adopted
    return replace(
        item, kind=Kind.REFUSE, phase=Phase.BLOCKED, reason=reason, request=None, progress=_unasked(item.progress)
    )


def _unasked(progress: Progress | None) -> Progress | None:
    if progress is None or not progress.chunks:
        return None
    return replace(progress, pending=None)


def _consumers_finding(item: Item, policy: Policy) -> Finding | None:
    rule = policy.rule_for(item.dag_id)
    if item.load is None or item.source is None or rule is None or rule.asset_consumers != "warn":
        return None
    unnamed = unnamed_consumers(item.load, item.source.downstream, policy)
    if not unnamed:
        return None
    message = consumers_message(item.dag_id, item.load, unnamed, rule.index, rule.asset_consumers)
    return Finding(FindingKind.ASSET_CONSUMERS, item.dag_id, message, item.spec)
