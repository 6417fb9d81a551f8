"""Paths from git are read unquoted (`git log -z`): non-ASCII, spaces, quotes and newlines in folder and file names
keep their provenance, queue order and place in the PR comment (real temporary repositories)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.adapters.gitsource import GitSource
from controller.commands.verbs.pr_comment import read_changed
from controller.core.plan.provenance import SpecOrigin
from controller.core.plan.values import Plan
from controller.core.render.pr_comment import pr_comment
from tests.commands.reconcile.harness import Bench
from tests.fakes.airflow import FakeAirflow

ALICE = "alice@example.com"
ODD = ["équipe", 'a b"c', "new\nline", "back\\slash 'q'"]


def git(repo: Path, *args: str, author: str = "alice", when: int = 0, strip: bool = True) -> str:
    moment = f"2026-01-01T00:00:{when:02d}Z"
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(repo),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": author,
        "GIT_AUTHOR_EMAIL": f"{author}@example.com",
        "GIT_COMMITTER_NAME": author,
        "GIT_COMMITTER_EMAIL": f"{author}@example.com",
        "GIT_AUTHOR_DATE": moment,
        "GIT_COMMITTER_DATE": moment,
    }
    done = subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True, text=True)
    return done.stdout.strip() if strip else done.stdout


def commit(repo: Path, message: str, author: str = "alice", when: int = 0) -> str:
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", message, author=author, when=when)
    return git(repo, "rev-parse", "HEAD")


def test_history_keys_are_the_working_tree_paths(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "-b", "main")
    paths = [tmp_path / "specs" / folder / f"{folder} x.yaml" for folder in ODD]
    for path in paths:
        path.parent.mkdir(parents=True)
        path.write_text("a\n")
    first = commit(tmp_path, "add", author="alice", when=1)
    git(tmp_path, "branch", "base")
    for path in paths[1:]:
        path.write_text("b\n")
    second = commit(tmp_path, "edit", author="bob", when=2)
    source = GitSource(tmp_path)
    keys = [source.relative(path) for path in paths]
    assert keys[0] == "specs/équipe/équipe x.yaml"
    introduced = source.introductions(tmp_path / "specs")
    assert {k: (c.sha, c.author_email) for k, c in introduced.items()} == dict.fromkeys(keys, (first, ALICE))
    assert {k: c.sha for k, c in source.last_commits(tmp_path / "specs").items()} == {
        keys[0]: first,
        **dict.fromkeys(keys[1:], second),
    }
    assert source.authors_since("base", tmp_path / "specs") == {k: {"bob@example.com"} for k in keys[1:]}


def test_a_merge_commit_without_paths_does_not_shift_the_next_commits_paths(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "a.yaml").write_text("a\n")
    commit(tmp_path, "a", when=1)
    git(tmp_path, "checkout", "-q", "-b", "side")
    (tmp_path / "specs" / "équipe b.yaml").write_text("b\n")
    side = commit(tmp_path, "b", author="bob", when=2)
    git(tmp_path, "checkout", "-q", "main")
    (tmp_path / "specs" / "c.yaml").write_text("c\n")
    main_c = commit(tmp_path, "c", author="carol", when=3)
    git(tmp_path, "merge", "-q", "--no-ff", "side", "-m", "merge", when=4)
    last = GitSource(tmp_path).last_commits(tmp_path / "specs")
    assert {k: c.sha for k, c in last.items() if k != "specs/a.yaml"} == {
        "specs/équipe b.yaml": side,
        "specs/c.yaml": main_c,
    }


SPEC = """version: 1
name: {name}
dag_id: demo_daily
from_date: "2025-01-01"
to_date: "2025-01-07"
reprocess_behavior: none
max_active_runs: 3
ticket: CHG-1
reason: A test backfill for reconcile.
requested_by: alice
approvers: [bob]
"""


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[Bench]:
    git(tmp_path, "init", "-q", "-b", "main")
    b = Bench(tmp_path, fake=FakeAirflow())
    yield b
    b.close()


@pytest.mark.parametrize("folder", ODD)
def test_queue_order_and_provenance_in_an_odd_folder(bench: Bench, folder: str) -> None:
    """First merged first: `b-first` (merged first, in the odd folder) runs before `a-second` (a name earlier)."""
    first = bench.specs / folder / "b-first.yaml"
    first.parent.mkdir()
    first.write_text(SPEC.format(name="b-first"))
    sha = commit(bench.root, "b-first", author="dave", when=1)
    (bench.specs / "a-second.yaml").write_text(SPEC.format(name="a-second"))
    commit(bench.root, "a-second", when=2)
    reconciler = bench.reconciler()
    result = reconciler.run_once(dry_run=True)
    assert [(i.spec, i.kind.value, i.reason) for i in result.plan.items] == [
        ("b-first", "create", ""),
        ("a-second", "wait", "queued behind b-first"),
    ]
    assert reconciler.provenance[first.as_posix()] == SpecOrigin(sha, "dave@example.com")


def test_the_pr_comment_lists_a_spec_in_an_odd_folder_as_a_spec(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "old.yaml").write_text("a\n")
    commit(tmp_path, "base")
    git(tmp_path, "checkout", "-q", "-b", "change")
    for folder in ODD:
        (tmp_path / "specs" / folder).mkdir()
        (tmp_path / "specs" / folder / "spec-b.yaml").write_text("b\n")
    commit(tmp_path, "odd folders")
    expected = sorted(f"specs/{folder}/spec-b.yaml" for folder in ODD)
    for options in (["-z"], []):  # what the workflow writes now, and what older workflows wrote (quoted)
        out = tmp_path / "changed.txt"
        out.write_text(git(tmp_path, "diff", *options, "--name-only", "main...HEAD", "--", "specs/", strip=False))
        assert sorted(read_changed(out)) == expected, options
    body = pr_comment(Plan(()), read_changed(out), {})
    assert "changed, not a spec" not in body
    assert "- `spec-b`: not in the plan: the file was deleted or moved." in body


def test_blob_ids_and_history_of_some_files_keep_odd_paths_and_leave_symlinks_out(tmp_path: Path) -> None:
    """The spec index's reads (issue 29): blob ids from HEAD's tree alone, and the history of only the files asked
    about, which for a renamed file says what the folder's history says (`--no-renames`: added by the rename)."""
    git(tmp_path, "init", "-q", "-b", "main")
    odd = tmp_path / "specs" / "équipe" / 'a "b".yaml'
    odd.parent.mkdir(parents=True)
    odd.write_text("a\n")
    (tmp_path / "specs" / "old.yaml").write_text("o\n")
    (tmp_path / "specs" / "policy.yaml").write_text("version: 1\n")
    (tmp_path / "specs" / "link.yaml").symlink_to("old.yaml")
    first = commit(tmp_path, "add", when=1)
    git(tmp_path, "mv", "specs/old.yaml", "specs/new.yaml")
    renamed = commit(tmp_path, "rename", author="bob", when=2)
    source = GitSource(tmp_path)
    assert source.blob_ids(tmp_path / "specs") == {
        'specs/équipe/a "b".yaml': git(tmp_path, "rev-parse", 'HEAD:specs/équipe/a "b".yaml'),
        "specs/new.yaml": git(tmp_path, "rev-parse", "HEAD:specs/new.yaml"),
    }
    asked = ['specs/équipe/a "b".yaml', "specs/new.yaml"]
    for paths in (None, asked):
        intros = source.introductions(tmp_path / "specs", paths)
        last = source.last_commits(tmp_path / "specs", paths)
        assert {k: intros[k].sha for k in asked} == {asked[0]: first, "specs/new.yaml": renamed}
        assert {k: last[k].sha for k in asked} == {asked[0]: first, "specs/new.yaml": renamed}
    assert set(source.introductions(tmp_path / "specs", asked)) == set(asked)


