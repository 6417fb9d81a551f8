"""Nothing is read outside the specs tree: the specs folder must resolve inside its repository, and every file
and folder below it inside the folder (any component, not only the last); git blobs follow the same rule."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from controller.adapters.gitsource import GitSource
from controller.cli import main
from controller.errors import GitError

SECRET = "token: CANARY-OUTSIDE-42\n["  # broken YAML: a parse error would echo it
FOLDER_HINT = "  hint: specs must be files in the repository: replace the symlink with the folder and its files\n"


def git(repo: Path, *args: str) -> None:
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(repo),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "a",
        "GIT_AUTHOR_EMAIL": "a@example.com",
        "GIT_COMMITTER_NAME": "a",
        "GIT_COMMITTER_EMAIL": "a@example.com",
    }
    subprocess.run(["git", *args], cwd=repo, env=env, check=True, capture_output=True)


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """`elsewhere/` (the runner's files, beside the checkout) and `repo/` (the pull request's checkout)."""
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "leak.yaml").write_text(SECRET)
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    monkeypatch.chdir(repo)
    monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", "specs")
    return tmp_path


def validate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["validate", *args])
    out, err = capsys.readouterr()
    assert "CANARY" not in out + err
    return code, out, err


def test_a_specs_folder_linked_out_of_the_repository_is_refused(
    world: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (world / "repo" / "specs").symlink_to(world / "elsewhere")
    assert validate(capsys) == (
        1,
        "",
        f"error: specs resolves to {world}/elsewhere, outside the repository {world}/repo: nothing was read from it\n"
        + FOLDER_HINT,
    )


def test_a_specs_folder_linked_to_another_checkout_is_refused(world: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """In CI the trusted checkout (with its own .git) sits beside the pull request's: it is not 'the repository'."""
    git(world / "elsewhere", "init", "-q")
    (world / "repo" / "specs").symlink_to(world / "elsewhere")
    code, _, err = validate(capsys)
    assert (code, err.splitlines()[0]) == (
        1,
        f"error: specs resolves to {world}/elsewhere, outside the repository {world}/repo: nothing was read from it",
    )


@pytest.mark.parametrize("target", ["../../elsewhere", "../README"], ids=["out of the repository", "out of specs"])
def test_a_folder_linked_out_of_the_specs_tree_is_reported_and_not_read(
    world: Path, capsys: pytest.CaptureFixture[str], target: str
) -> None:
    (world / "repo" / "README").mkdir()
    (world / "repo" / "README" / "leak.yaml").write_text(SECRET)
    (world / "repo" / "specs").mkdir()
    (world / "repo" / "specs" / "sub").symlink_to(target)
    assert validate(capsys) == (
        1,
        "specs/sub:1:1: symlinked folder points outside the specs tree; nothing in it was read\n"
        "  hint: copy the specs into the tree instead of linking to their folder\n"
        "1 error, 0 warnings in 1 file.\n",
        "",
    )


@pytest.mark.parametrize("named", ["specs/sub", "specs/sub/leak.yaml"])
def test_a_named_folder_or_file_through_a_link_out_of_the_repository_is_refused(
    world: Path, capsys: pytest.CaptureFixture[str], named: str
) -> None:
    (world / "repo" / "specs").mkdir()
    (world / "repo" / "specs" / "sub").symlink_to("../../elsewhere")
    assert validate(capsys, named) == (
        1,
        "",
        f"error: specs/sub resolves to {world}/elsewhere, outside the repository {world}/repo: nothing was read "
        "from it\n" + FOLDER_HINT,
    )


