"""`drain_dag` in a spec (pure): only on a DAG the policy lets be drained, never chunked, and approved by the owners
of the systems the DAG loads (their data stops while it drains). The Airflow line is checked with Airflow
(`checks/dags.check_against_release`, and the body of the dry run and the create)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime

from controller.core.checks.loaded import LoadedSpec
from controller.core.documents.diagnostics import Diagnostic, Severity
from controller.core.model.policy import Policy
from controller.core.model.spec import BackfillSpec


def check_drain(item: LoadedSpec, policy: Policy, _now: datetime) -> Iterator[Diagnostic]:
    """`drain_dag` only on a DAG the policy lets be drained, and never chunked: each chunk's drain would pause
    the DAG when it ends, and a paused DAG blocks the next chunk. (The Airflow line is checked with Airflow: the
    body of the dry run and the create refuse it before 3.4.)"""
    spec = item.spec
    if not spec.drain_dag:
        return
    if not policy.may_drain(spec.dag_id):
        allowed = ", ".join(policy.drain_dags) or "none"
        yield Diagnostic(
            item.at("drain_dag"),
            f"drain_dag: DAG {spec.dag_id} is not one the policy lets a spec drain (drain.allowed_dags: {allowed}); "
            "a drain pauses the DAG after the backfill",
            f"remove drain_dag, or add {spec.dag_id} to drain.allowed_dags in {policy.path or 'the policy'} "
            "(a reviewed change)",
        )
    rule = policy.rule_for(spec.dag_id)
    chunk_runs = spec.execution.chunk_runs if spec.execution is not None else None
    by_policy = chunk_runs is None and rule is not None and rule.chunk_default is not None
    if chunk_runs is not None or by_policy:
        yield Diagnostic(
            item.at("execution", "chunk_runs") if chunk_runs is not None else item.at("drain_dag"),
            "drain_dag cannot be used on a chunked spec"
            + (f" (rule {rule.index + 1} of the policy chunks it by default)" if by_policy and rule else "")
            + ": each chunk's drain would pause the DAG when it ends, and the paused DAG would block the next chunk",
            "remove drain_dag, or run the range as one backfill (no execution.chunk_runs)",
        )
    if not drain_owners(spec, policy):
        yield Diagnostic(
            item.at("drain_dag"),
            f"drain_dag: no downstream system of the policy lists DAG {spec.dag_id} in its dags with owners: nobody "
            "but the spec's approvers approves holding back its scheduled runs",
            f"list {spec.dag_id} in the `dags` of the systems it loads (with their owners) in "
            f"{policy.path or 'the policy'}, so their owners approve the drain",
            Severity.WARNING,
        )


def drain_owners(spec: BackfillSpec, policy: Policy) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """The systems a drained DAG loads (`downstream.<system>.dags` lists it) with their owners: the people whose data
    the drain holds back, who approve it (none when the spec does not drain)."""
    if not spec.drain_dag:
        return ()
    return tuple((b.name, b.owners) for b in policy.downstream if spec.dag_id in b.dags and b.owners)


def drain_approvals(item: LoadedSpec, policy: Policy, counts: Callable[[str], bool]) -> Iterator[Diagnostic]:
    """A drain is a restart of the DAG's own work on other terms: one owner of each system the DAG loads approves
    it (`counts`: whether a login's approval counts for this change)."""
    spec = item.spec
    for system, owners in drain_owners(spec, policy):
        if any(counts(o) for o in owners):
            continue
        who = ", ".join(owners)
        yield Diagnostic(
            item.at("drain_dag"),
            f"{spec.name}: drain_dag holds back DAG {spec.dag_id}'s scheduled runs and leaves it paused, and the "
            f"owners of {system}, which it loads ({who}), have not approved the pull request",
            f"ask one of {who} to approve it in code review, or remove drain_dag",
        )
