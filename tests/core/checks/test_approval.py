"""The approval gate (pure): latest decisive review per login, by submission time; separation of duties."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core.checks.approval import (
    ChangeReview,
    Review,
    authored,
    check_approvals,
    check_authors,
    check_policy_review,
    forge_reviews,
    latest_decisions,
    listed_twice,
    login_of,
    parse_reviews,
    valid_approvals,
)
from controller.core.documents.diagnostics import Diagnostic, Location, Severity
from controller.core.model.evidence import ForgeReview, ReviewState
from controller.core.model.policy import Policy, Rule
from tests.core.specs import loaded, text

HEAD = "a" * 40
OLD = "b" * 40
FINANCE = Policy(
    author_logins=(("alice@example.com", "alice"),),
    rules=(Rule(("finance_*",), min_approvers=1, min_approvers_for_completed=2),),
)


def raw(login: str, state: str, at: str, commit: str = HEAD) -> dict[str, Any]:
    return {"user": {"login": login}, "state": state, "commit_id": commit, "submitted_at": at, "permission": "write"}


def decisions(*reviews: dict[str, Any]) -> dict[str, Review]:
    parsed, problems = parse_reviews(list(reviews), "reviews.json")
    assert problems == []
    return latest_decisions(parsed)


def messages(
    item_text: str, found: dict[str, Review], author: str | None = "bob", head: str | None = HEAD
) -> list[str]:
    return [d.text() for d in check_approvals(loaded(item_text), found, author, head, FINANCE)]


def test_parse_reviews_keeps_order_uppercases_state_and_tolerates_missing_fields() -> None:
    reviews, problems = parse_reviews(
        [
            {"user": {"login": "dave"}, "state": "approved", "commit_id": None},
            {"user": {"login": 7}, "state": "COMMENTED", "commit_id": HEAD, "submitted_at": "2026-01-01T00:00:00Z"},
        ],
        "r.json",
    )
    assert problems == []
    assert reviews == [
        Review("dave", "APPROVED", "", "", 0),
        Review("7", "COMMENTED", HEAD, "2026-01-01T00:00:00Z", 1),
    ]


def test_parse_reviews_refuses_what_is_not_github_output() -> None:
    assert parse_reviews({"reviews": []}, "r.json") == (
        [],
        [
            Diagnostic(
                Location("r.json", 1, 1),
                "the reviews file must be a JSON list of reviews",
                "save the output of `gh api repos/OWNER/REPO/pulls/N/reviews`",
            )
        ],
    )
    reviews, problems = parse_reviews([raw("dave", "APPROVED", "t"), {"state": "APPROVED"}, {"user": None}], "r.json")
    assert [r.login for r in reviews] == ["dave"]
    assert problems == [
        Diagnostic(
            Location("r.json", 1, 1, (index,)),
            "a review without user.login or state",
            "pass the unmodified JSON from GitHub's reviews endpoint",
        )
        for index in (1, 2)
    ]


def test_the_latest_review_by_submission_time_decides_not_the_list_order() -> None:
    later_approval = decisions(
        raw("erin", "APPROVED", "2026-11-29T10:05:00Z"), raw("erin", "CHANGES_REQUESTED", "2026-11-29T10:00:00Z")
    )
    assert later_approval["erin"].state == "APPROVED"
    later_refusal = decisions(
        raw("erin", "CHANGES_REQUESTED", "2026-11-29T10:05:00Z"), raw("erin", "APPROVED", "2026-11-29T10:00:00Z")
    )
    assert later_refusal["erin"].state == "CHANGES_REQUESTED"
    same_time = decisions(
        raw("erin", "DISMISSED", "2026-11-29T10:00:00Z"), raw("erin", "APPROVED", "2026-11-29T10:00:00Z")
    )
    assert same_time["erin"].state == "APPROVED"  # equal times: the list order breaks the tie


def test_commented_reviews_neither_grant_nor_revoke() -> None:
    found = decisions(raw("erin", "APPROVED", "2026-11-29T10:00:00Z"), raw("erin", "COMMENTED", "2026-11-29T10:05:00Z"))
    assert {k: v.state for k, v in found.items()} == {"erin": "APPROVED"}
    assert decisions(raw("carol", "COMMENTED", "2026-11-29T10:00:00Z")) == {}
    assert decisions(raw("carol", "PENDING", "2026-11-29T10:00:00Z")) == {}


def test_an_approved_spec_passes() -> None:
    found = decisions(raw("dave", "APPROVED", "2026-11-29T10:00:00Z"))
    assert messages(text(), found) == []
    assert messages(text(), found, author=None, head=None) == []


@pytest.mark.parametrize("author", ["dave", "Dave", "DAVE"])
def test_the_pull_request_author_cannot_approve_in_any_letter_case(author: str) -> None:
    found = decisions(raw("dave", "APPROVED", "2026-11-29T10:00:00Z"))
    hints = [d.hint for d in check_approvals(loaded(text()), found, author, HEAD, FINANCE)]
    assert hints[0] == "ask another listed approver to review"
    assert messages(text(), found, author=author) == [
        "specs/s.yaml:11:13: $.approvers[0]: s: 'dave' opened the pull request and cannot approve it",
        "specs/s.yaml:11:12: $.approvers: s: 0 of the 1 approvals this spec needs are present",
    ]


def test_each_missing_approval_is_named() -> None:
    found = decisions(
        raw("erin", "CHANGES_REQUESTED", "2026-11-29T10:00:00Z"), raw("frank", "APPROVED", "2026-11-29T10:00:00Z", OLD)
    )
    assert messages(text(approvers="dave, erin, frank"), found) == [
        "specs/s.yaml:11:13: $.approvers[0]: s: 'dave' has not approved the pull request",
        "specs/s.yaml:11:19: $.approvers[1]: s: 'erin' has not approved the pull request (latest review: "
        "CHANGES_REQUESTED)",
        "specs/s.yaml:11:25: $.approvers[2]: s: 'frank' approved commit bbbbbbbbbbbb, not the pull request's head "
        "aaaaaaaaaaaa",
        "specs/s.yaml:11:12: $.approvers: s: 0 of the 1 approvals this spec needs are present",
    ]
    hints = [d.hint for d in check_approvals(loaded(text(approvers="dave, erin, frank")), found, "bob", HEAD, FINANCE)]
    assert hints == [
        "ask dave to approve it in code review",
        "ask erin for a new approval",
        "the spec changed after the approval; ask frank to approve again",
        "every listed approver must approve the pull request in code review",
    ]
    assert messages(text(approvers="frank"), found, head=None) == []  # without a head SHA any commit counts


def test_completed_reprocessing_needs_the_rules_second_approval() -> None:
    spec = text(dag="finance_ledger", reprocess="completed", approvers="dave, erin")
    one = decisions(raw("dave", "APPROVED", "2026-11-29T10:00:00Z"))
    assert (
        messages(spec, one)[-1]
        == "specs/s.yaml:11:12: $.approvers: s: 1 of the 2 approvals this spec needs are present"
    )
    failed = text(dag="finance_ledger", reprocess="failed", approvers="dave, erin")
    assert messages(failed, one) == ["specs/s.yaml:11:19: $.approvers[1]: s: 'erin' has not approved the pull request"]
    other = text(dag="orders", reprocess="completed", approvers="dave, erin")
    assert messages(other, one) == ["specs/s.yaml:11:19: $.approvers[1]: s: 'erin' has not approved the pull request"]


def test_login_of_a_git_author() -> None:
    assert login_of("Alice@Example.com", FINANCE) == "alice"
    assert login_of("12345+octo-cat@users.noreply.github.com", FINANCE) == "octo-cat"
    assert login_of("octocat@users.noreply.github.com", FINANCE) == "octocat"
    assert login_of("octocat@users.noreply.github.com.evil", FINANCE) is None
    assert login_of("x+octocat@users.noreply.github.com", FINANCE) is None
    assert login_of("mallory@example.com", FINANCE) is None


def test_authors_of_the_spec_cannot_approve_it_in_any_letter_case() -> None:
    item = loaded(text(approvers="dave, Alice"))
    found = check_authors(item, ["alice@example.com", "alice@example.com", "bob@example.com"], FINANCE)
    assert found == [
        Diagnostic(
            Location("specs/s.yaml", 11, 19, ("approvers", 1)),
            "'Alice' authored a commit that added or changed this spec (alice@example.com) and cannot approve it",
            "separation of duties: ask another reviewer",
        )
    ]
    assert check_authors(item, ["42+DAVE@users.noreply.github.com"], FINANCE)[0].location.path == ("approvers", 0)
    assert check_authors(item, ["carol@example.com"], FINANCE) == []


def test_every_approval_counts_towards_the_rules_minimum() -> None:
    policy = Policy(rules=(Rule(("orders*",), min_approvers=2),))
    both = decisions(raw("dave", "APPROVED", "2026-11-29T10:00:00Z"), raw("erin", "APPROVED", "2026-11-29T10:00:00Z"))
    item = loaded(text(approvers="dave, erin"))
    assert check_approvals(item, both, "bob", HEAD, policy) == []
    one = decisions(raw("dave", "APPROVED", "2026-11-29T10:00:00Z"))
    assert [d.message for d in check_approvals(item, one, "bob", HEAD, policy)] == [
        "s: 'erin' has not approved the pull request",
        "s: 1 of the 2 approvals this spec needs are present",
    ]


def test_owners_of_a_downstream_system_must_approve() -> None:
    from controller.core.model.guards import Budget  # noqa: PLC0415

    policy = Policy(downstream=(Budget("warehouse", 8, ("wh-oncall", "wh-lead")), Budget("api", 2)))
    body = text(approvers="dave") + "downstream: [api, warehouse]\n"
    unbudgeted = text(approvers="dave") + "downstream: [lake]\n"  # validate refuses it; the gate has nobody to ask
    approved_by_dave = decisions(raw("dave", "APPROVED", "2026-01-01T00:00:00Z"))
    found = [(d.text(), d.hint) for d in check_approvals(loaded(body), approved_by_dave, "bob", HEAD, policy)]
    assert found == [
        (
            "specs/s.yaml:12:19: $.downstream[1]: s: the warehouse budget's owners (wh-oncall, wh-lead) have not "
            "approved the pull request",
            "ask one of wh-oncall, wh-lead to approve it in code review: the backfill loads warehouse",
        )
    ]
    stale = decisions(
        raw("dave", "APPROVED", "2026-01-01T00:00:00Z"), raw("wh-lead", "APPROVED", "2026-01-01T00:00:01Z", OLD)
    )
    assert len(check_approvals(loaded(body), stale, "bob", HEAD, policy)) == 1  # an approval of an old commit
    own_pr = decisions(
        raw("dave", "APPROVED", "2026-01-01T00:00:00Z"), raw("wh-lead", "APPROVED", "2026-01-01T00:00:01Z")
    )
    assert len(check_approvals(loaded(body), own_pr, "wh-lead", HEAD, policy)) == 1  # nobody approves their own PR
    assert check_approvals(loaded(body), own_pr, "bob", HEAD, policy) == []
    assert check_approvals(loaded(unbudgeted), approved_by_dave, "bob", HEAD, policy) == []


IGNORED = "specs/s.yaml:11:13: $.approvers[0]: s: 'dave' approved, but the review is ignored: "
NOT_OWNER = "the reviews file has no repository permission for them and their author_association is {}, not OWNER"


@pytest.mark.parametrize(
    ("fields", "ignored"),
    [
        ({"permission": "write"}, None),
        ({"permission": "maintain"}, None),
        ({"permission": "ADMIN", "author_association": "NONE"}, None),  # the permission decides, not the association
        ({"permission": "triage"}, "their permission on the repository is 'triage' (write, maintain or admin needed)"),
        (
            {"permission": "read", "author_association": "OWNER"},
            "their permission on the repository is 'read' (write, maintain or admin needed)",
        ),
        ({"permission": "none"}, "their permission on the repository is 'none' (write, maintain or admin needed)"),
        (
            {"permission": "custom-role"},
            "their permission on the repository is 'custom-role' (write, maintain or admin needed)",
        ),
        ({"author_association": "OWNER"}, None),  # an older reviews file: only the owner is known to have write access
        ({"author_association": "owner", "permission": None}, None),
        ({"author_association": "MEMBER"}, NOT_OWNER.format("'MEMBER'")),
        ({"author_association": "COLLABORATOR"}, NOT_OWNER.format("'COLLABORATOR'")),
        ({"author_association": "NONE"}, NOT_OWNER.format("'NONE'")),
        ({"permission": ""}, NOT_OWNER.format("'missing'")),
        ({}, NOT_OWNER.format("'missing'")),
    ],
)
def test_only_reviewers_with_write_access_approve(fields: dict[str, Any], ignored: str | None) -> None:
    review = {k: v for k, v in raw("dave", "APPROVED", "2026-11-29T10:00:00Z").items() if k != "permission"}
    found = check_approvals(loaded(text()), decisions({**review, **fields}), "bob", HEAD, FINANCE)
    if ignored is None:
        assert found == []
        return
    assert [(d.text(), d.hint) for d in found] == [
        (
            IGNORED + ignored,
            "ask someone with write access to approve, or give dave write access"
            if fields.get("permission")
            else "the workflow step that writes the reviews file adds each reviewer's `permission` (gh api "
            "repos/OWNER/REPO/collaborators/LOGIN/permission); update it from this repository's backfill-pr.yml "
            "(docs/ci-trust.md)",
        ),
        (
            "specs/s.yaml:11:12: $.approvers: s: 0 of the 1 approvals this spec needs are present",
            "every listed approver must approve the pull request in code review",
        ),
    ]


def test_a_downstream_owner_without_write_access_does_not_approve() -> None:
    from controller.core.model.guards import Budget  # noqa: PLC0415

    policy = Policy(downstream=(Budget("warehouse", 8, ("wh-oncall",)),))
    body = text(approvers="dave") + "downstream: [warehouse]\n"
    puppet = {**raw("wh-oncall", "APPROVED", "2026-01-01T00:00:01Z"), "permission": "read"}
    found = check_approvals(
        loaded(body), decisions(raw("dave", "APPROVED", "2026-01-01T00:00:00Z"), puppet), "bob", HEAD, policy
    )
    assert [d.message for d in found] == [
        "s: the warehouse budget's owners (wh-oncall) have not approved the pull request; 'wh-oncall' approved, but "
        "the review is ignored: their permission on the repository is 'read' (write, maintain or admin needed)"
    ]


# --- one rule set for PR time and reconcile: null reviewers, authors, owners, letter case ------------------------


def test_a_review_without_a_reviewer_is_skipped_with_a_warning_and_review_ids_are_read() -> None:
    ghost = {"user": None, "state": "APPROVED", "commit_id": HEAD, "submitted_at": "t"}
    reviews, problems = parse_reviews(
        [ghost, {**raw("dave", "APPROVED", "t"), "id": 7}, {**raw("erin", "APPROVED", "t"), "id": True}, ghost],
        "r.json",
    )
    assert [(r.login, r.review_id, r.order) for r in reviews] == [("dave", 7, 1), ("erin", None, 2)]
    assert problems == [
        Diagnostic(
            Location("r.json", 1, 1, (index,)),
            "a review without a reviewer (GitHub names none for a deleted account) is skipped",
            None,
            Severity.WARNING,
        )
        for index in (0, 3)
    ]
    assert parse_reviews([{**raw("x", "APPROVED", "t"), "id": "7"}], "r.json")[0][0].review_id is None
    assert parse_reviews([{"user": None}], "r.json")[1][0].message == "a review without user.login or state"


def test_an_evidence_documents_reviews_keep_their_order_association_and_ids() -> None:
    reviews = (
        ForgeReview(1, "dave", ReviewState.CHANGES_REQUESTED, HEAD, "write", "2026-01-01T00:00:00Z", "OWNER"),
        ForgeReview(None, "Dave", ReviewState.APPROVED, HEAD, None, "2026-01-01T00:00:00Z"),
    )
    assert forge_reviews(reviews) == [
        Review("dave", "CHANGES_REQUESTED", HEAD, "2026-01-01T00:00:00Z", 0, "OWNER", "write", 1),
        Review("Dave", "APPROVED", HEAD, "2026-01-01T00:00:00Z", 1, "", None, None),
    ]
    assert latest_decisions(forge_reviews(reviews))["dave"].login == "Dave"  # one person, the later review


def test_an_approval_of_no_known_commit_names_none() -> None:
    found = decisions(raw("dave", "APPROVED", "2026-11-29T10:00:00Z", commit=""))
    assert messages(text(), found)[0] == (
        f"specs/s.yaml:11:13: $.approvers[0]: s: 'dave' approved commit (none), not the pull request's head {HEAD[:12]}"
    )


def test_every_owner_who_authored_a_commit_leaves_nobody_to_approve() -> None:
    from controller.core.model.guards import Budget  # noqa: PLC0415

    policy = Policy(downstream=(Budget("warehouse", 8, ("wh-oncall", "WH-Lead")), Budget("api", 2)))
    item = loaded(text(approvers="dave") + "downstream: [api, warehouse, lake]\n")
    both = ["wh-oncall@users.noreply.github.com", "wh-lead@users.noreply.github.com"]
    assert check_authors(item, both, policy) == [
        Diagnostic(
            Location("specs/s.yaml", 12, 19, ("downstream", 1)),
            "every owner of the warehouse budget (wh-oncall, WH-Lead) authored a commit that added or changed this "
            "spec: none of them can approve it",
            "separation of duties: another owner of warehouse must approve, or someone else makes the commits",
        )
    ]
    assert check_authors(item, both[:1], policy) == []  # another owner can still approve
    assert check_authors(item, both, Policy()) == []  # no owners: nobody to ask


def test_an_owner_who_authored_a_commit_does_not_approve_and_is_named() -> None:
    from controller.core.model.guards import Budget  # noqa: PLC0415

    policy = Policy(downstream=(Budget("warehouse", 8, ("olga", "pete")),))
    item = loaded(text(approvers="dave") + "downstream: [warehouse]\n")
    found = decisions(raw("dave", "APPROVED", "t"), raw("olga", "APPROVED", "t"), raw("pete", "APPROVED", "t", OLD))
    authors = authored(["olga@users.noreply.github.com"], policy)
    assert authors == {"olga": "olga@users.noreply.github.com"}
    assert [d.message for d in check_approvals(item, found, "bob", HEAD, policy, authors=authors)] == [
        "s: the warehouse budget's owners (olga, pete) have not approved the pull request; 'olga' authored a commit "
        "that added or changed this spec (olga@users.noreply.github.com) and cannot approve it"
    ]
    change = ChangeReview(found, "bob", HEAD, authors)
    assert [r.login for r in valid_approvals(item, change, policy)] == ["dave"]
    assert [r.login for r in change.approvals()] == ["dave"]
    assert change.problem("pete") == (
        f"'pete' approved commit {OLD[:12]}, not the pull request's head {HEAD[:12]}",
        "the spec changed after the approval; ask pete to approve again",
    )


def test_an_approver_listed_twice_in_another_case_counts_once() -> None:
    policy = Policy(rules=(Rule(("orders*",), min_approvers=2),))
    item = loaded(text(approvers="dave, Dave"))
    found = decisions(raw("DAVE", "APPROVED", "t"))
    assert [d.message for d in check_approvals(item, found, "bob", HEAD, policy)] == [
        "s: 1 of the 2 approvals this spec needs are present"
    ]
    assert listed_twice(item) == [
        Diagnostic(
            Location("specs/s.yaml", 11, 19, ("approvers", 1)),
            "'Dave' is listed twice ('dave'): GitHub logins ignore letter case",
            "list each approver once",
        )
    ]
    assert listed_twice(loaded(text(approvers="dave, erin"))) == []


def test_a_policy_says_whether_a_reviewed_merge_is_required() -> None:
    from controller.core.documents.yamlsafe import load_document  # noqa: PLC0415

    doc, _ = load_document("specs/policy.yaml", b"version: 1\n")
    assert doc is not None
    assert check_policy_review(Policy(), doc) == [
        Diagnostic(
            Location("specs/policy.yaml", 1, 1),
            "require_reviewed_merge is not set: reconcile starts a change pushed without a reviewed pull request "
            "(only the evidence it is given is checked)",
            "set `require_reviewed_merge: true` (or false, to keep today's behaviour and silence this warning)",
            Severity.WARNING,
        )
    ]
    assert check_policy_review(Policy(require_reviewed_merge=False), doc) == []
    assert check_policy_review(Policy(require_reviewed_merge=True), doc) == []


def test_every_owner_whose_approval_does_not_count_is_named() -> None:
    from controller.core.model.guards import Budget  # noqa: PLC0415

    policy = Policy(downstream=(Budget("warehouse", 8, ("olga", "pete")),))
    item = loaded(text(approvers="dave") + "downstream: [warehouse]\n")
    found = decisions(raw("dave", "APPROVED", "t"), {**raw("pete", "APPROVED", "t"), "permission": "read"})
    authors = authored(["olga@users.noreply.github.com"], policy)
    assert [d.message for d in check_approvals(item, found, "bob", HEAD, policy, authors=authors)] == [
        "s: the warehouse budget's owners (olga, pete) have not approved the pull request; 'olga' authored a commit "
        "that added or changed this spec (olga@users.noreply.github.com) and cannot approve it; 'pete' approved, but "
        "the review is ignored: their permission on the repository is 'read' (write, maintain or admin needed)"
    ]
