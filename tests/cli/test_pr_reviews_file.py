"""`validate --pr-reviews FILE` reads what `gh api --paginate` saves: one array, one array per page, or pages."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from controller.cli import main
from controller.commands.reconcile.specfiles import REVIEWS_MAX_BYTES

SPEC = """version: 1
name: walk
dag_id: demo_daily
from_date: "2025-01-01"
to_date: "2025-01-03"
reprocess_behavior: none
max_active_runs: 2
ticket: CHG-1
reason: A backfill under review.
requested_by: alice
approvers: [bob]
"""
HINT = (
    "  hint: save the reviews with `gh api --paginate --slurp repos/OWNER/REPO/pulls/N/reviews` "
    "(a JSON array, one array per page, or an array of pages)\n"
)


def review(login: str, state: str, minute: int) -> dict[str, object]:
    return {
        "id": minute,
        "user": {"login": login},
        "state": state,
        "commit_id": "f" * 40,
        "submitted_at": f"2026-11-29T10:{minute:02d}:00Z",
        "author_association": "COLLABORATOR",
        "permission": "write",
    }


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", "specs")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "walk.yaml").write_text(SPEC)
    return tmp_path


def gate(capsys: pytest.CaptureFixture[str], text: str) -> tuple[int, str]:
    Path("reviews.json").write_text(text)
    code = main(["validate", "--pr-reviews", "reviews.json", "--pr-author", "alice", "--head-sha", "f" * 40])
    return code, capsys.readouterr().out


PAGE_1 = [review("carol", "COMMENTED", 1)]
PAGE_2 = [review("bob", "APPROVED", 2)]


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(json.dumps(PAGE_1) + json.dumps(PAGE_2), id="paginate, pages back to back"),
        pytest.param(json.dumps(PAGE_1) + "\n" + json.dumps(PAGE_2) + "\n", id="paginate --jq ., one page a line"),
        pytest.param(json.dumps(PAGE_1, indent=2) + "\n\n" + json.dumps(PAGE_2, indent=2), id="indented pages"),
        pytest.param(json.dumps([PAGE_1, PAGE_2]), id="paginate --slurp"),
        pytest.param(json.dumps([PAGE_1, PAGE_2, []]), id="slurp with an empty last page"),
        pytest.param(json.dumps(PAGE_1 + PAGE_2), id="one array"),
    ],
)
def test_every_shape_gh_saves_is_read(tree: Path, capsys: pytest.CaptureFixture[str], text: str) -> None:
    assert gate(capsys, text) == (0, "OK: 1 spec valid (1 file, 0 warnings).\n")


def test_pages_are_read_in_order_so_the_latest_review_wins(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    approved_then_not = [review("bob", "APPROVED", 1)], [review("bob", "CHANGES_REQUESTED", 2)]
    code, out = gate(capsys, "".join(map(json.dumps, approved_then_not)))
    assert code == 1
    assert (
        "specs/walk.yaml:11:13: $.approvers[0]: walk: 'bob' has not approved the pull request "
        "(latest review: CHANGES_REQUESTED)\n  hint: ask bob for a new approval\n"
    ) in out
    rejected_then_approved = [review("bob", "CHANGES_REQUESTED", 1)], [review("bob", "APPROVED", 2)]
    assert gate(capsys, "".join(map(json.dumps, rejected_then_approved)))[0] == 0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            json.dumps(PAGE_2) + "\n" + '{"message": "Not Found", "status": "404"}\n',
            "reviews.json:2:1: the reviews file must hold JSON arrays of reviews, found a JSON object here\n",
            id="an error object after a page",
        ),
        pytest.param(
            '{"message": "Bad credentials"}',
            "reviews.json:1:1: the reviews file must hold JSON arrays of reviews, found a JSON object here\n",
            id="an error object alone",
        ),
        pytest.param(
            '[{"user": {"login": "bob"},\n  "state": APPROVED}]',
            "reviews.json:2:12: the reviews file is not valid JSON: Expecting value\n",
            id="malformed JSON",
        ),
        pytest.param(
            json.dumps(PAGE_1) + "\n[{",
            "reviews.json:2:3: the reviews file is not valid JSON: Expecting property name enclosed in double quotes\n",
            id="a cut-off last page",
        ),
        pytest.param("\n \n", "reviews.json:1:1: the reviews file is empty\n", id="empty"),
    ],
)
def test_unreadable_reviews_are_located_errors(
    tree: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str
) -> None:
    assert gate(capsys, text) == (1, expected + HINT + "1 error, 0 warnings in 1 file.\n")


def test_validate_says_whose_approval_a_downstream_budget_still_needs(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tree / "specs" / "policy.yaml").write_text(
        "version: 1\nrequire_reviewed_merge: true\nscope: {dags: ['*']}\n"
        "downstream:\n  warehouse: {max_active_runs: 8, owners: [wh-oncall]}\n"
    )
    (tree / "specs" / "walk.yaml").write_text(SPEC + "downstream: [warehouse]\n")
    code, out = gate(capsys, json.dumps([review("bob", "APPROVED", 2)]))
    assert out == (
        "specs/walk.yaml:12:14: $.downstream[0]: walk: the warehouse budget's owners (wh-oncall) have not approved "
        "the pull request\n"
        "  hint: ask one of wh-oncall to approve it in code review: the backfill loads warehouse\n"
        "1 error, 0 warnings in 2 files including the policy specs/policy.yaml.\n"
    )
    assert code == 1
    code, out = gate(capsys, json.dumps([review("bob", "APPROVED", 2), review("wh-oncall", "APPROVED", 3)]))
    assert code == 0, out


def test_a_device_or_a_fifo_is_refused_without_reading_it(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """/dev/zero was read forever (the file was read whole); a FIFO blocked until a writer came."""
    os.mkfifo("reviews.fifo")
    for path in ("/dev/zero", "reviews.fifo"):
        assert main(["validate", "--pr-reviews", path, "--pr-author", "alice"]) == 1
        assert capsys.readouterr().out == (
            f"{path}:1:1: cannot read the reviews file: not a regular file\n"
            + HINT
            + "1 error, 0 warnings in 1 file.\n"
        )


def test_a_reviews_file_over_the_bound_is_refused_before_it_is_parsed(
    tree: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = gate(capsys, json.dumps(PAGE_2) + " " * REVIEWS_MAX_BYTES)
    assert (code, out) == (
        1,
        "reviews.json:1:1: the reviews file is over 16777216 bytes (16 MiB); is this the right file?\n"
        + HINT
        + "1 error, 0 warnings in 1 file.\n",
    )
    assert gate(capsys, json.dumps(PAGE_2).ljust(REVIEWS_MAX_BYTES))[0] == 0  # exactly at the bound is read


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        pytest.param(
            json.dumps(PAGE_2) + "\n" + "[" * 100_000 + "]" * 100_000,
            "reviews.json:2:1: the reviews file nests arrays or objects too deeply to read as JSON\n",
            id="deep",
        ),
        pytest.param(
            '[{"id": ' + "9" * 5000 + "}]",
            "reviews.json:1:1: the reviews file holds a number too long to read as JSON\n",
            id="5000 digits",
        ),
    ],
)
def test_json_python_cannot_read_is_a_located_error(
    tree: Path, capsys: pytest.CaptureFixture[str], text: str, expected: str
) -> None:
    """RecursionError and "Exceeds the limit (4300 digits)" once exited 3."""
    assert gate(capsys, text) == (1, expected + HINT + "1 error, 0 warnings in 1 file.\n")


def sock_puppet(**fields: object) -> str:
    """bob's approval without write access (a policy that does not restrict approvers lets the author name bob)."""
    entry = {k: v for k, v in review("bob", "APPROVED", 2).items() if k not in ("author_association", "permission")}
    return json.dumps([{**entry, **fields}])


