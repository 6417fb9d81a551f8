"""The policy rule `asset_consumers` at validate (pure, with Airflow configured): a spec whose runs trigger
asset-scheduled DAGs its `downstream` does not name is warned of, or refused."""

from __future__ import annotations

from collections.abc import Iterator

from controller.core.checks.loaded import LoadedSpec
from controller.core.documents.diagnostics import Diagnostic, Severity
from controller.core.model.load import DagLoad, consumers_message
from controller.core.model.policy import Policy
from controller.core.rules.consumers import consumers_fix, unnamed_consumers


def wants_consumers(item: LoadedSpec, policy: Policy) -> bool:
    """Whether the spec's DAG has a rule that sets `asset_consumers` (only then are its assets read)."""
    rule = policy.rule_for(item.spec.dag_id)
    return rule is not None and rule.asset_consumers is not None


def check_asset_consumers(item: LoadedSpec, load: DagLoad, policy: Policy) -> Iterator[Diagnostic]:
    spec, rule = item.spec, policy.rule_for(item.spec.dag_id)
    if rule is None or rule.asset_consumers is None:
        return
    unnamed = unnamed_consumers(load, spec.downstream, policy)
    for why in load.unknown:
        message = f"could not check the DAGs {spec.dag_id} triggers: {why}"
        yield Diagnostic(item.at("dag_id"), message, "plan shows them again", Severity.WARNING)
    if not unnamed:
        return
    yield Diagnostic(
        item.at("downstream"),
        consumers_message(spec.dag_id, load, unnamed, rule.index, rule.asset_consumers),
        consumers_fix(unnamed, policy),
        Severity.ERROR if rule.asset_consumers == "require_downstream" else Severity.WARNING,
    )
