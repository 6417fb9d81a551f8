"""The policy rule `asset_consumers` (pure): which DAGs a backfill's asset events trigger that its
spec does not name, and what the spec's author does about it. A spec names a DAG by listing its id in
`downstream`, or a downstream system whose `dags` include it (the system's owners then approve)."""

from __future__ import annotations

from collections.abc import Sequence

from controller.core.model.load import DagLoad
from controller.core.model.policy import Policy


def named_dags(downstream: Sequence[str], policy: Policy) -> frozenset[str]:
    """The DAG ids a spec's `downstream` names: each entry, and the `dags` of each system it lists."""
    budgets = policy.budgets
    return frozenset(downstream) | {d for name in downstream if name in budgets for d in budgets[name].dags}


def unnamed_consumers(load: DagLoad, downstream: Sequence[str], policy: Policy) -> tuple[str, ...]:
    """The DAGs the runs trigger that the spec's `downstream` does not name (sorted)."""
    named = named_dags(downstream, policy)
    return tuple(d for d in load.consumers if d not in named)


def consumers_fix(unnamed: Sequence[str], policy: Policy) -> str:
    """How the spec names them: the systems whose `dags` list them, else their ids (where the policy declares no
    systems: a spec's downstream must name declared ones), so their owners approve."""
    where = policy.path or "specs/policy.yaml"
    systems = sorted(b.name for b in policy.downstream if set(b.dags) & set(unnamed))
    left = [d for d in unnamed if not any(d in b.dags for b in policy.downstream)]
    covered = ", ".join(d for d in unnamed if any(d in b.dags for b in policy.downstream))
    whose = "its" if len(systems) == 1 else "their"
    steps = [f"add {', '.join(systems)} to the spec's downstream ({whose} `dags` in {where} list {covered})"]
    steps = steps if systems else []
    if left and policy.downstream:
        steps.append(f"list {', '.join(left)} in the `dags` of a downstream system in {where} and add that system")
    elif left:
        steps.append(f"add {', '.join(left)} to the spec's downstream")
    return "; ".join(steps) + ", so their owners approve"
