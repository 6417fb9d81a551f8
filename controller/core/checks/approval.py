"""The approval gate and separation of duties (pure): one rule set, applied by `validate` to a pull request and by
reconcile to a merged change (`core/plan/provenance.py`).

Reviews are what GitHub's "list reviews for a pull request" endpoint returns, or an evidence document's (one value,
`Review`, either way). For each reviewer, the latest review that decides anything counts: APPROVED,
CHANGES_REQUESTED or DISMISSED (a COMMENTED review neither grants nor revokes an approval, as on GitHub). With a head
SHA, only approvals of that commit count. Nobody approves their own pull request, and nobody approves a spec a commit
of theirs in the pull request added or changed (the spec's approvers and its downstream systems' owners alike). An
approval counts only from a reviewer with write access: the `permission` the workflow adds to each review (GitHub's
`collaborators/LOGIN/permission`) is write, maintain or admin; without one, only the repository's OWNER counts.
GitHub's logins are case-insensitive, and so is every comparison here.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from controller.core.checks.drain import drain_approvals, drain_owners
from controller.core.checks.loaded import LoadedSpec
from controller.core.documents.diagnostics import Diagnostic, Location, Severity
from controller.core.documents.yamlsafe import Document
from controller.core.model.evidence import ForgeReview
from controller.core.model.logins import login_key, same_login
from controller.core.model.policy import Policy
from controller.core.model.spec import ReprocessBehavior

DECISIVE = frozenset({"APPROVED", "CHANGES_REQUESTED", "DISMISSED"})
# GitHub counts only reviews from users with write access towards required reviews; so does the gate
WRITE_ACCESS = frozenset({"admin", "maintain", "write"})
PERMISSION_HINT = (
    "the workflow step that writes the reviews file adds each reviewer's `permission` (gh api "
    "repos/OWNER/REPO/collaborators/LOGIN/permission); update it from this repository's backfill-pr.yml "
    "(docs/ci-trust.md)"
)
NO_REVIEWER = "a review without a reviewer (GitHub names none for a deleted account) is skipped"
_NOREPLY = re.compile(r"^(?:\d+\+)?([A-Za-z0-9-]+)@users\.noreply\.github\.com$")


@dataclass(frozen=True, slots=True)
class Review:
    login: str
    state: str
    commit_id: str
    submitted_at: str
    order: int
    association: str = ""  # GitHub's author_association: OWNER, MEMBER, COLLABORATOR, CONTRIBUTOR, NONE, …
    permission: str | None = None  # the reviewer's repository permission, when the workflow recorded it
    review_id: int | None = None  # GitHub's id of the review (the change record names it)


@dataclass(frozen=True, slots=True)
class ChangeReview:
    """What a change is judged by: its reviewers' latest decisions (`latest_decisions`), who opened it, the commit
    approvals must be on (None: any), and who authored its commits that touched the spec (login key → e-mail)."""

    decisions: Mapping[str, Review]
    pr_author: str | None
    head_sha: str | None
    authors: Mapping[str, str] = field(default_factory=dict)

    def problem(self, login: str) -> tuple[str, str] | None:
        """Why `login`'s approval does not count (message, hint), or None: it counts."""
        return _approval_problem(login, self.decisions.get(login_key(login)), self)

    def counts(self, login: str) -> bool:
        return self.problem(login) is None

    def approvals(self) -> list[Review]:
        """Every approval that counts, whoever gave it."""
        return [r for r in self.decisions.values() if self.counts(r.login)]


def parse_reviews(data: Any, source: str) -> tuple[list[Review], list[Diagnostic]]:
    """The reviews of GitHub's reviews endpoint; a review without a reviewer is skipped with a warning."""
    if not isinstance(data, list):
        return [], [
            Diagnostic(
                Location(source, 1, 1),
                "the reviews file must be a JSON list of reviews",
                "save the output of `gh api repos/OWNER/REPO/pulls/N/reviews`",
            )
        ]
    reviews, problems = [], []
    for index, raw in enumerate(data):
        if isinstance(raw, dict) and "user" in raw and raw["user"] is None and "state" in raw:
            problems.append(Diagnostic(Location(source, 1, 1, (index,)), NO_REVIEWER, None, Severity.WARNING))
            continue
        try:
            reviews.append(
                Review(
                    str(raw["user"]["login"]),
                    str(raw["state"]).upper(),
                    str(raw.get("commit_id") or ""),
                    str(raw.get("submitted_at") or ""),
                    index,
                    str(raw.get("author_association") or "").upper(),
                    _permission(raw.get("permission")),
                    _review_id(raw.get("id")),
                )
            )
        except (KeyError, TypeError):
            problems.append(
                Diagnostic(
                    Location(source, 1, 1, (index,)),
                    "a review without user.login or state",
                    "pass the unmodified JSON from GitHub's reviews endpoint",
                )
            )
    return reviews, problems


