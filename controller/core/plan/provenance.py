"""Approval provenance at reconcile (pure): the approval gate of PR time, re-checked for the specs a merged pull
request adds or changes, before their first create; who approved is recorded with the create.

Level-triggered like the rest of reconcile: a spec refused here stays refused (its binding says why) while its
file is unchanged, so a later pass without the pull request's reviews does not create it either.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from controller.core.checks.approval import Review, check_approvals, valid_approvals
from controller.core.checks.loaded import LoadedSpec
from controller.core.model.binding import Approval, ApprovedReview, Binding, Phase
from controller.core.model.policy import Policy
from controller.core.plan.values import Item, Kind, Plan

REFUSED = "approval gate at reconcile"
NOT_RECORDED = "approval not recorded"


@dataclass(frozen=True, slots=True)
class SpecOrigin:
    """Where a spec file comes from in git (what its audit records and its create intent name)."""

    commit: str | None = None  # the last commit that touched the file (None: not in git)
    author: str = ""  # the email of the commit that added the file ("": not known)


UNKNOWN_ORIGIN = SpecOrigin()  # a spec outside git, or read without it


@dataclass(frozen=True, slots=True)
class Evidence:
    """The merged pull request's reviews (`reconcile --pr-reviews --pr-number --pr-author`)."""

    pr_number: int
    pr_author: str
    decisions: Mapping[str, Review]  # each reviewer's latest decisive review (approval.latest_decisions)


def approved_by(approval: Approval | None, approvers: tuple[str, ...]) -> str:
    """The change record's words: who approved where and when, never the spec's bare list."""
    if approval is not None:
        return approval.text()
    return f"{NOT_RECORDED} (the spec lists {', '.join(approvers)})"


def approval_clause(approval: Approval | None, approvers: tuple[str, ...]) -> str:
    """The clause of a create intent's message: `approved by bob in #41 (…)`, or `approval not recorded (…)`."""
    words = approved_by(approval, approvers)
    return words if approval is None else f"approved by {words}"


@dataclass(frozen=True, slots=True)
class Gate:
    evidence: Evidence | None
    changed: frozenset[str]  # names of the specs the merged commit adds or changes
    loaded: Mapping[str, LoadedSpec]
    bindings: Mapping[str, Binding]
    policy: Policy
    commit: str | None  # the merged commit


def gate_plan(plan: Plan, gate: Gate) -> tuple[Plan, dict[str, Approval]]:
    """The plan with each first create the gate refuses turned into a refusal, and the approvals of the others."""
    items, approvals = [], {}
    for item in plan.items:
        decided, approval = _decide(item, gate)
        items.append(decided)
        if approval is not None:
            approvals[item.spec] = approval
    return replace(plan, items=tuple(items)), approvals


def _decide(item: Item, gate: Gate) -> tuple[Item, Approval | None]:
    binding = gate.bindings.get(item.spec)
    # a create, or one waiting for its turn or its dry run: refused now rather than when its turn comes
    if item.kind not in (Kind.CREATE, Kind.WAIT) or item.source is None or not _first_create(binding):
        return item, None
    if gate.evidence is not None and item.spec in gate.changed and item.spec in gate.loaded:
        evidence = gate.evidence
        loaded = gate.loaded[item.spec]
        problems = check_approvals(loaded, evidence.decisions, evidence.pr_author, None, gate.policy)
        if problems:
            why = "; ".join(d.message for d in problems)
            return _refuse(item, f"{REFUSED}: the approvals of #{evidence.pr_number} are not there: {why}"), None
        reviews = valid_approvals(loaded, evidence.decisions, evidence.pr_author, gate.policy)
        return item, Approval(evidence.pr_number, gate.commit, tuple(_approved(r) for r in reviews))
    if (
        binding is not None
        and binding.phase is Phase.BLOCKED
        and binding.approval_refused
        and binding.spec_digest == item.source.digest
    ):
        return _refuse(item, binding.reason), None  # refused at its merge, unchanged since: still refused
    return item, None


def _first_create(binding: Binding | None) -> bool:
    return binding is None or (binding.backfill_id is None and not binding.backfills)


def _refuse(item: Item, reason: str) -> Item:
    return replace(
        item,
        kind=Kind.REFUSE,
        phase=Phase.BLOCKED,
        reason=reason,
        request=None,
        awaiting_dry_run=False,
        approval_refused=True,
    )


def _approved(review: Review) -> ApprovedReview:
    return ApprovedReview(review.login, review.review_id, review.commit_id, review.submitted_at)