@pytest.mark.parametrize(
    ("fields", "why", "hint"),
    [
        pytest.param(
            {"author_association": "NONE", "permission": "none"},
            "their permission on the repository is 'none' (write, maintain or admin needed)",
            "ask someone with write access to approve, or give bob write access",
            id="no access",
        ),
        pytest.param(
            {"author_association": "MEMBER", "permission": "read"},
            "their permission on the repository is 'read' (write, maintain or admin needed)",
            "ask someone with write access to approve, or give bob write access",
            id="a member who may only read",
        ),
        pytest.param(
            {"author_association": "NONE"},
            "the reviews file has no repository permission for them and their author_association is 'NONE', not OWNER",
            "the workflow step that writes the reviews file adds each reviewer's `permission` (gh api "
            "repos/OWNER/REPO/collaborators/LOGIN/permission); update it from this repository's backfill-pr.yml "
            "(docs/ci-trust.md)",
            id="an older reviews file",
        ),
    ],
)
def test_an_approval_without_write_access_is_ignored_and_says_why(
    tree: Path, capsys: pytest.CaptureFixture[str], fields: dict[str, object], why: str, hint: str
) -> None:
    assert gate(capsys, sock_puppet(**fields)) == (
        1,
        "specs/walk.yaml:11:12: $.approvers: walk: 0 of the 1 approvals this spec needs are present\n"
        "  hint: every listed approver must approve the pull request in code review\n"
        f"specs/walk.yaml:11:13: $.approvers[0]: walk: 'bob' approved, but the review is ignored: {why}\n"
        f"  hint: {hint}\n"
        "2 errors, 0 warnings in 1 file.\n",
    )


def test_an_older_reviews_file_still_counts_the_owners_approval(tree: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert gate(capsys, sock_puppet(author_association="OWNER")) == (0, "OK: 1 spec valid (1 file, 0 warnings).\n")
    assert gate(capsys, sock_puppet(author_association="OWNER", permission="maintain"))[0] == 0
