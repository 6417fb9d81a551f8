"""The change record's words for who approved a spec, their JSON in the binding, and the approval gate at reconcile
(pure)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller.core.checks.approval import Review
from controller.core.model.airflow import BackfillRequest
from controller.core.model.binding import Approval, ApprovedReview, Binding, Phase
from controller.core.model.guards import Budget
from controller.core.model.policy import Policy
from controller.core.plan.provenance import Evidence, Gate, approved_by, gate_plan
from controller.core.plan.values import Item, Kind, Plan
from tests.core.specs import loaded, text

BOB = ApprovedReview("bob", 9001, "c0ffee", "2026-11-01T10:00:00Z")
ERIN = ApprovedReview("erin", None, "", "")


@pytest.mark.parametrize(
    ("approval", "words"),
    [
        (Approval(41, "abc", (BOB,)), "bob in #41 (review 9001, 2026-11-01T10:00Z)"),
        (
            Approval(41, None, (BOB, ERIN)),
            "bob in #41 (review 9001, 2026-11-01T10:00Z), erin in #41 (review id unknown, time unknown)",
        ),
        (None, "approval not recorded (the spec lists bob, carol)"),
    ],
)
def test_approved_by_names_each_review_or_says_there_is_no_record(approval: Approval | None, words: str) -> None:
    assert approved_by(approval, ("bob", "carol")) == words


def test_an_approval_survives_the_bindings_json() -> None:
    approval = Approval(41, "abc", (BOB, ERIN))
    assert Approval.from_json(approval.as_json()) == approval
    assert Approval.from_json(None) is None
    assert (
        ApprovedReview("x", 1, "", "2026-11-01T10:00:00.123Z").text(7) == "x in #7 (review 1, 2026-11-01T10:00:00.123Z)"
    )


# --- the approval gate at reconcile (gate_plan) ---------------------------------------------------------------

MERGED = "m" * 40
WAREHOUSE = Policy(downstream=(Budget("warehouse", 8, ("olga", "pete")),))
SPEC = loaded(text(approvers="dave, erin") + "downstream: [warehouse]\n")


def review(login: str, review_id: int, state: str = "APPROVED") -> Review:
    return Review(login, state, f"c-{login}", f"2026-11-01T10:0{review_id % 10}:00Z", review_id, "", "write", review_id)


ALL_APPROVED = {r.login: r for r in (review("dave", 1), review("erin", 2), review("olga", 3), review("pete", 4))}


def evidence(decisions: dict[str, Review], author: str = "bob") -> Evidence:
    return Evidence(41, author, decisions)


def item(kind: Kind = Kind.CREATE, *, source: bool = True) -> Item:
    spec = SPEC.spec
    request = BackfillRequest.from_spec(spec)
    return Item("s", spec.dag_id, kind, Phase.PENDING, source=spec if source else None, request=request)


def gate(
    found: Evidence | None = None,
    binding: Binding | None = None,
    *,
    changed: frozenset[str] = frozenset({"s"}),
    policy: Policy = WAREHOUSE,
) -> Gate:
    return Gate(found, changed, {"s": SPEC}, {} if binding is None else {"s": binding}, policy, MERGED)


def refused(reason: str) -> tuple[str, Phase, str, BackfillRequest | None, bool]:
    return ("refuse", Phase.BLOCKED, reason, None, False)


def decided(plan: Plan) -> list[tuple[str, Phase, str, BackfillRequest | None, bool]]:
    return [(i.kind.value, i.phase, i.reason, i.request, i.awaiting_dry_run) for i in plan.items]


UNAPPROVED = (
    "approval gate at reconcile: the approvals of #41 are not there: s: 'dave' has not approved the pull request; "
    "s: 'erin' has not approved the pull request (latest review: CHANGES_REQUESTED); "
    "s: 0 of the 1 approvals this spec needs are present"
)


def test_a_merged_spec_with_its_approvals_passes_and_the_approval_names_each_counted_review() -> None:
    waiting = replace(item(Kind.WAIT), awaiting_dry_run=True)
    plan = Plan((waiting,), dry_runs_needed=("s",))
    gated, approvals = gate_plan(plan, gate(evidence(ALL_APPROVED, author="olga")))
    assert gated == plan  # the pull request's author's approval (olga, an owner) is not counted
    assert gated.dry_runs_needed == ("s",)
    assert approvals == {
        "s": Approval(
            41,
            MERGED,
            (
                ApprovedReview("dave", 1, "c-dave", "2026-11-01T10:01:00Z"),
                ApprovedReview("erin", 2, "c-erin", "2026-11-01T10:02:00Z"),
                ApprovedReview("pete", 4, "c-pete", "2026-11-01T10:04:00Z"),
            ),
        )
    }


def test_a_create_or_wait_without_the_approvals_is_refused_with_every_reason() -> None:
    owner_only = {"olga": review("olga", 3), "erin": review("erin", 2, "CHANGES_REQUESTED")}
    plan = Plan((item(Kind.CREATE), replace(item(Kind.WAIT), awaiting_dry_run=True)))
    gated, approvals = gate_plan(plan, gate(evidence(owner_only)))
    assert (decided(gated), approvals) == ([refused(UNAPPROVED)] * 2, {})


def test_the_pull_requests_author_and_the_policy_count_at_reconcile() -> None:
    own = gate_plan(Plan((item(),)), gate(evidence(ALL_APPROVED, author="dave")))[0]
    assert decided(own) == [
        refused(
            "approval gate at reconcile: the approvals of #41 are not there: s: 'dave' opened the pull request and "
            "cannot approve it"
        )
    ]
    unowned = gate_plan(Plan((item(),)), gate(evidence(ALL_APPROVED, author="olga"), policy=Policy()))
    assert unowned[1]["s"].reviews == (
        ApprovedReview("dave", 1, "c-dave", "2026-11-01T10:01:00Z"),
        ApprovedReview("erin", 2, "c-erin", "2026-11-01T10:02:00Z"),
    )  # no budget owners in the policy: only the listed approvers


@pytest.mark.parametrize(
    ("planned", "binding", "changed"),
    [
        (item(Kind.NOOP), None, frozenset({"s"})),  # not a create
        (item(Kind.REFUSE), None, frozenset({"s"})),
        (item(source=False), None, frozenset({"s"})),  # an orphan
        (item(), Binding("s", "orders_daily", 7, Phase.RUNNING, backfills=(7,)), frozenset({"s"})),  # created
        (item(), Binding("s", "orders_daily", None, Phase.SUCCEEDED, backfills=(7,)), frozenset({"s"})),
        (item(), None, frozenset({"other"})),  # the merged commit did not touch it
    ],
)
def test_the_gate_leaves_what_is_not_a_first_create_of_a_merged_spec(
    planned: Item, binding: Binding | None, changed: frozenset[str]
) -> None:
    unapproved = evidence({"dave": review("dave", 1)})
    assert gate_plan(Plan((planned,)), gate(unapproved, binding, changed=changed)) == (Plan((planned,)), {})


def test_a_first_create_with_a_binding_without_backfills_is_gated() -> None:
    pending = Binding("s", "orders_daily", None, Phase.PENDING)
    gated = gate_plan(Plan((item(),)), gate(evidence({}), pending))[0]
    assert decided(gated)[0][0] == "refuse"
    assert gated.items[0].approval_refused  # what the binding keeps, so that the next pass refuses it again


def test_a_spec_the_gate_refused_stays_refused_while_unchanged_without_the_reviews() -> None:
    why = "approval gate at reconcile: the approvals of #41 are not there: s: 'erin' has not approved"
    digest = SPEC.spec.digest
    before = Binding(
        "s", "orders_daily", None, Phase.BLOCKED, spec_digest=digest, reason=why, refused=True, approval_refused=True
    )
    assert decided(gate_plan(Plan((item(),)), gate(None, before))[0]) == [refused(why)]
    assert decided(gate_plan(Plan((item(),)), gate(None, before, changed=frozenset()))[0]) == [refused(why)]
    for unlike in (
        replace(before, phase=Phase.PENDING),  # decided again since
        replace(before, approval_refused=False, reason="over max_runs: 12 runs > 10"),  # refused for another reason
        replace(before, approval_refused=False),  # the flag decides, not the reason's words
        replace(before, spec_digest="sha256:other"),  # the file changed
    ):
        assert gate_plan(Plan((item(),)), gate(None, unlike)) == (Plan((item(),)), {})
    assert gate_plan(Plan((item(),)), gate(None)) == (Plan((item(),)), {})  # never decided: nothing to keep