def test_outside_a_repository_the_specs_folder_is_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", "specs")
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "leak.yaml").write_text(SECRET)
    (tmp_path / "specs" / "team").mkdir(parents=True)
    (tmp_path / "specs" / "team" / "sub").symlink_to("../../elsewhere")
    (tmp_path / "specs" / "leak.yaml").symlink_to("../elsewhere/leak.yaml")
    assert validate(capsys) == (
        1,
        "specs/leak.yaml:1:1: symlink points outside the specs tree\n"
        "  hint: copy the spec into the tree instead of linking to it\n"
        "specs/team/sub:1:1: symlinked folder points outside the specs tree; nothing in it was read\n"
        "  hint: copy the specs into the tree instead of linking to their folder\n"
        "2 errors, 0 warnings in 2 files.\n",
        "",
    )
    code, out, _ = validate(capsys, "specs", "specs/team/sub/leak.yaml")  # named through the link
    assert code == 1
    assert (
        "specs/team/sub/leak.yaml:1:1: resolves outside the specs tree through a symlinked folder\n"
        "  hint: copy the specs into the tree instead of linking to their folder\n"
    ) in out


def test_a_link_inside_the_specs_tree_still_reads(world: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (world / "repo" / "specs" / "data").mkdir(parents=True)
    (world / "repo" / "specs" / "data" / "notes.txt").write_text("not: a spec\n")
    (world / "repo" / "specs" / "notes.yaml").symlink_to("data/notes.txt")
    code, out, _ = validate(capsys)
    assert code == 1
    assert "specs/notes.yaml:1:1: $.not: unknown field 'not'\n" in out  # read and checked, not refused


# --- git blobs at the base -----------------------------------------------------------------------------------


def base_commit(repo: Path, links: dict[str, str], files: dict[str, str]) -> GitSource:
    for name, text in files.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    for name, target in links.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).symlink_to(target)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    git(repo, "branch", "base")
    return GitSource(repo)


def test_spec_blobs_follow_links_only_inside_the_specs_folder(world: Path) -> None:
    repo = world / "repo"
    source = base_commit(
        repo,
        links={
            "specs/inside.yaml": "data/inside.txt",
            "specs/chain.yaml": "inside.yaml",
            "specs/out.yaml": "../secret.txt",
            "specs/far.yaml": "../../elsewhere/leak.yaml",
            "specs/abs.yaml": f"{world}/elsewhere/leak.yaml",
            "specs/loop.yaml": "loop.yaml",
            "specs/dangling.yaml": "nowhere.yaml",
            "specs/folder.yaml": "data",
        },
        files={"specs/real.yaml": "real\n", "specs/data/inside.txt": "inside\n", "secret.txt": "CANARY\n"},
    )
    found = {s.stem: s.raw for s in source.specs_at("base", repo / "specs")}
    assert found == {"chain": b"inside\n", "inside": b"inside\n", "real": b"real\n"}


def test_a_specs_folder_that_is_a_link_at_the_base_has_no_specs_there(world: Path) -> None:
    repo = world / "repo"
    source = base_commit(repo, links={"specs": "other"}, files={"other/a.yaml": "a\n", "other/policy.yaml": "p\n"})
    git(repo, "rm", "-q", "specs")
    (repo / "specs").mkdir()
    assert source.specs_at("base", repo / "specs") == []
    assert source.policy_at("base", repo / "specs") is None


def test_a_policy_linked_out_of_the_specs_folder_at_the_base_is_an_error(world: Path) -> None:
    repo = world / "repo"
    source = base_commit(repo, links={"specs/policy.yaml": "../loose.yaml"}, files={"loose.yaml": "version: 1\n"})
    with pytest.raises(GitError) as raised:
        source.policy_at("base", repo / "specs")
    assert (raised.value.message, raised.value.hint) == (
        "specs/policy.yaml at base is a symlink that leads out of the specs folder: the base's policy is unread",
        "make specs/policy.yaml an ordinary file on base",
    )
    (world / "two").mkdir()
    git(world / "two", "init", "-q", "-b", "main")
    inside = base_commit(world / "two", links={"specs/policy.yaml": "p.txt"}, files={"specs/p.txt": "version: 1\n"})
    policy = inside.policy_at("base", world / "two" / "specs")
    assert policy is not None
    assert policy.raw == b"version: 1\n"
