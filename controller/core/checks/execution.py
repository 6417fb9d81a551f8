"""A spec's execution checks (pure): chunks, canary and halt against the policy and each other, and the fields
that do nothing without another (`promote` without a canary, `resume` without a halt rule or a stop)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from controller.core.checks.loaded import LoadedSpec
from controller.core.documents.diagnostics import Diagnostic, Severity
from controller.core.documents.yamlsafe import Document
from controller.core.model.policy import Policy, Rule
from controller.core.model.spec import NO_EXECUTION, ReprocessBehavior


def rule_scope(policy: Policy, dag_id: str) -> tuple[Rule | None, str]:
    rule = policy.rule_for(dag_id)
    return rule, "" if rule is None else f"rule {rule.index + 1} ({', '.join(rule.dags)})"


def check_execution(item: LoadedSpec, policy: Policy, _now: datetime) -> Iterator[Diagnostic]:
    """Chunks, canary and halt against the policy and against each other."""
    spec = item.spec
    rule, scope = rule_scope(policy, spec.dag_id)
    ex = spec.execution or NO_EXECUTION
    if rule is not None and rule.chunk_max is not None and ex.chunk_runs is not None and ex.chunk_runs > rule.chunk_max:
        yield Diagnostic(
            item.at("execution", "chunk_runs"),
            f"execution.chunk_runs {ex.chunk_runs} is over chunk_runs.max {rule.chunk_max} set by {scope}",
            f"lower it to {rule.chunk_max} or less: each chunk is one Airflow backfill, its runs created in one call",
        )
    if (
        rule is not None
        and rule.require_canary_for_completed
        and spec.reprocess_behavior is ReprocessBehavior.COMPLETED
        and ex.canary_runs is None
    ):
        yield Diagnostic(
            item.at("execution") if spec.execution is not None else item.at("reprocess_behavior"),
            f"reprocess_behavior 'completed' needs execution.canary_runs on DAGs {', '.join(rule.dags)} "
            f"(rule {rule.index + 1} sets require_canary_for_completed)",
            "add `execution: {canary_runs: N}`: the first N runs are re-run, then the spec waits for a reviewed "
            "`promote: true`",
        )
    if ex.canary_runs is not None and ex.chunk_runs is not None and ex.canary_runs > ex.chunk_runs:
        yield Diagnostic(
            item.at("execution", "canary_runs"),
            f"execution.canary_runs {ex.canary_runs} is more than execution.chunk_runs {ex.chunk_runs}",
            f"the canary is the first chunk: make canary_runs at most {ex.chunk_runs}",
        )
    if ex.canary_runs is not None and spec.expected_runs is not None and ex.canary_runs > spec.expected_runs:
        yield Diagnostic(
            item.at("execution", "canary_runs"),
            f"execution.canary_runs {ex.canary_runs} is more than expected_runs {spec.expected_runs}",
            "the canary is a first slice of the spec's runs: make it a small part of expected_runs",
        )
    if ex.halt_on_failure_ratio is not None and ex.halt_on_failure_ratio >= 1:
        yield Diagnostic(
            item.at("execution", "halt_on_failure_ratio"),
            "halt_on_failure_ratio 1 never halts: more than every finished run can never fail",
            "set a share below 1 (e.g. 0.2), or remove halt_on_failure_ratio",
            Severity.WARNING,
        )


def check_promote_resume(item: LoadedSpec, policy: Policy, _now: datetime) -> Iterator[Diagnostic]:
    """`promote` without a canary and `resume` without a halt rule do nothing: say so, but do not fail."""
    spec = item.spec
    ex = spec.execution or NO_EXECUTION
    if spec.promote and ex.canary_runs is None:
        yield Diagnostic(
            item.at("promote"),
            "promote: true has no effect: the spec sets no execution.canary_runs",
            "promote lets a spec continue after its canary chunk; add `execution: {canary_runs: N}` or remove it",
            Severity.WARNING,
        )
    if ex.halt_min_finished is not None and ex.halt_on_failure_ratio is None:
        yield Diagnostic(
            item.at("execution", "halt_min_finished"),
            "halt_min_finished has no effect: the spec sets no execution.halt_on_failure_ratio, so it never halts",
            "add `halt_on_failure_ratio: 0.2` beside it, or remove halt_min_finished",
            Severity.WARNING,
        )
    if spec.resume is not None and ex.halt_on_failure_ratio is None and not spec.resumed_stops:
        yield Diagnostic(
            item.at("resume"),
            "resume has no effect: it names no stop (`stop #N`) and the spec sets no execution.halt_on_failure_ratio, "
            "so it never halts",
            'resume continues a Halted spec, or lifts the stop it names (`resume: "stop #3: why"`; `backfillctl '
            "stop list` shows the ids); add `execution: {halt_on_failure_ratio: 0.2}`, name a stop, or remove it",
            Severity.WARNING,
        )


def check_policy_chunks(policy: Policy, doc: Document) -> Iterator[Diagnostic]:
    """A rule's default chunk size must itself be allowed by the rule's maximum."""
    for rule in policy.rules:
        if rule.chunk_default is not None and rule.chunk_max is not None and rule.chunk_default > rule.chunk_max:
            yield Diagnostic(
                doc.locate(("rules", rule.index, "chunk_runs", "default")),
                f"chunk_runs.default {rule.chunk_default} is over chunk_runs.max {rule.chunk_max} in "
                f"rule {rule.index + 1} ({', '.join(rule.dags)})",
                f"lower default to {rule.chunk_max} or less, or raise max: specs without chunk_runs get the default",
            )
