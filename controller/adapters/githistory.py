"""What the approval gate reads of git history (GitPython's command runner only): the blob each spec and policy
file reads at a commit, ancestry, first parents, the branch's commits, the commit that last changed a file.

Only `git` commands, never GitPython's object database: that keeps `git cat-file` processes open for as long as
the repository object lives, and a reconciler under `--watch` lives long. Failures are `GitError`.
"""

from __future__ import annotations

import os
import posixpath
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from types import MappingProxyType

import git

from controller.adapters.files import has_spec_suffix
from controller.errors import GitError

REGULAR = ("100644", "100755")  # git's modes of ordinary files
LINK = "120000"  # git's mode of a symlink
SAFE_REF = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._/@{}~^-]*$")  # no option injection: never starts with `-`
LINK_HOPS = 8  # symlinks followed in a row before a chain counts as a loop
_LISTED_ALONE = 256  # paths `file_blobs` lists one by one; more: the folder's whole listing (one argv)
_TREES_KEPT = 2  # HEAD's, and the one other commit a pass compares it with (a base, the last reconciled commit)


def literal(path: str) -> str:
    """A repository-relative path as git must read it: from the top, never a pattern (a name may hold `*` or start
    with `:`)."""
    return f":(top,literal){path}"


class GitHistory:
    def __init__(self, repo: git.Repo, root: Path) -> None:
        self._repo, self.root = repo, root
        self._trees: dict[tuple[str, str], Mapping[str, tuple[str, str]]] = {}  # the last `tree`s (_TREES_KEPT)

    def relative(self, path: Path) -> str:
        return path.resolve().relative_to(self.root).as_posix()

    def _git(self, command: str, *args: str) -> str:
        """`git COMMAND ARGS`; a failure is a GitError naming the command."""
        try:
            return str(self._repo.git.execute(["git", command, *args]))
        except git.GitCommandError as exc:
            raise GitError(
                f"git {command} failed: {str(exc.stderr).strip()[:256]}", hint="is the repository intact?"
            ) from None

    def blob(self, sha: str) -> bytes:
        """A blob's bytes."""
        try:
            raw = self._repo.git.execute(
                ["git", "cat-file", "blob", sha], stdout_as_string=False, strip_newline_in_stdout=False
            )
        except git.GitCommandError as exc:
            raise GitError(
                f"git cat-file failed: {str(exc.stderr).strip()[:256]}", hint="is the repository intact?"
            ) from None
        return bytes(raw)

    def has_commit(self, sha: str) -> bool:
        """Whether this clone holds the commit and its tree (a shallow or partial clone may not; a force-push's
        old commits may be gone)."""
        if not SAFE_REF.match(sha):
            return False
        try:
            self._repo.git.execute(["git", "cat-file", "-e", f"{sha}^{{tree}}"])
        except git.GitCommandError:
            return False
        return True

    def commit_of(self, ref: str) -> str:
        """The commit `ref` names (a GitError when this clone does not hold it)."""
        if not SAFE_REF.match(ref) or not self.has_commit(ref):
            raise GitError(f"commit {ref!r} is not in this repository", hint="fetch it first, e.g. git fetch origin")
        return self._git("rev-parse", "--verify", "-q", f"{ref}^{{commit}}").strip()

    def is_ancestor(self, older: str, newer: str) -> bool:
        """Whether `older` is in `newer`'s history (itself included)."""
        try:
            self._repo.git.execute(["git", "merge-base", "--is-ancestor", self.commit_of(older), self.commit_of(newer)])
        except git.GitCommandError as exc:
            if exc.status == 1:
                return False
            raise GitError(
                f"git merge-base failed: {str(exc.stderr).strip()[:256]}", hint="is the repository intact?"
            ) from None
        return True

    def first_parent(self, sha: str) -> str | None:
        """The commit's first parent (None: a root commit)."""
        parents = self.parents(sha)
        return parents[0] if parents else None

    def parents(self, sha: str) -> list[str]:
        """The commit's parents, first parent first (two or more: a merge commit)."""
        return self._git("log", "-1", "--format=%P", self.commit_of(sha)).split()

    def file_blobs(self, ref: str, folder: Path, only: Collection[str] | None = None) -> dict[str, str]:
        """Repository-relative path → the blob each spec or policy file under `folder` reads at `ref`: a symlink's
        is the blob its chain leads to inside the folder (one that leads out is left out, as the reader does).
        `only`: just these paths (a few are listed alone; the whole folder's listing costs ~40 ms at 10,000)."""
        prefix, commit = self.relative(folder), self.commit_of(ref)
        entries = self._listed(commit, prefix, only)
        found: dict[str, str] = {}
        for path, (mode, blob) in entries.items():
            if not has_spec_suffix(path.rpartition("/")[2]) or (only is not None and path not in only):
                continue
            if mode == LINK and (commit, prefix) not in self._trees:
                entries = self.tree(commit, prefix)  # a link's target may be any file of the folder
            target = blob if mode in REGULAR else self._link_target(path, entries, prefix) if mode == LINK else None
            if target is not None:
                found[path] = target
        return found

    def _listed(self, commit: str, prefix: str, only: Collection[str] | None) -> Mapping[str, tuple[str, str]]:
        """The folder's entries, or only those of `only` when they are few and the folder is not listed yet."""
        if (
            only is None
            or len(only) > _LISTED_ALONE
            or (commit, prefix) in self._trees
            or not all(map(str.isascii, only))
        ):
            return self.tree(commit, prefix)  # a non-ASCII path: git may normalise an argument (macOS), never a listing
        inside = sorted(p for p in only if prefix in ("", ".") or p.startswith(f"{prefix}/"))
        return self._entries(commit, inside) if inside else {}

    def tree_id(self, sha: str, prefix: str) -> str | None:
        """The id of the tree at `prefix` (repository-relative) in commit `sha`: one id for everything the folder
        holds (None: no such folder there)."""
        if not SAFE_REF.match(sha):  # no option injection: a ref never starts with `-`
            return None
        if prefix in ("", "."):
            return self._git("rev-parse", "--verify", f"{sha}^{{tree}}").strip()
        entry = self._git("ls-tree", "-z", sha, "--", prefix).split("\0")[0]  # the folder's own entry, unlisted
        meta, _, path = entry.partition("\t")
        kind_id = meta.split(" ")[1:]
        return kind_id[1] if path == prefix and kind_id[:1] == ["tree"] else None

    def tree(self, sha: str, prefix: str) -> Mapping[str, tuple[str, str]]:
        """Every blob under `prefix` (repository-relative) in commit `sha`'s tree: path → (mode, blob id), read
        only. A commit's tree never changes, so the last two are kept: a pass lists HEAD's once, for the index and
        the gate."""
        if not SAFE_REF.match(sha):  # no option injection: a ref never starts with `-`
            raise GitError(f"commit {sha!r} is not in this repository", hint="fetch it first, e.g. git fetch origin")
        key = (sha, prefix)
        entries = self._trees.pop(key, None)  # the least recently asked goes first
        if entries is None:
            entries = MappingProxyType(self._entries(sha, [] if prefix in ("", ".") else [prefix]))
        self._trees = {**dict(list(self._trees.items())[-(_TREES_KEPT - 1) :]), key: entries}
        return entries

    def _entries(self, sha: str, paths: Sequence[str]) -> dict[str, tuple[str, str]]:
        """`git ls-tree -r` of `paths` (literal, never patterns; none: the whole tree): path → (mode, blob id)."""
        listed: dict[str, tuple[str, str]] = {}
        where = ["--", *map(literal, paths)] if paths else []
        for entry in filter(None, self._git("ls-tree", "-r", "-z", "--full-tree", sha, *where).split("\0")):
            meta, path = entry.split("\t", 1)
            mode, kind, blob = meta.split(" ")
            if kind == "blob":
                listed[path] = (mode, blob)
        return listed

    def _link_target(self, path: str, entries: Mapping[str, tuple[str, str]], prefix: str) -> str | None:
        """The blob a symlink chain leads to while it stays in the folder (None: out, nowhere, a loop)."""
        for _ in range(LINK_HOPS):
            mode, blob = entries[path]
            if mode in REGULAR:
                return blob
            if mode != LINK:
                return None
            target = self.blob(blob).decode("utf-8", "surrogateescape")
            path = posixpath.normpath(posixpath.join(posixpath.dirname(path), target))
            inside = prefix in ("", ".") or path.startswith(f"{prefix}/")
            if not inside or path.startswith(("/", "../")) or path not in entries:
                return None
        return None

    def branch_commits(self, since: str | None, head: str, folder: Path) -> list[str]:
        """The commits on the branch (first parents) after `since` up to `head` that touched `folder`, oldest first;
        `since` None: every one."""
        tip = self.commit_of(head)
        span = [tip] if since is None else [f"{self.commit_of(since)}..{tip}"]
        out = self._git("log", "--first-parent", "--reverse", "--format=%H", *span, "--", str(folder.resolve()))
        return [line for line in out.splitlines() if line]

    def depth(self, sha: str) -> int:
        """How many commits `sha`'s history holds (itself included): a later commit on a branch has more."""
        return int(self._git("rev-list", "--count", self.commit_of(sha)).strip() or 0)

    @property
    def shallow(self) -> bool:
        """A shallow clone: commits older than its depth are not here (a reconciled one may be among them)."""
        return Path(self._repo.git_dir, "shallow").exists()

    def carrier(self, head: str, path: str) -> str | None:
        """The last commit on the branch (first parents) up to `head` that changed `path` (repository-relative)."""
        tip = self.commit_of(head)
        out = self._git("log", "--first-parent", "-1", "--format=%H", tip, "--", literal(path))
        return out.strip() or None


def relative_paths(root: Path, shown: Iterable[str]) -> dict[str, str]:
    """Each path resolved and made relative to `root` (a resolved repository root), as `Path.resolve` would: a
    file that is no symlink resolves through its folder, each folder once (one `realpath` a folder, not one a file:
    10,000 specs in one folder cost 0.6 s the other way). A path outside `root` is `relative_to`'s ValueError."""
    top, folders = str(root), dict[str, str]()

    def one(text: str) -> str:
        parent, name = os.path.split(text)
        if name not in ("", ".", "..") and not os.path.islink(text):
            where = folders.get(parent) or folders.setdefault(parent, os.path.realpath(parent or "."))
            if where == top:
                return name
            if where.startswith(top + os.sep):
                return f"{where[len(top) + 1 :]}/{name}"
        return Path(text).resolve().relative_to(root).as_posix()  # a symlink, or outside: as one path's

    return {text: one(text) for text in shown}