def test_relatives_of_many_paths_are_each_ones_relative(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The batch resolves a folder once, yet answers what `relative` does for each: a symlinked file as its
    target, a file in a symlinked folder through the folder, a path relative to the working directory."""
    git(tmp_path, "init", "-q", "-b", "main")
    specs = tmp_path / "specs"
    (specs / "team a").mkdir(parents=True)
    (specs / "team a" / "one.yaml").write_text("a\n")
    (specs / "two.yaml").write_text("b\n")
    (specs / "link.yaml").symlink_to("team a/one.yaml")
    (specs / "via").symlink_to("team a")
    commit(tmp_path, "add")
    monkeypatch.chdir(specs)
    shown = ["two.yaml", "link.yaml", "via/one.yaml", "team a/one.yaml", str(specs / "two.yaml"), "new.yaml"]
    source = GitSource(tmp_path)

    relatives = source.relatives(shown)

    assert relatives == {
        "two.yaml": "specs/two.yaml",
        "link.yaml": "specs/team a/one.yaml",
        "via/one.yaml": "specs/team a/one.yaml",
        "team a/one.yaml": "specs/team a/one.yaml",
        str(specs / "two.yaml"): "specs/two.yaml",
        "new.yaml": "specs/new.yaml",
    }
    assert relatives == {path: source.relative(Path(path)) for path in shown}


def test_relatives_refuses_a_path_outside_the_repository_as_relative_does(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    (repo / "a.yaml").write_text("a\n")
    commit(repo, "add")

    with pytest.raises(ValueError, match="is not in the subpath of"):
        GitSource(repo).relatives([str(tmp_path / "elsewhere.yaml")])
