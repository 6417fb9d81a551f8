"""The policy's `scope` at validate (pure): a policy without one is warned about, a spec outside it refused (by its
dag_id offline; by the DAG's tags where Airflow is configured). A specs repository has one policy
(`specs/policy.yaml`, DESIGN §1), so two scopes of one repository cannot overlap; two teams' scopes meet in a
shared store, which refuses the second (`commands/runtime/scopes.py`)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime

from controller.core.checks.loaded import LoadedSpec
from controller.core.documents.diagnostics import Diagnostic, Severity
from controller.core.documents.yamlsafe import Document
from controller.core.model.airflow import DagInfo
from controller.core.model.policy import Policy
from controller.core.rules.scope import HINT, outside, tags_unchecked

SKIPPED = "tag check skipped"
NO_SCOPE_HINT = (
    "add `scope: {dags: [your_team_*]}` (or `tags: [your-team]`): the DAGs this repository may touch on a shared "
    'Airflow (README, "Several teams, one Airflow")'
)


def check_policy_scope(policy: Policy, doc: Document) -> list[Diagnostic]:
    """A policy names the DAGs its repository may touch."""
    if policy.scope is not None:
        return []
    return [
        Diagnostic(
            doc.locate(()),
            "scope is not set: specs of this repository may touch every DAG in Airflow",
            NO_SCOPE_HINT,
            Severity.WARNING,
        )
    ]


def check_spec_scope(item: LoadedSpec, policy: Policy, _now: datetime) -> Iterator[Diagnostic]:
    """Offline: the spec's DAG matches the scope's globs, or (with `tags`) says that only Airflow can tell."""
    dag_id = item.spec.dag_id
    refusal = outside(dag_id, None, policy)
    if refusal is not None:
        yield Diagnostic(item.at("dag_id"), refusal, HINT)
        return
    unknown = tags_unchecked(dag_id, policy)
    if unknown is not None:
        yield Diagnostic(
            item.at("dag_id"),
            f"{unknown} ({SKIPPED})",
            "validate with Airflow configured (BACKFILLCTL_AIRFLOW_URL) checks the tags; plan and reconcile do",
            Severity.WARNING,
        )


def check_scope_tags(item: LoadedSpec, info: DagInfo, policy: Policy) -> Iterator[Diagnostic]:
    """With Airflow: a DAG the globs do not match carries one of the scope's tags."""
    if tags_unchecked(item.spec.dag_id, policy) is None:
        return
    refusal = outside(item.spec.dag_id, info.tags, policy)
    if refusal is not None:
        yield Diagnostic(item.at("dag_id"), refusal, HINT)


def tag_skipped(item: LoadedSpec, found: Sequence[Diagnostic]) -> set[Diagnostic]:
    """The offline "tag check skipped" warning of a spec whose DAG's tags were read."""
    where = item.at("dag_id")
    return {d for d in found if d.location == where and not d.is_error and SKIPPED in d.message}