def forge_reviews(reviews: Sequence[ForgeReview]) -> list[Review]:
    """An evidence document's reviews, in its order."""
    return [
        Review(r.reviewer, r.state.value.upper(), r.commit, r.submitted_at, i, r.association, r.permission, r.review_id)
        for i, r in enumerate(reviews)
    ]


def _review_id(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _permission(value: Any) -> str | None:
    return str(value).lower() if isinstance(value, str) and value else None


def latest_decisions(reviews: Iterable[Review]) -> dict[str, Review]:
    """Login key → the reviewer's latest decisive review."""
    latest: dict[str, Review] = {}
    for review in sorted(reviews, key=lambda r: (r.submitted_at, r.order)):
        if review.state in DECISIVE:
            latest[login_key(review.login)] = review
    return latest


def authored(emails: Iterable[str], policy: Policy) -> dict[str, str]:
    """Login key → e-mail, of the commit authors whose login is known (`login_of`)."""
    found: dict[str, str] = {}
    for email in sorted(set(emails)):
        login = login_of(email, policy)
        if login is not None:
            found.setdefault(login_key(login), email)
    return found


def check_approvals(
    item: LoadedSpec,
    decisions: Mapping[str, Review],
    pr_author: str | None,
    head_sha: str | None,
    policy: Policy,
    *,
    authors: Mapping[str, str] | None = None,
) -> list[Diagnostic]:
    """Every listed approver approved, the rule's minimum is met, one owner of each downstream system approved, and
    with `drain_dag` one owner of each system the DAG loads; `authors` (login key → e-mail): the authors of the
    change's commits that touched the spec."""
    change = ChangeReview(decisions, pr_author, head_sha, authors or {})
    spec, found = item.spec, []
    approvers: set[str] = set()  # each person once, whatever the letter case they are listed in
    for index, login in enumerate(spec.approvers):
        problem = change.problem(login)
        if problem is None:
            approvers.add(login_key(login))
        else:
            found.append(Diagnostic(item.doc.locate(("approvers", index)), f"{spec.name}: {problem[0]}", problem[1]))
    found += _owner_approvals(item, change, policy)
    found += drain_approvals(item, policy, change.counts)
    needed, approved = _needed(item, policy), len(approvers)
    if approved < needed:
        found.append(
            Diagnostic(
                item.doc.locate(("approvers",)),
                f"{spec.name}: {approved} of the {needed} approvals this spec needs are present",
                "every listed approver must approve the pull request in code review",
            )
        )
    return found


def valid_approvals(item: LoadedSpec, change: ChangeReview, policy: Policy) -> list[Review]:
    """The approvals that count for the spec: of its approvers and its downstream systems' owners."""
    logins = dict.fromkeys(login_key(lo) for lo in (*item.spec.approvers, *owners_of(item, policy)))
    return [change.decisions[key] for key in logins if key in change.decisions and change.counts(key)]


def owners_of(item: LoadedSpec, policy: Policy) -> list[str]:
    """The owners of its downstream systems, and with `drain_dag` of the systems its DAG loads."""
    budgets = policy.budgets
    listed = [o for name in item.spec.downstream if name in budgets for o in budgets[name].owners]
    return listed + [o for _, owners in drain_owners(item.spec, policy) for o in owners]


def _owner_approvals(item: LoadedSpec, change: ChangeReview, policy: Policy) -> list[Diagnostic]:
    """Each downstream system with owners needs a valid approval from one of them."""
    found, budgets = [], policy.budgets
    for index, name in enumerate(item.spec.downstream):
        owners = budgets[name].owners if name in budgets else ()
        if not owners or any(change.counts(o) for o in owners):
            continue
        who = ", ".join(owners)
        why = "".join(f"; {reason[0]}" for o in owners if (reason := _discounted(o, change)) is not None)
        found.append(
            Diagnostic(
                item.doc.locate(("downstream", index)),
                f"{item.spec.name}: the {name} budget's owners ({who}) have not approved the pull request{why}",
                f"ask one of {who} to approve it in code review: the backfill loads {name}",
            )
        )
    return found


def _discounted(login: str, change: ChangeReview) -> tuple[str, str] | None:
    """Why an owner's approval does not count, when they gave one or authored a commit (None: they did neither)."""
    if login_key(login) in change.authors:
        return _author_problem(login, change.authors[login_key(login)])
    return _ignored(change.decisions.get(login_key(login)))


def _approval_problem(login: str, review: Review | None, change: ChangeReview) -> tuple[str, str] | None:
    """Separation of duties first (who may not approve at all), then the review itself."""
    if change.pr_author is not None and same_login(login, change.pr_author):
        return f"{login!r} opened the pull request and cannot approve it", "ask another listed approver to review"
    if login_key(login) in change.authors:
        return _author_problem(login, change.authors[login_key(login)])
    return _review_problem(login, review, change.head_sha)


def _review_problem(login: str, review: Review | None, head_sha: str | None) -> tuple[str, str] | None:
    if review is None:
        return f"{login!r} has not approved the pull request", f"ask {login} to approve it in code review"
    if review.state != "APPROVED":
        return (
            f"{login!r} has not approved the pull request (latest review: {review.state})",
            f"ask {login} for a new approval",
        )
    ignored = _ignored(review)
    if ignored is not None:
        return ignored
    if head_sha and review.commit_id != head_sha:
        return (
            f"{login!r} approved commit {review.commit_id[:12] or '(none)'}, not the pull request's head "
            f"{head_sha[:12]}",
            f"the spec changed after the approval; ask {login} to approve again",
        )
    return None


def _author_problem(login: str, email: str) -> tuple[str, str]:
    return (
        f"{login!r} authored a commit that added or changed this spec ({email}) and cannot approve it",
        "separation of duties: ask another reviewer",
    )


def _ignored(review: Review | None) -> tuple[str, str] | None:
    """Why an approval does not count: its reviewer has no write access, or it is unknown and they are not the
    OWNER (None: it counts, or there is no approval)."""
    if review is None or review.state != "APPROVED" or review.permission in WRITE_ACCESS:
        return None
    login = review.login
    if review.permission is not None:
        return (
            f"{login!r} approved, but the review is ignored: their permission on the repository is "
            f"{review.permission!r} (write, maintain or admin needed)",
            f"ask someone with write access to approve, or give {login} write access",
        )
    if review.association == "OWNER":
        return None
    return (
        f"{login!r} approved, but the review is ignored: the reviews file has no repository permission for them "
        f"and their author_association is {review.association or 'missing'!r}, not OWNER",
        PERMISSION_HINT,
    )


def _needed(item: LoadedSpec, policy: Policy) -> int:
    rule = policy.rule_for(item.spec.dag_id)
    needed = rule.min_approvers if rule else 1
    if rule and rule.min_approvers_for_completed and item.spec.reprocess_behavior is ReprocessBehavior.COMPLETED:
        needed = max(needed, rule.min_approvers_for_completed)
    return max(needed, 1)


def login_of(email: str, policy: Policy) -> str | None:
    """A git author's login: the policy's mapping, else GitHub's noreply address."""
    mapped = policy.login_for(email)
    if mapped is not None:
        return mapped
    match = _NOREPLY.match(email)
    return match.group(1) if match else None


def check_authors(item: LoadedSpec, emails: Sequence[str], policy: Policy) -> list[Diagnostic]:
    """Authors of the commits that added or changed the spec may not approve it: an approver who did is an error,
    and so is a downstream system whose every owner did (none of them can approve it)."""
    authors = authored(emails, policy)
    found = []
    for index, approver in enumerate(item.spec.approvers):
        if login_key(approver) in authors:
            message, hint = _author_problem(approver, authors[login_key(approver)])
            found.append(Diagnostic(item.doc.locate(("approvers", index)), message, hint))
    budgets = policy.budgets
    for index, name in enumerate(item.spec.downstream):
        owners = budgets[name].owners if name in budgets else ()
        if owners and all(login_key(o) in authors for o in owners):
            found.append(
                Diagnostic(
                    item.doc.locate(("downstream", index)),
                    f"every owner of the {name} budget ({', '.join(owners)}) authored a commit that added or changed "
                    "this spec: none of them can approve it",
                    f"separation of duties: another owner of {name} must approve, or someone else makes the commits",
                )
            )
    return found


def listed_twice(item: LoadedSpec) -> list[Diagnostic]:
    """An approver listed twice in another letter case is one person (who would count twice)."""
    keys = [login_key(a) for a in item.spec.approvers]
    return [
        Diagnostic(
            item.at("approvers", index),
            f"{item.spec.approvers[index]!r} is listed twice ({item.spec.approvers[keys.index(key)]!r}): GitHub "
            "logins ignore letter case",
            "list each approver once",
        )
        for index, key in enumerate(keys)
        if key in keys[:index]
    ]


def check_policy_review(policy: Policy, doc: Document) -> list[Diagnostic]:
    """A policy says whether reconcile refuses starts without a reviewed merge (`require_reviewed_merge`)."""
    if policy.require_reviewed_merge is not None:
        return []
    return [
        Diagnostic(
            doc.locate(()),
            "require_reviewed_merge is not set: reconcile starts a change pushed without a reviewed pull request "
            "(only the evidence it is given is checked)",
            "set `require_reviewed_merge: true` (or false, to keep today's behaviour and silence this warning)",
            Severity.WARNING,
        )
    ]
