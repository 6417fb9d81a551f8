"""The approval gate and separation of duties (pure).

Reviews are what GitHub's "list reviews for a pull request" endpoint returns. For each login, the latest
review that decides anything counts: APPROVED, CHANGES_REQUESTED or DISMISSED (a COMMENTED review
neither grants nor revokes an approval, as on GitHub). With a head SHA, only approvals of that commit
count. Nobody approves their own pull request, and nobody approves a spec they authored. An approval counts only
from a reviewer with write access: the `permission` the workflow adds to each review (GitHub's
`collaborators/LOGIN/permission`) is write, maintain or admin; without one, only the repository's OWNER counts.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.core.checks.loaded import LoadedSpec
from controller.core.documents.diagnostics import Diagnostic, Location
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


def parse_reviews(data: Any, source: str) -> tuple[list[Review], list[Diagnostic]]:
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


def _review_id(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _permission(value: Any) -> str | None:
    return str(value).lower() if isinstance(value, str) and value else None


def latest_decisions(reviews: Iterable[Review]) -> dict[str, Review]:
    latest: dict[str, Review] = {}
    for review in sorted(reviews, key=lambda r: (r.submitted_at, r.order)):
        if review.state in DECISIVE:
            latest[review.login] = review
    return latest


def check_approvals(
    item: LoadedSpec, decisions: Mapping[str, Review], pr_author: str | None, head_sha: str | None, policy: Policy
) -> list[Diagnostic]:
    spec, found = item.spec, []
    approved = 0
    for index, login in enumerate(spec.approvers):
        problem = _approval_problem(login, decisions.get(login), pr_author, head_sha)
        if problem is None:
            approved += 1
        else:
            found.append(Diagnostic(item.doc.locate(("approvers", index)), f"{spec.name}: {problem[0]}", problem[1]))
    found += _owner_approvals(item, decisions, pr_author, head_sha, policy)
    needed = _needed(item, policy)
    if approved < needed:
        found.append(
            Diagnostic(
                item.doc.locate(("approvers",)),
                f"{spec.name}: {approved} of the {needed} approvals this spec needs are present",
                "every listed approver must approve the pull request in code review",
            )
        )
    return found


def valid_approvals(
    item: LoadedSpec, decisions: Mapping[str, Review], pr_author: str | None, policy: Policy
) -> list[Review]:
    """The approvals that count for the spec: of its approvers and its downstream systems' owners."""
    budgets = policy.budgets
    owners = [o for name in item.spec.downstream if name in budgets for o in budgets[name].owners]
    logins = dict.fromkeys([*item.spec.approvers, *owners])
    return [decisions[lo] for lo in logins if _approval_problem(lo, decisions.get(lo), pr_author, None) is None]


def _owner_approvals(
    item: LoadedSpec, decisions: Mapping[str, Review], pr_author: str | None, head_sha: str | None, policy: Policy
) -> list[Diagnostic]:
    """Each downstream system with owners needs a valid approval from one of them."""
    found, budgets = [], policy.budgets
    for index, name in enumerate(item.spec.downstream):
        owners = budgets[name].owners if name in budgets else ()
        if not owners or any(_approval_problem(o, decisions.get(o), pr_author, head_sha) is None for o in owners):
            continue
        who = ", ".join(owners)
        ignored = "".join(f"; {why[0]}" for o in owners if (why := _ignored(decisions.get(o))) is not None)
        found.append(
            Diagnostic(
                item.doc.locate(("downstream", index)),
                f"{item.spec.name}: the {name} budget's owners ({who}) have not approved the pull request{ignored}",
                f"ask one of {who} to approve it in code review: the backfill loads {name}",
            )
        )
    return found


def _approval_problem(
    login: str, review: Review | None, pr_author: str | None, head_sha: str | None
) -> tuple[str, str] | None:
    if pr_author is not None and login.lower() == pr_author.lower():
        return f"{login!r} opened the pull request and cannot approve it", "ask another listed approver to review"
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
            f"{login!r} approved commit {review.commit_id[:12]}, not the pull request's head {head_sha[:12]}",
            f"the spec changed after the approval; ask {login} to approve again",
        )
    return None


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
    """Authors of the commits that added or changed the spec may not approve it."""
    found = []
    for email in sorted(set(emails)):
        login = login_of(email, policy)
        lowered = [a.lower() for a in item.spec.approvers]
        if login is not None and login.lower() in lowered:
            index = lowered.index(login.lower())
            found.append(
                Diagnostic(
                    item.doc.locate(("approvers", index)),
                    f"{item.spec.approvers[index]!r} authored a commit that added or changed this "
                    f"spec ({email}) and cannot approve it",
                    "separation of duties: ask another reviewer",
                )
            )
    return found
