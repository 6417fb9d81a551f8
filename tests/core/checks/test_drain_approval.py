"""A `drain_dag` spec needs the approval of its DAG's downstream owners (the owners of each system whose `dags` list
the DAG), at pull-request time and at reconcile, and is gated as a restart of work: without a reviewed merge's
evidence it is refused whatever `require_reviewed_merge` says."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from controller.core.checks.approval import ChangeReview, check_approvals, latest_decisions, valid_approvals
from controller.core.checks.drain import drain_owners
from controller.core.checks.validation import check_spec
from controller.core.model.evidence import Evidence, Verdict
from controller.core.model.guards import Budget
from controller.core.model.policy import Policy
from controller.core.plan.provenance import assess
from tests.core.checks.test_approval import HEAD, decisions, raw
from tests.core.plan.test_provenance import MERGE, PATH, carried, decided, evidence, forge_review, gate
from tests.core.specs import loaded, text

POLICY = Policy(
    drain_dags=("orders_*",),
    downstream=(
        Budget("warehouse", 8, ("olga", "pete"), dags=("orders_daily", "billing_daily")),
        Budget("api", 2, ("ann",), dags=("billing_daily",)),
        Budget("lake", 4, (), dags=("orders_daily",)),  # no owners: nobody to ask
    ),
)
DRAIN = text(dag="orders_daily", approvers="dave") + "drain_dag: true\n"
AT = "2026-01-01T00:00:00Z"
NOT_APPROVED = (
    "specs/s.yaml:12:12: $.drain_dag: s: drain_dag holds back DAG orders_daily's scheduled runs and leaves it paused, "
    "and the owners of warehouse, which it loads (olga, pete), have not approved the pull request"
)


def test_the_owners_are_those_of_the_systems_whose_dags_list_the_drained_dag() -> None:
    assert drain_owners(loaded(DRAIN).spec, POLICY) == (("warehouse", ("olga", "pete")),)
    billing = loaded(text(dag="billing_daily") + "drain_dag: true\n").spec
    assert drain_owners(billing, POLICY) == (("warehouse", ("olga", "pete")), ("api", ("ann",)))
    assert drain_owners(loaded(text(dag="orders_daily")).spec, POLICY) == ()  # no drain: no drain owners


def test_a_drain_needs_one_owner_of_each_system_its_dag_loads() -> None:
    dave = decisions(raw("dave", "APPROVED", AT))
    found = check_approvals(loaded(DRAIN), dave, "bob", HEAD, POLICY)
    assert [(d.text(), d.hint) for d in found] == [
        (NOT_APPROVED, "ask one of olga, pete to approve it in code review, or remove drain_dag")
    ]
    with_pete = decisions(raw("dave", "APPROVED", AT), raw("pete", "APPROVED", AT))
    assert check_approvals(loaded(DRAIN), with_pete, "bob", HEAD, POLICY) == []
    stale = decisions(raw("dave", "APPROVED", AT), raw("pete", "APPROVED", AT, "b" * 40))
    assert len(check_approvals(loaded(DRAIN), stale, "bob", HEAD, POLICY)) == 1  # an approval of an old commit
    plain = text(dag="orders_daily", approvers="dave")
    assert check_approvals(loaded(plain), dave, "bob", HEAD, POLICY) == []  # without drain_dag: no owner needed


def test_the_drain_owners_approval_is_recorded_among_the_valid_ones() -> None:
    with_pete = decisions(raw("dave", "APPROVED", AT), raw("pete", "APPROVED", AT), raw("zed", "APPROVED", AT))
    change = ChangeReview(with_pete, "bob", HEAD)
    assert [r.login for r in valid_approvals(loaded(DRAIN), change, POLICY)] == ["dave", "pete"]
    assert latest_decisions([]) == {}


def test_a_drain_no_owner_approves_is_a_warning_at_validate() -> None:
    unowned = Policy(drain_dags=("orders_*",))
    found = [(d.message, d.hint, d.is_error) for d in check_spec(loaded(DRAIN), unowned, datetime.now(UTC))]
    assert (
        "drain_dag: no downstream system of the policy lists DAG orders_daily in its dags with owners: nobody but "
        "the spec's approvers approves holding back its scheduled runs",
        "list orders_daily in the `dags` of the systems it loads (with their owners) in the policy, so their owners "
        "approve the drain",
        False,
    ) in found
    owned = [d.message for d in check_spec(loaded(DRAIN), POLICY, datetime.now(UTC))]
    assert not [m for m in owned if "no downstream system" in m]


DRAIN_GATE = {"loaded": {"s": loaded(DRAIN)}}
NO_EVIDENCE = (
    f"no reviewed pull request for this change: {PATH} has no evidence of a reviewed pull request (a drain_dag spec "
    "needs a reviewed merge its DAG's downstream owners approved); re-run the reconcile of the merge that carried "
    "it, or `backfillctl reconcile --evidence FILE` with the evidence of that change (`backfillctl evidence needed` "
    "lists the commits; docs/ci-trust.md)"
)


def test_at_reconcile_a_drain_without_its_owners_approval_is_refused() -> None:
    dave = carried(evidence(forge_review("dave")), policy=POLICY)
    found = decided(gate(dave, **DRAIN_GATE))
    assert found is not None
    assert found[0] is Verdict.REFUSED
    refused = "approval gate at reconcile: the approvals of #41 are not there: "
    assert found[1] == refused + NOT_APPROVED.split(": ", 2)[2]
    olga = carried(evidence(forge_review("dave"), forge_review("olga")), policy=POLICY)
    assert decided(gate(olga, **DRAIN_GATE)) == (Verdict.APPROVED, "")


def test_a_drain_without_evidence_is_gated_as_a_restart_of_work() -> None:
    assert decided(gate(**DRAIN_GATE)) == (Verdict.UNREVIEWED, NO_EVIDENCE)
    plain = {"loaded": {"s": loaded(text(dag="orders_daily", approvers="dave"))}}
    assert decided(gate(**plain)) is None  # a spec without drain_dag goes on, approval not recorded
    assert decided(gate(**DRAIN_GATE, changed=frozenset())) is None  # decided at the commit it was reconciled
    required = decided(gate(**DRAIN_GATE, require=True))
    assert required is not None
    assert "(the policy requires a reviewed merge)" in required[1]


def test_a_drain_pushed_without_a_pull_request_is_unreviewed() -> None:
    pushed = carried(Evidence("github", MERGE, None, (), "push.json"), policy=POLICY)
    (decision,) = assess(gate(pushed, **DRAIN_GATE)).values()
    assert (decision.verdict, decision.direct) == (Verdict.UNREVIEWED, True)
    assert decision.reason.startswith(
        f"no reviewed pull request for this change: {PATH} in commit {MERGE[:12]} was pushed without a pull request "
        "(a drain_dag spec needs a reviewed merge its DAG's downstream owners approved)"
    )
    plain = replace(gate(pushed), loaded={"s": loaded(text(dag="orders_daily", approvers="dave"))})
    (flagged,) = assess(plain).values()
    assert flagged.verdict is Verdict.PUSHED  # a spec without drain_dag goes on, flagged
