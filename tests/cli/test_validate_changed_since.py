"""`validate --changed-since REF` on real temporary git repositories: only the spec files changed since REF
are checked (every spec when the policy changed), their names still against the whole tree; and the plain
`validate` that pre-commit runs is parsed without typer, with the same results."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.cli import main
from controller.cli.quick import ValidateArgs, plain_validate
from tests.cli.test_git_checks import Repo, git, repo, validate

__all__ = ["repo"]  # the fixture, shared with the --base tests


def test_only_the_files_changed_since_the_ref_are_checked(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    repo.write("broken", **{"max_active_runs: 3": "max_active_runs: 0"})
    repo.commit("a broken spec nobody checked")
    base = git(repo.root, "rev-parse", "HEAD")
    repo.write("fresh")  # committed after the ref
    repo.commit("fresh")
    repo.write("untracked")  # never committed: on disk, so the folder's reader would read it
    assert validate(capsys, "--changed-since", base) == (
        0,
        "OK: 2 specs valid (3 files including the policy specs/policy.yaml, 0 warnings).\n",
    )
    code, out = validate(capsys)
    assert code == 1
    assert "specs/broken.yaml" in out


def test_nothing_changed_checks_no_spec(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    assert validate(capsys, "--changed-since", "HEAD") == (
        0,
        "OK: 0 specs valid (1 file including the policy specs/policy.yaml, 0 warnings).\n",
    )


def test_a_changed_policy_checks_every_spec(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    (repo.root / "specs" / "policy.yaml").write_text("version: 1\nticket_pattern: '^INC-[0-9]+$'\n")
    code, out = validate(capsys, "--changed-since", "HEAD")
    assert code == 1
    assert "specs/applied.yaml" in out  # unchanged, but judged by the new policy
    assert "ticket" in out


def test_a_duplicate_name_against_an_unchanged_file_is_named_exactly(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo.root / "specs" / "team").mkdir()
    moved = repo.write("applied").read_text()
    (repo.root / "specs" / "team" / "applied.yaml").write_text(moved)
    git(repo.root, "checkout", "-q", "--", "specs/applied.yaml")
    code, out = validate(capsys, "--changed-since", "HEAD")
    whole_code, whole = validate(capsys, "specs/team/applied.yaml")  # what pre-commit's file list says
    assert (code, out) == (whole_code, whole)
    assert code == 1
    assert out == (
        "specs/team/applied.yaml:2:7: $.name: name 'applied' is already used by specs/applied.yaml\n"
        "  hint: every spec needs a unique name across the specs tree\n"
        "1 error, 0 warnings in 2 files including the policy specs/policy.yaml.\n"
    )


def test_an_unknown_ref_is_a_usage_error_saying_what_where_and_the_fix(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["validate", "--changed-since", "no-such-branch"]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"error: --changed-since no-such-branch: git ref 'no-such-branch' is not in this repository ({repo.root})\n"
        "  hint: fetch it first, e.g. git fetch origin main\n"
    )


def test_paths_and_changed_since_together_are_refused(repo: Repo, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", "--changed-since", "HEAD", "specs/applied.yaml"]) == 2
    assert "cannot be combined" in capsys.readouterr().err


def test_outside_a_repository_it_is_a_usage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "specs").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", "specs")
    assert main(["validate", "--changed-since", "HEAD"]) == 2
    assert "is not in a git repository" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "parsed"),
    [
        (["validate"], ValidateArgs()),
        (["validate", "a.yaml", "b"], ValidateArgs([Path("a.yaml"), Path("b")])),
        (["validate", "--format", "json", "a.yaml"], ValidateArgs([Path("a.yaml")], "json")),
        (["validate", "--format=github"], ValidateArgs([], "github")),
        (["validate", "--changed-since", "origin/main"], ValidateArgs(changed_since="origin/main")),
    ],
)
def test_a_plain_validate_is_parsed_without_typer(argv: list[str], parsed: ValidateArgs) -> None:
    assert plain_validate(argv) == parsed


@pytest.mark.parametrize(
    "argv",
    [
        ["validate", "--help"],
        ["validate", "--base", "main"],
        ["validate", "--format", "yaml"],
        ["validate", "--format"],
        ["validate", "--format", "json", "--format", "text"],
        ["validate", "--", "a.yaml"],
        ["--version"],
        ["plan"],
    ],
)
def test_anything_else_is_left_to_typer(argv: list[str]) -> None:
    assert plain_validate(argv) is None
