"""validate --base / --pr-reviews on real temporary git repositories (never mocked)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.cli import main

SPEC = """version: 1
name: {name}
dag_id: {dag}
from_date: "2025-01-01"
to_date: "2025-01-07"
reprocess_behavior: {reprocess}
max_active_runs: 3
ticket: CHG-1
reason: A backfill under review.
requested_by: carol
approvers: [{approvers}]
"""
POLICY = """version: 1
require_reviewed_merge: false
scope: {dags: ['*']}
author_logins: {"alice@example.com": "alice", "bob@example.com": "bob"}
rules:
  - dags: ["finance_*"]
    approvers: [fin-lead, fin-platform, alice]
    min_approvers_for_completed: 2
"""
HINT = (
    "create a new spec; the applied backfill cannot be changed in place (only `state`, `promote`, `resume`, "
    "`acknowledged`, `execution`, `windows`, `notify`, `rehearsal`, `verify`, `publish`, `writes` and `rollback` may "
    "change)"
)


def git(repo: Path, *args: str, author: str = "alice") -> str:
    env = {
        "GIT_AUTHOR_NAME": author,
        "GIT_AUTHOR_EMAIL": f"{author}@example.com",
        "GIT_COMMITTER_NAME": author,
        "GIT_COMMITTER_EMAIL": f"{author}@example.com",
        "PATH": "/usr/bin:/bin",
        "HOME": str(repo),
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    return subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True).stdout.strip()


class Repo:
    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True)
        git(root, "init", "-q", "-b", "main")
        (root / "specs").mkdir()
        (root / "specs" / "policy.yaml").write_text(POLICY)

    def write(
        self, name: str, dag: str = "orders_daily", reprocess: str = "none", approvers: str = "dave", **replace: str
    ) -> Path:
        text = SPEC.format(name=name, dag=dag, reprocess=reprocess, approvers=approvers)
        for old, new in replace.items():
            text = text.replace(old.replace("__", " "), new)
        path = self.root / "specs" / f"{name}.yaml"
        path.write_text(text)
        return path

    def commit(self, message: str, author: str = "alice") -> str:
        git(self.root, "add", "-A")
        git(self.root, "commit", "-q", "-m", message, author=author)
        return git(self.root, "rev-parse", "HEAD")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Repo]:
    r = Repo(tmp_path / "repo")
    monkeypatch.chdir(r.root)
    monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", "specs")
    monkeypatch.setenv("GIT_ALLOW_PROTOCOL", "file")
    r.write("applied")
    r.commit("initial specs", author="carol")
    git(r.root, "checkout", "-q", "-b", "feature")
    return r


def validate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(["validate", *args])
    return code, capsys.readouterr().out


@pytest.mark.parametrize(
    ("field", "old", "new", "message"),
    [
        (
            "dag_id",
            "dag_id: orders_daily",
            "dag_id: orders_hourly",
            "dag_id changed from 'orders_daily' to 'orders_hourly'",
        ),
        (
            "from_date",
            'from_date: "2025-01-01"',
            'from_date: "2025-01-02"',
            "from_date changed from '2025-01-01T00:00:00Z' to '2025-01-02T00:00:00Z'",
        ),
        (
            "to_date",
            'to_date: "2025-01-07"',
            'to_date: "2025-01-08"',
            "to_date changed from '2025-01-07T00:00:00Z' to '2025-01-08T00:00:00Z'",
        ),
        (
            "reprocess_behavior",
            "reprocess_behavior: none",
            "reprocess_behavior: failed",
            "reprocess_behavior changed from 'none' to 'failed'",
        ),
        (
            "run_backwards",
            "approvers: [dave]",
            "approvers: [dave]\nrun_backwards: true",
            "run_backwards changed from False to True",
        ),
        (
            "dag_run_conf",
            "approvers: [dave]",
            "approvers: [dave]\ndag_run_conf: {full: true}",
            "dag_run_conf changed from unset to '{\"full\":true}'",
        ),
        (
            "run_on_latest_version",
            "approvers: [dave]",
            "approvers: [dave]\nrun_on_latest_version: true",
            "run_on_latest_version changed from unset to True",
        ),
    ],
)
def test_applied_fields_are_immutable(
    repo: Repo, capsys: pytest.CaptureFixture[str], field: str, old: str, new: str, message: str
) -> None:
    path = repo.root / "specs" / "applied.yaml"
    path.write_text(path.read_text().replace(old, new))
    code, out = validate(capsys, "--base", "main")
    assert code == 1
    line = next(line for line in out.splitlines() if "changed from" in line)
    assert line.endswith(f": {message} since main")
    assert line.startswith("specs/applied.yaml:")
    assert f"  hint: {HINT}\n" in out


def test_state_only_change_is_allowed(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    path = repo.root / "specs" / "applied.yaml"
    path.write_text(path.read_text() + "state: cancelled\n")
    assert validate(capsys, "--base", "main") == (
        0,
        "OK: 1 spec valid (2 files including the policy specs/policy.yaml, 0 warnings).\n",
    )


def test_rename_is_a_delete_plus_an_add(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    (repo.root / "specs" / "applied.yaml").unlink()
    repo.write("renamed")
    code, out = validate(capsys, "--base", "main")
    assert code == 0
    assert out.splitlines() == [
        "specs/applied.yaml:1:1: warning: spec 'applied' is deleted since main",
        "  hint: deleting a spec cancels nothing; set `state: cancelled` to stop its backfill",
        "OK: 1 spec valid (2 files including the policy specs/policy.yaml, 1 warning).",
    ]


def test_renamed_file_keeping_the_old_name_is_refused(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    old = repo.root / "specs" / "applied.yaml"
    old.rename(repo.root / "specs" / "moved.yaml")
    code, out = validate(capsys, "--base", "main")
    assert code == 1
    assert "specs/moved.yaml:2:7: $.name: name 'applied' does not match the file name 'moved'" in out


def test_author_of_the_spec_may_not_approve_it(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    repo.write("mine", approvers="alice")
    repo.commit("add mine", author="alice")
    code, out = validate(capsys, "--base", "main")
    assert code == 1
    assert out.splitlines()[:2] == [
        "specs/mine.yaml:11:13: $.approvers[0]: 'alice' authored a commit that added or changed this spec "
        "(alice@example.com) and cannot approve it",
        "  hint: separation of duties: ask another reviewer",
    ]


def reviews(tmp: Path, *entries: tuple[str, str, str]) -> Path:
    data = [
        {
            "id": i,
            "user": {"login": login},
            "state": state,
            "commit_id": sha,
            "submitted_at": f"2026-11-29T10:{i:02d}:00Z",
            "author_association": "MEMBER",
            "permission": "write",  # what the workflow adds (collaborators/LOGIN/permission)
        }
        for i, (login, state, sha) in enumerate(entries)
    ]
    path = tmp / "reviews.json"
    path.write_text(json.dumps(data))
    return path


def test_approval_gate(repo: Repo, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    repo.write("needs-review", approvers="dave, erin")
    head = repo.commit("add needs-review", author="bob")
    ok = reviews(tmp_path, ("dave", "APPROVED", head), ("erin", "COMMENTED", head), ("erin", "APPROVED", head))
    assert validate(capsys, "--base", "main", "--pr-reviews", str(ok), "--pr-author", "bob", "--head-sha", head)[0] == 0
    cases = {
        "commented only": (
            (("dave", "APPROVED", head), ("erin", "COMMENTED", head)),
            "'erin' has not approved the pull request",
        ),
        "dismissed": (
            (("dave", "APPROVED", head), ("erin", "APPROVED", head), ("erin", "DISMISSED", head)),
            "'erin' has not approved the pull request (latest review: DISMISSED)",
        ),
        "changes requested later": (
            (("dave", "APPROVED", head), ("erin", "APPROVED", head), ("erin", "CHANGES_REQUESTED", head)),
            "'erin' has not approved the pull request (latest review: CHANGES_REQUESTED)",
        ),
        "old head": (
            (("dave", "APPROVED", head), ("erin", "APPROVED", "0" * 40)),
            f"'erin' approved commit 000000000000, not the pull request's head {head[:12]}",
        ),
    }
    hints = {
        "commented only": "ask erin to approve it in code review",
        "dismissed": "ask erin for a new approval",
        "changes requested later": "ask erin for a new approval",
        "old head": "the spec changed after the approval; ask erin to approve again",
    }
    for why, (entries, message) in cases.items():
        code, out = validate(
            capsys,
            "--base",
            "main",
            "--pr-reviews",
            str(reviews(tmp_path, *entries)),
            "--pr-author",
            "bob",
            "--head-sha",
            head,
        )
        assert code == 1, why
        assert out.splitlines()[:2] == [
            f"specs/needs-review.yaml:11:19: $.approvers[1]: needs-review: {message}",
            f"  hint: {hints[why]}",
        ], why
        assert out.count("specs/needs-review.yaml") == 1, (why, out)  # dave's approval counts: no other error


def test_pr_author_cannot_approve(repo: Repo, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    repo.write("by-dave", approvers="dave")
    head = repo.commit("add", author="bob")
    code, out = validate(
        capsys,
        "--base",
        "main",
        "--pr-reviews",
        str(reviews(tmp_path, ("dave", "APPROVED", head))),
        "--pr-author",
        "dave",
    )
    assert code == 1
    assert "$.approvers[0]: by-dave: 'dave' opened the pull request and cannot approve it" in out
    assert "$.approvers: by-dave: 0 of the 1 approvals this spec needs are present" in out


def test_completed_needs_two_approvals_and_allowed_approvers(
    repo: Repo, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    repo.write("ledger", dag="finance_ledger", reprocess="completed", approvers="fin-lead, mallory")
    head = repo.commit("add ledger", author="bob")
    code, out = validate(
        capsys,
        "--base",
        "main",
        "--pr-reviews",
        str(reviews(tmp_path, ("fin-lead", "APPROVED", head), ("mallory", "APPROVED", head))),
    )
    assert code == 1
    assert "specs/ledger.yaml:11:23: $.approvers[1]: 'mallory' may not approve backfills of 'finance_ledger'" in out
    repo.write("ledger", dag="finance_ledger", reprocess="completed", approvers="fin-lead, fin-platform")
    code, out = validate(
        capsys, "--base", "main", "--pr-reviews", str(reviews(tmp_path, ("fin-lead", "APPROVED", head)))
    )
    assert code == 1
    assert "$.approvers: ledger: 1 of the 2 approvals this spec needs are present" in out


def test_shallow_clone_says_how_to_fetch(
    repo: Repo, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    base = git(repo.root, "rev-parse", "HEAD")
    repo.write("later")
    repo.commit("later", author="bob")
    shallow = tmp_path / "shallow"
    subprocess.run(
        ["git", "clone", "-q", "--depth", "1", "--branch", "feature", f"file://{repo.root}", str(shallow)],
        check=True,
        capture_output=True,
    )
    monkeypatch.chdir(shallow)
    assert main(["validate", "--base", base]) == 1
    err = capsys.readouterr().err
    assert err == (
        f"error: git ref {base!r} is not in this repository\n"
        "  hint: this is a shallow clone: fetch with depth 0 (git fetch --unshallow, or actions/checkout "
        "with fetch-depth: 0)\n"
    )


def test_option_like_refs_are_refused_before_git_runs(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--base", "--upload-pack=touch /tmp/pwned"]) == 1
    assert capsys.readouterr().err.startswith("error: '--upload-pack=touch /tmp/pwned' is not an acceptable git ref")
    assert not Path("/tmp/pwned").exists()


def test_deleting_an_applied_dag_run_conf_is_refused(
    repo: Repo, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    repo.write("conf", approvers="dave", **{"approvers: [dave]": "approvers: [dave]\ndag_run_conf: {full: true}"})
    repo.commit("add conf", author="carol")
    git(repo.root, "branch", "-f", "main", "HEAD")
    repo.write("conf", approvers="dave")  # the field is deleted, not changed
    code, out = validate(capsys, "--base", "main")
    assert (code, out.splitlines()) == (
        1,
        [
            "specs/conf.yaml:1:1: dag_run_conf changed from '{\"full\":true}' to unset since main",
            f"  hint: {HINT}",
            "1 error, 0 warnings in 3 files including the policy specs/policy.yaml.",
        ],
    )


def test_a_state_only_change_still_needs_approval(
    repo: Repo, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = repo.root / "specs" / "applied.yaml"
    path.write_text(path.read_text() + "state: cancelled\n")
    head = repo.commit("cancel applied", author="bob")
    code, out = validate(capsys, "--base", "main", "--pr-reviews", str(reviews(tmp_path)), "--pr-author", "bob")
    assert code == 1
    assert out.splitlines() == [
        "specs/applied.yaml:11:12: $.approvers: applied: 0 of the 1 approvals this spec needs are present",
        "  hint: every listed approver must approve the pull request in code review",
        "specs/applied.yaml:11:13: $.approvers[0]: applied: 'dave' has not approved the pull request",
        "  hint: ask dave to approve it in code review",
        "2 errors, 0 warnings in 2 files including the policy specs/policy.yaml.",
    ]
    approved = reviews(tmp_path, ("dave", "APPROVED", head))
    assert validate(capsys, "--base", "main", "--pr-reviews", str(approved), "--pr-author", "bob")[0] == 0


def test_unchanged_specs_need_no_new_approval(repo: Repo, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    repo.write("fresh")
    repo.commit("add fresh", author="bob")
    code, out = validate(capsys, "--base", "main", "--pr-reviews", str(reviews(tmp_path)), "--pr-author", "bob")
    assert code == 1
    assert [line for line in out.splitlines() if not line.startswith("  ")] == [
        "specs/fresh.yaml:11:12: $.approvers: fresh: 0 of the 1 approvals this spec needs are present",
        "specs/fresh.yaml:11:13: $.approvers[0]: fresh: 'dave' has not approved the pull request",
        "2 errors, 0 warnings in 3 files including the policy specs/policy.yaml.",
    ]  # nothing about specs/applied.yaml: it is unchanged since main


def test_pr_author_matching_ignores_letter_case(repo: Repo, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    repo.write("by-dave", approvers="dave")
    head = repo.commit("add", author="bob")
    approved = reviews(tmp_path, ("dave", "APPROVED", head))
    code, out = validate(capsys, "--base", "main", "--pr-reviews", str(approved), "--pr-author", "Dave")
    assert code == 1
    assert (
        "specs/by-dave.yaml:11:13: $.approvers[0]: by-dave: 'dave' opened the pull request and cannot approve it\n"
        in out
    )


CHUNKED = "approvers: [dave]\nexecution: {chunk_runs: 2}"


def applied_chunked(repo: Repo) -> Path:
    """`chunked` merged to main with `execution` (its backfill may exist), then a feature branch edits it."""
    path = repo.write("chunked", **{"approvers: [dave]": CHUNKED})
    repo.commit("add chunked", author="carol")
    git(repo.root, "branch", "-f", "main", "HEAD")
    return path


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new))


def test_a_chunked_spec_may_raise_max_active_runs(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    path = applied_chunked(repo)
    edit(path, "max_active_runs: 3", "max_active_runs: 5")
    assert validate(capsys, "--base", "main") == (
        0,
        "OK: 2 specs valid (3 files including the policy specs/policy.yaml, 0 warnings).\n",
    )


def test_an_unchunked_spec_may_not_change_max_active_runs(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    edit(repo.root / "specs" / "applied.yaml", "max_active_runs: 3", "max_active_runs: 4")
    assert validate(capsys, "--base", "main") == (
        1,
        "specs/applied.yaml:7:18: $.max_active_runs: max_active_runs changed from 3 to 4 since main\n"
        "  hint: create a new spec; Airflow cannot change an applied backfill's max_active_runs "
        "(a spec with `execution` may change it: it applies from the next chunk)\n"
        "1 error, 0 warnings in 2 files including the policy specs/policy.yaml.\n",
    )


def test_adding_execution_does_not_unlock_max_active_runs_in_the_same_change(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    path = repo.root / "specs" / "applied.yaml"
    edit(path, "approvers: [dave]", CHUNKED)
    edit(path, "max_active_runs: 3", "max_active_runs: 4")
    assert validate(capsys, "--base", "main") == (
        1,
        "specs/applied.yaml:7:18: $.max_active_runs: max_active_runs changed from 3 to 4 since main, "
        "in the same change that adds `execution`\n"
        "  hint: the running backfill is not chunked: Airflow cannot change its max_active_runs; "
        "create a new spec to run the rest with another limit\n"
        "1 error, 0 warnings in 2 files including the policy specs/policy.yaml.\n",
    )


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("chunk_runs: 2}", "chunk_runs: 3}"),
        ("chunk_runs: 2}", "chunk_runs: 2, canary_runs: 1}\npromote: true"),
        ("chunk_runs: 2}", "chunk_runs: 2, halt_on_failure_ratio: 0.25}\nresume: CHG-2 fix deployed"),
    ],
    ids=["chunk_runs", "canary-and-promote", "halt-and-resume"],
)
def test_execution_promote_and_resume_may_change_after_apply(
    repo: Repo, capsys: pytest.CaptureFixture[str], tmp_path: Path, old: str, new: str
) -> None:
    path = applied_chunked(repo)
    edit(path, old, new)
    edit(path, "max_active_runs: 3", "max_active_runs: 2")
    head = repo.commit("tune chunked", author="bob")
    assert validate(capsys, "--base", "main") == (
        0,
        "OK: 2 specs valid (3 files including the policy specs/policy.yaml, 0 warnings).\n",
    )
    # a change, not "unchanged": it needs the approvals of any other change
    code, out = validate(capsys, "--base", "main", "--pr-reviews", str(reviews(tmp_path)), "--pr-author", "bob")
    assert code == 1
    assert out.splitlines()[0] == (
        "specs/chunked.yaml:11:12: $.approvers: chunked: 0 of the 1 approvals this spec needs are present"
    )
    approved = reviews(tmp_path, ("dave", "APPROVED", head))
    assert validate(capsys, "--base", "main", "--pr-reviews", str(approved), "--pr-author", "bob")[0] == 0


@pytest.mark.parametrize("folder", ["ascii", "équipe", 'a b"c', "tab\there", "ünï cödé 'q'"])
def test_separation_of_duties_holds_in_any_folder_name(
    repo: Repo, capsys: pytest.CaptureFixture[str], tmp_path: Path, folder: str
) -> None:
    """git quotes non-ASCII, quotes and control characters in paths unless asked not to (-z): the spec's authors
    must still be found."""
    spec = repo.write("spec-b", approvers="alice")
    (repo.root / "specs" / folder).mkdir()
    moved = spec.rename(repo.root / "specs" / folder / "spec-b.yaml")
    head = repo.commit("add spec-b", author="alice")
    approved = reviews(tmp_path, ("alice", "APPROVED", head))
    code, out = validate(capsys, "--base", "main", "--pr-reviews", str(approved), "--pr-author", "mallory")
    shown = moved.relative_to(repo.root).as_posix().replace("\t", " ")  # a control character prints as a space
    assert (code, out.splitlines()) == (  # the author's approval does not count towards the minimum either
        1,
        [
            f"{shown}:11:12: $.approvers: spec-b: 0 of the 1 approvals this spec needs are present",
            "  hint: every listed approver must approve the pull request in code review",
            f"{shown}:11:13: $.approvers[0]: spec-b: 'alice' authored a commit that added or changed this spec "
            "(alice@example.com) and cannot approve it",
            "  hint: separation of duties: ask another reviewer",
            "2 errors, 0 warnings in 3 files including the policy specs/policy.yaml.",
        ],
    )


def test_a_specs_folder_inside_a_bare_repository_is_a_located_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A bare repository has no working tree to read spec paths against: exit 1 saying so, not an assertion."""
    bare = tmp_path / "specs.git"
    subprocess.run(["git", "init", "-q", "--bare", str(bare)], check=True)
    (bare / "specs").mkdir()
    monkeypatch.chdir(bare)
    assert main(["validate", "--base", "HEAD"]) == 1
    assert capsys.readouterr().err == (
        f"error: specs is inside the bare git repository {bare}, which has no working tree\n"
        "  hint: run backfillctl in a clone of it (git clone), where the spec files are checked out\n"
    )
