"""What the approval gate reads of git, on real temporary repositories: the blob each spec and policy file reads
at a commit (a symlink followed inside the folder only), ancestry, first parents, the branch's commits since a
commit, the commit that last changed a file, and the authors of a span of commits (merges left out)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from controller.adapters.githistory import GitHistory
from controller.adapters.gitsource import GitSource
from controller.errors import GitError
from tests.adapters.test_git_paths import commit, git


def blob(repo: Path, ref: str) -> str:
    return git(repo, "rev-parse", ref)


@pytest.fixture
def listings(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """What each `git ls-tree -r` lists (the paths given; a folder: all it holds), in order."""
    seen: list[tuple[str, ...]] = []
    entries = GitHistory._entries
    monkeypatch.setattr(
        GitHistory, "_entries", lambda self, sha, paths: seen.append(tuple(paths)) or entries(self, sha, paths)
    )
    return seen


def test_file_blobs_follow_symlinks_inside_the_folder_only(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "-b", "main")
    specs = tmp_path / "specs"
    (specs / "team").mkdir(parents=True)
    (specs / "a.yaml").write_text("a\n")
    (specs / "policy.yaml").write_text("version: 1\n")
    (specs / "team" / "b.yml").write_text("b\n")
    (specs / "notes.txt").write_text("not a spec\n")
    (tmp_path / "outside.yaml").write_text("outside\n")
    os.symlink("team/b.yml", specs / "link.yaml")
    os.symlink("link.yaml", specs / "chain.yaml")
    os.symlink("../outside.yaml", specs / "out.yaml")
    os.symlink("loop-b.yaml", specs / "loop-a.yaml")
    os.symlink("loop-a.yaml", specs / "loop-b.yaml")
    os.symlink("team", specs / "folder.yaml")
    head = commit(tmp_path, "specs")
    found = GitSource(specs).history.file_blobs(head, specs)
    assert found == {
        "specs/a.yaml": blob(tmp_path, "HEAD:specs/a.yaml"),
        "specs/policy.yaml": blob(tmp_path, "HEAD:specs/policy.yaml"),
        "specs/team/b.yml": blob(tmp_path, "HEAD:specs/team/b.yml"),
        "specs/link.yaml": blob(tmp_path, "HEAD:specs/team/b.yml"),  # what it reads, not the link's text
        "specs/chain.yaml": blob(tmp_path, "HEAD:specs/team/b.yml"),
    }
    assert GitSource(tmp_path).history.file_blobs(head, tmp_path)["outside.yaml"] == blob(tmp_path, "HEAD:outside.yaml")


def test_file_blobs_of_a_few_paths_list_only_them_and_equal_the_whole_listing(
    tmp_path: Path, listings: list[tuple[str, ...]]
) -> None:
    git(tmp_path, "init", "-q", "-b", "main")
    specs = tmp_path / "specs"
    (specs / "team").mkdir(parents=True)
    for name in ("a.yaml", "b*.yaml", "bb.yaml", "team/c.yml", "notes.txt"):
        (specs / name).write_text(f"{name}\n")
    os.symlink("team/c.yml", specs / "link.yaml")
    (tmp_path / "outside.yaml").write_text("outside\n")
    head = commit(tmp_path, "specs")
    history = GitSource(specs).history
    whole = GitSource(specs).history.file_blobs(head, specs)
    listings.clear()  # what the narrowed reads list, from here
    wanted = {"specs/b*.yaml", "specs/team/c.yml", "specs/notes.txt", "specs/gone.yaml", "outside.yaml", "specs/team"}
    assert history.file_blobs(head, specs, only=wanted) == {p: b for p, b in whole.items() if p in wanted}
    assert [len(paths) for paths in listings] == [
        5
    ]  # the paths under the folder, alone (a `*` is a name, not a pattern)
    assert history.file_blobs(head, specs, only={"specs/link.yaml"}) == {"specs/link.yaml": whole["specs/link.yaml"]}
    assert [len(paths) for paths in listings] == [5, 1, 1]  # a link: then the folder's whole listing, to follow it
    assert history.file_blobs(head, specs, only=set()) == {}
    many = {f"specs/x{n}.yaml" for n in range(300)} | {"specs/a.yaml"}
    assert history.file_blobs(head, specs, only=many) == {"specs/a.yaml": whole["specs/a.yaml"]}
    assert [len(paths) for paths in listings] == [5, 1, 1]  # the folder's listing kept from the link, not listed again


def test_file_blobs_of_a_few_paths_take_each_name_literally_at_the_repository_root(
    tmp_path: Path, listings: list[tuple[str, ...]]
) -> None:
    git(tmp_path, "init", "-q", "-b", "main")
    names = (":zz.yaml", ":!zz.yaml", ":(glob)y.yaml", "-n.yaml", "plain.yaml", "é.yaml")
    for name in names:
        (tmp_path / name).write_text(f"{name}\n")
    head = commit(tmp_path, "specs at the root")
    history = GitSource(tmp_path).history
    ascii_names = {n for n in names if n.isascii()}
    assert history.file_blobs(head, tmp_path, only=ascii_names) == {n: blob(tmp_path, f"HEAD:{n}") for n in ascii_names}
    assert listings == [tuple(sorted(ascii_names))]  # each name alone: none read as pathspec magic or an option
    assert history.file_blobs(head, tmp_path, only={"é.yaml", "plain.yaml"}) == {
        "é.yaml": blob(tmp_path, "HEAD:é.yaml"),
        "plain.yaml": blob(tmp_path, "HEAD:plain.yaml"),
    }
    assert listings[1:] == [()]  # a non-ASCII name: the whole listing (git may normalise an argument, never a listing)


def test_ancestry_parents_and_the_branchs_commits(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "specs").mkdir()
    (tmp_path / "specs" / "a.yaml").write_text("a\n")
    root = commit(tmp_path, "a")
    (tmp_path / "README").write_text("not specs\n")
    other = commit(tmp_path, "readme", when=1)
    git(tmp_path, "checkout", "-q", "-b", "pr")
    (tmp_path / "specs" / "b.yaml").write_text("b\n")
    side = commit(tmp_path, "b", author="bob", when=2)
    git(tmp_path, "checkout", "-q", "main")
    git(tmp_path, "merge", "-q", "--no-ff", "-m", "Merge pull request #2", "pr", author="carol", when=3)
    merge = git(tmp_path, "rev-parse", "HEAD")
    source = GitSource(tmp_path / "specs")
    history = source.history
    folder = tmp_path / "specs"
    assert (history.first_parent(root), history.first_parent(merge)) == (None, other)
    assert (history.is_ancestor(root, merge), history.is_ancestor(side, merge), history.is_ancestor(merge, root)) == (
        True,
        True,
        False,
    )
    assert history.branch_commits(None, merge, folder) == [root, merge]  # first parents only: the merge, not `side`
    assert history.branch_commits(root, merge, folder) == [merge]
    assert (history.carrier(merge, "specs/b.yaml"), history.carrier(merge, "specs/a.yaml")) == (merge, root)
    assert history.carrier(merge, "specs/none.yaml") is None
    assert history.depth(merge) == 4
    assert source.authors_since(other, folder, merge) == {"specs/b.yaml": {"bob@example.com"}}  # no merge's author
    assert source.authors_since(None, folder, merge) == {
        "specs/a.yaml": {"alice@example.com"},
        "specs/b.yaml": {"bob@example.com"},
    }
    assert history.blob(blob(tmp_path, "HEAD:specs/a.yaml")) == b"a\n"
    assert (history.has_commit(merge), history.has_commit("0" * 40), history.has_commit("--all")) == (
        True,
        False,
        False,
    )
    with pytest.raises(GitError, match="commit '0000000000000000000000000000000000000000' is not in this repository"):
        history.is_ancestor("0" * 40, merge)
    assert history.commit_of("HEAD") == merge


def test_a_commits_tree_is_listed_once_while_it_is_one_of_the_last_two_and_read_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "specs").mkdir()
    shas = []
    for name in ("a", "b", "c"):
        (tmp_path / "specs" / f"{name}.yaml").write_text(f"{name}\n")
        shas.append(commit(tmp_path, name, when=len(shas)))
    history = GitSource(tmp_path / "specs").history
    listed: list[str] = []
    real = type(history)._git

    def spying(self: object, command: str, *args: str) -> str:
        if command == "ls-tree":
            listed.append(args[3][:7])
        return real(history, command, *args)

    monkeypatch.setattr(type(history), "_git", spying)
    first, second, third = shas
    for sha in (third, third, first, third, second, third, first):
        history.tree(sha, "specs")
    assert listed == [s[:7] for s in (third, first, second, first)]  # the last two are kept
    tree = history.tree(third, "specs")
    assert sorted(tree) == ["specs/a.yaml", "specs/b.yaml", "specs/c.yaml"]
    with pytest.raises(TypeError):
        tree["specs/d.yaml"] = ("100644", "0" * 40)  # type: ignore[index]
    with pytest.raises(GitError, match="commit '--output=x' is not in this repository"):
        history.tree("--output=x", "specs")


def test_a_folders_tree_id_is_one_id_for_what_it_holds_and_none_for_what_is_no_folder(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "-b", "main")
    (tmp_path / "specs" / "team").mkdir(parents=True)
    (tmp_path / "specs" / "team" / "a.yaml").write_text("a\n")
    (tmp_path / "specs team").mkdir()
    (tmp_path / "specs team" / "b.yaml").write_text("b\n")
    first = commit(tmp_path, "specs")
    history = GitSource(tmp_path).history
    assert history.tree_id(first, "specs") == blob(tmp_path, "HEAD:specs")
    assert history.tree_id(first, "specs/team") == blob(tmp_path, "HEAD:specs/team")
    assert history.tree_id(first, "specs team") == blob(tmp_path, "HEAD:specs team")
    assert history.tree_id(first, ".") == history.tree_id(first, "") == blob(tmp_path, "HEAD^{tree}")
    assert history.tree_id(first, "specs/team/a.yaml") is None  # a file
    assert history.tree_id(first, "nowhere") is None
    assert history.tree_id("-p", "specs") is None  # never an option
    (tmp_path / "README").write_text("elsewhere\n")
    second = commit(tmp_path, "readme", when=1)
    assert history.tree_id(second, "specs") == history.tree_id(first, "specs")  # unchanged below it
    assert history.tree_id(second, ".") != history.tree_id(first, ".")
