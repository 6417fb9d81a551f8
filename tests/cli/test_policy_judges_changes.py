"""A newer policy judges what it can still change (validate --base on real git repositories): a tightened policy
with specs already merged passes its own PR check, while a new spec or a changed mutable field is judged in full;
two changes valid alone that make an invalid spec together are caught after the merge, where the spec is Blocked
alone (tests/commands/reconcile/test_bad_days_fake.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_git_checks import Repo, git, validate

NOTE = "applied before the policy said so: the rule holds for new specs, this one keeps what ran"

REVIEWED = "version: 1\nrequire_reviewed_merge: false\nscope: {dags: ['*']}\n"  # said, so validate does not warn


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Repo:
    r = Repo(tmp_path / "repo")
    monkeypatch.chdir(r.root)
    monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", "specs")
    monkeypatch.setenv("GIT_ALLOW_PROTOCOL", "file")
    (r.root / "specs" / "policy.yaml").write_text(REVIEWED + "max_active_runs_limit: 8\n")
    r.write("finished-one")  # max_active_runs: 3 (the template's)
    r.commit("a spec merged and applied long ago", author="carol")
    return r


def errors_and_warnings(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, list[dict[str, str]]]:
    code, out = validate(capsys, "--format", "json", *args)
    return code, json.loads(out)["diagnostics"]


def test_a_tightened_policy_passes_its_own_pr_check_with_specs_merged_before(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    git(repo.root, "checkout", "-q", "-b", "tighten")
    (repo.root / "specs" / "policy.yaml").write_text(REVIEWED + "max_active_runs_limit: 2\n")
    repo.commit("max_active_runs_limit 8 -> 2")
    code, found = errors_and_warnings(capsys, "--base", "main")
    assert code == 0
    assert [(d["severity"], d["message"]) for d in found] == [
        ("warning", f"max_active_runs 3 is over the limit of 2 set by policy ({NOTE})")
    ]
    code, _ = validate(capsys)  # without --base nothing says what was merged: every spec is judged in full
    assert code == 1


def test_a_merged_spec_that_changes_a_mutable_field_is_judged_on_it(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    (repo.root / "specs" / "policy.yaml").write_text(
        REVIEWED + "rules:\n  - dags: [orders_*]\n    chunk_runs: {default: 2, max: 4}\n"
    )
    repo.write("chunky", **{"approvers: [dave]": "approvers: [dave]\nexecution: {chunk_runs: 3}"})
    repo.commit("a chunked spec and its rule")
    git(repo.root, "checkout", "-q", "-b", "bigger-chunks")
    repo.write("chunky", **{"approvers: [dave]": "approvers: [dave]\nexecution: {chunk_runs: 9}"})
    repo.commit("bigger chunks")
    code, found = errors_and_warnings(capsys, "--base", "main")
    assert code == 1
    assert [(d["severity"], d["message"]) for d in found if "chunk_runs 9" in d["message"]] == [
        ("error", "execution.chunk_runs 9 is over chunk_runs.max 4 set by rule 1 (orders_*)")
    ]


def test_two_changes_valid_alone_are_invalid_together_after_the_merge(
    repo: Repo, capsys: pytest.CaptureFixture[str]
) -> None:
    """One PR tightens the limit, another adds a spec at the old limit: each passes against main, the merge of both
    does not: the new spec (not yet applied) is an error after the merge, the merged old spec only a warning."""
    git(repo.root, "checkout", "-q", "-b", "tighten")
    (repo.root / "specs" / "policy.yaml").write_text(REVIEWED + "max_active_runs_limit: 2\n")
    repo.commit("tighten")
    assert validate(capsys, "--base", "main")[0] == 0
    git(repo.root, "checkout", "-q", "main")
    git(repo.root, "checkout", "-q", "-b", "add")
    repo.write("new-one", **{"max_active_runs: 3": "max_active_runs: 4"})
    repo.commit("add a spec at 4")
    assert validate(capsys, "--base", "main")[0] == 0
    git(repo.root, "checkout", "-q", "main")
    git(repo.root, "merge", "-q", "--no-ff", "-m", "merge tighten", "tighten")
    git(repo.root, "merge", "-q", "--no-ff", "-m", "merge add", "add")
    code, found = errors_and_warnings(capsys, "--base", "HEAD^1")  # the second merge, as the PR check saw it
    assert code == 1
    assert [(Path(d["file"]).name, d["severity"], d["message"]) for d in found] == [
        ("finished-one.yaml", "warning", f"max_active_runs 3 is over the limit of 2 set by policy ({NOTE})"),
        ("new-one.yaml", "error", "max_active_runs 4 is over the limit of 2 set by policy"),
    ]
