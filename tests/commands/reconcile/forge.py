"""A forge for the gate's tests: a specs repository in a real git repository, pull requests on branches merged as
GitHub merges them (a merge commit, a squash, a rebase), and the evidence document of each merge."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.commands.reconcile.harness import Bench
from tests.fakes.github import REPO

PEOPLE = {"alice", "bob", "carol", "dave", "erin", "olga", "mallory", "Bob"}


def git(root: Path, *args: str, author: str = "alice") -> str:
    """git as `author` (e-mail `<author>@users.noreply.github.com`: their GitHub login is known)."""
    email = f"{author}@users.noreply.github.com"
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": author, "GIT_AUTHOR_EMAIL": email}
    env |= {"GIT_COMMITTER_NAME": author, "GIT_COMMITTER_EMAIL": email}
    return subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True).stdout.strip()


@dataclass
class Pull:
    """A pull request: its branch, number and author; `head` once pushed."""

    number: int
    author: str
    branch: str
    base: str = ""  # the commit of main it branched from
    head: str = ""
    commits: list[str] = field(default_factory=list)


@dataclass(frozen=True, slots=True)
class Merged:
    pull: Pull
    base_sha: str  # main before the merge
    merge_sha: str  # the commit on main that carries it
    method: str


class Forge:
    def __init__(self, bench: Bench) -> None:
        self.bench, self.root = bench, bench.root
        (self.root / ".gitignore").write_text("state.db*\nevidence/\n")
        git(self.root, "init", "-q", "-b", "main")
        (self.root / "evidence").mkdir()
        self.numbers = 40

    def commit(self, message: str, author: str = "alice") -> str:
        git(self.root, "add", "-A", author=author)
        git(self.root, "commit", "-qm", message, author=author)
        return self.head()

    def head(self, ref: str = "HEAD") -> str:
        return git(self.root, "rev-parse", ref)

    def open(self, author: str = "alice") -> Pull:
        """A pull request branch from main (checked out: write its files, then `push`)."""
        self.numbers += 1
        pull = Pull(self.numbers, author, f"pr-{self.numbers}", self.head("main"))
        git(self.root, "checkout", "-q", "-b", pull.branch, "main")
        return pull

    def push(self, pull: Pull, message: str, author: str | None = None) -> str:
        sha = self.commit(message, author or pull.author)
        pull.head = sha
        pull.commits.append(sha)
        return sha

    def merge(self, pull: Pull, method: str = "merge", merger: str = "carol") -> Merged:
        """Merge as GitHub does: a merge commit, one squashed commit, or each commit rebased onto main."""
        git(self.root, "checkout", "-q", "main")
        base = self.head()
        if method == "merge":
            git(
                self.root,
                "merge",
                "-q",
                "--no-ff",
                "-m",
                f"Merge pull request #{pull.number}",
                pull.branch,
                author=merger,
            )
        elif method == "squash":
            git(self.root, "merge", "-q", "--squash", pull.branch, author=merger)
            git(self.root, "commit", "-qm", f"PR #{pull.number} (#{pull.number})", author=pull.author)
        else:
            for sha in pull.commits:
                author = git(self.root, "log", "-1", "--format=%an", sha)
                git(self.root, "cherry-pick", "--allow-empty", sha, author=author)
        return Merged(pull, base, self.head(), method)

    def document(
        self, merged: Merged, *reviews: dict[str, Any], head: str | None = None, name: str | None = None
    ) -> Path:
        """The evidence document the workflow writes for `merged`."""
        pull = merged.pull
        data = {
            "version": 1,
            "forge": "github",
            "change": {
                "number": pull.number,
                "url": f"https://github.com/acme/specs/pull/{pull.number}",
                "author": pull.author,
                "base_sha": merged.base_sha,
                "head_sha": head or pull.head,
                "merge_sha": merged.merge_sha,
                "merge_method": merged.method,
            },
            "reviews": list(reviews),
        }
        return self.write(name or f"pr-{pull.number}.json", data)

    def pushed(self, commit: str) -> Path:
        """The document of a commit pushed without a pull request."""
        data = {"version": 1, "forge": "github", "commit": commit, "change": None, "reviews": []}
        return self.write(f"push-{commit[:8]}.json", data)

    def write(self, name: str, data: dict[str, Any]) -> Path:
        path = self.root / "evidence" / name
        path.write_text(json.dumps(data, indent=1))
        return path


REVIEW_IDS = iter(range(9000, 10000))


def review(
    reviewer: str | None, state: str, commit: str, *, permission: str | None = "write", at: str = "2026-11-01T10:00:00Z"
) -> dict[str, Any]:
    return {
        "id": next(REVIEW_IDS),
        "reviewer": reviewer,
        "state": state,
        "commit": commit,
        "permission": permission,
        "submitted_at": at,
    }


def commit_json(root: Path, sha: str) -> dict[str, Any]:
    """GET /repos/{o}/{r}/commits/{sha} as GitHub answers it (the fields the evidence provider reads)."""
    parents = git(root, "log", "-1", "--format=%P", sha).split()
    email = git(root, "log", "-1", "--format=%ae", sha)
    files = git(root, "diff-tree", "--no-commit-id", "--name-only", "-r", "--root", sha).splitlines()
    return {
        "sha": sha,
        "parents": [{"sha": p} for p in parents],
        "commit": {"author": {"email": email}},
        "files": [{"filename": f} for f in files],
    }


def pull_json(merged: Merged) -> dict[str, Any]:
    """GET /repos/{o}/{r}/pulls/{n} of a merged pull request (the fields the evidence readers read)."""
    pull = merged.pull
    return {
        "number": pull.number,
        "html_url": f"https://github.com/acme/specs/pull/{pull.number}",
        "user": {"login": pull.author},
        "head": {"sha": pull.head},
        "merge_commit_sha": merged.merge_sha,
        "merged_at": "2026-11-01T12:00:00Z",
        "commits": len(pull.commits),
    }


def answer_merge(answers: dict[str, Any], root: Path, merged: Merged, reviews: list[dict[str, Any]]) -> None:
    """What GitHub's API says of `merged` (in the fake GitHub's `answers`): the pull request of each commit it
    landed on main and of its own commits, the pull request, its reviews (GitHub's shape) and commits."""
    pull, made = merged.pull, pull_json(merged)
    landed = git(root, "rev-list", "--first-parent", f"{merged.base_sha}..{merged.merge_sha}").split()
    for commit in [*landed, *pull.commits]:  # each rebased commit is the pull request's too
        answers[f"{REPO}/commits/{commit}/pulls"] = [made]
    answers[f"{REPO}/pulls/{pull.number}"] = made
    answers[f"{REPO}/pulls/{pull.number}/reviews"] = reviews
    answers[f"{REPO}/pulls/{pull.number}/commits"] = [{"sha": c} for c in pull.commits]
    for commit in pull.commits:
        answers[f"{REPO}/commits/{commit}"] = commit_json(root, commit)
