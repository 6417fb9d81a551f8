"""Reconcile's part of the policy rule `asset_consumers: require_downstream`: the assets of each
DAG with a create under that rule, read once per pass (one call per DAG, none without such a create), and those
creates refused whose runs trigger DAGs their spec does not name (`core/plan/load.py`)."""

from __future__ import annotations

from controller.adapters.airflow import AirflowClient
from controller.commands.reconcile.observe import dag_load
from controller.commands.runtime.concurrency import concurrently
from controller.core.model.load import DagLoad
from controller.core.model.policy import Policy
from controller.core.plan.load import refuse_unnamed, required
from controller.core.plan.values import Plan


class Consumers:
    """One pass's reads: the plan and the plan re-observed after the changes are judged on the same answers."""

    def __init__(self, client: AirflowClient) -> None:
        self.client = client
        self.loads: dict[str, DagLoad] = {}

    def refuse(self, plan: Plan, policy: Policy) -> Plan:
        unread = [d for d in required(plan, policy) if d not in self.loads]
        self.loads.update(concurrently(unread, lambda dag_id: dag_load(self.client, dag_id, None)))
        return refuse_unnamed(plan, self.loads, policy)
