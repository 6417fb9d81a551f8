"""Git (GitPython): the HEAD commit, and when each spec file was introduced (queue order).

Owns GitPython: its exceptions become `GitError`. Outside a repository everything degrades to None /
empty, so the controller also works on a plain folder (queue order then falls back to names).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import git

from controller.errors import GitError


@dataclass(frozen=True, slots=True)
class Introduced:
    commit: str
    timestamp: int
    author_email: str


class GitSource:
    def __init__(self, path: Path) -> None:
        try:
            self._repo: git.Repo | None = git.Repo(path, search_parent_directories=True)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            self._repo = None

    @property
    def available(self) -> bool:
        return self._repo is not None

    def head(self) -> str | None:
        if self._repo is None:
            return None
        try:
            return str(self._repo.head.commit.hexsha)
        except ValueError:  # a repository without commits
            return None

    def introductions(self, folder: Path) -> dict[str, Introduced]:
        """Repository-relative path of each file added under `folder` → the commit that first added it."""
        if self._repo is None or self.head() is None:
            return {}
        try:
            out = self._repo.git.log(
                "--diff-filter=A", "--reverse", "--format=%x00%H %ct %ae", "--name-only", "--", str(folder.resolve())
            )
        except git.GitCommandError as exc:
            raise GitError(f"git log failed: {exc.stderr.strip()[:256]}", hint="is the repository intact?") from None
        return _parse_introductions(out)

    def relative(self, path: Path) -> str:
        assert self._repo is not None
        assert self._repo.working_tree_dir is not None
        return path.resolve().relative_to(Path(self._repo.working_tree_dir).resolve()).as_posix()


def _parse_introductions(out: str) -> dict[str, Introduced]:
    found: dict[str, Introduced] = {}
    for block in out.split("\x00")[1:]:
        header, *names = block.strip().splitlines()
        sha, timestamp, email = header.split(" ", 2)
        for name in names:
            found.setdefault(name.strip(), Introduced(sha, int(timestamp), email))
    return found
