"""Git (GitPython): specs at a ref, provenance of each spec, the authors of the commits that touched it.

Owns GitPython: its exceptions become `GitError`. Refs and paths are checked before GitPython sees them
(no option injection: a ref may not start with `-`). Outside a repository everything degrades to None /
empty, so the controller also works on a plain folder (queue order then falls back to names).
"""

from __future__ import annotations

import configparser
import functools
import posixpath
from collections.abc import Container, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import git

from controller.adapters.files import SPEC_SUFFIXES, display, has_spec_suffix
from controller.adapters.githistory import LINK_HOPS, REGULAR, SAFE_REF, GitHistory, literal, relative_paths
from controller.core.model.spec import SourceFile
from controller.errors import GitError, ShallowClone


@dataclass(frozen=True, slots=True)
class Commit:
    sha: str
    timestamp: int
    author_email: str
    author_name: str


def _repository(repo: git.Repo | None) -> git.Repo:
    """The repository; asked outside one (a caller that did not check `available`), a GitError says so."""
    if repo is None:
        raise GitError("the specs folder is not inside a git repository", hint="run backfillctl in a git clone")
    return repo


class GitSource:
    def __init__(self, path: Path) -> None:
        try:
            self._repo: git.Repo | None = git.Repo(path, search_parent_directories=True)
        except (git.InvalidGitRepositoryError, git.NoSuchPathError):
            self._repo = None
        if self._repo is not None and self._repo.working_tree_dir is None:  # its files are blobs, not a folder
            raise GitError(
                f"{path} is inside the bare git repository {self._repo.git_dir}, which has no working tree",
                hint="run backfillctl in a clone of it (git clone), where the spec files are checked out",
            )
        self._checkout = None if self._repo is None else Path(str(self._repo.working_tree_dir)).resolve()

    def moved(self) -> bool:
        """Whether the checkout's path leads to another worktree than when opened (git-sync swaps its link to each
        new commit's worktree and removes the old one): the watch process then opens it anew."""
        return self._repo is not None and Path(str(self._repo.working_tree_dir)).resolve() != self._checkout

    @property
    def available(self) -> bool:
        return self._repo is not None

    @functools.cached_property  # resolved once: a pass asks it for every spec path (10,000 resolves cost ~1 s)
    def root(self) -> Path:
        return Path(
            str(_repository(self._repo).working_tree_dir)
        ).resolve()  # never None: a bare repository is refused above

    def head(self) -> str | None:
        if self._repo is None:
            return None
        try:
            return str(self._repo.head.commit.hexsha)
        except ValueError:  # a repository without commits
            return None

    def require_full_history(self) -> None:
        """Refuse a shallow clone (`ShallowClone`, exit 2): queue order needs the commit that added each spec file
        and the gate the last reconciled commit, which a shallow clone may not hold. Outside git: nothing to do."""
        if self._repo is None:
            return
        try:
            shallow = str(self._repo.git.rev_parse("--is-shallow-repository")).strip() == "true"
        except git.GitCommandError as exc:
            raise GitError(
                f"git rev-parse failed: {str(exc.stderr).strip()[:256]}", hint="is the repository intact?"
            ) from None
        if shallow:
            raise ShallowClone(
                f"the specs checkout {self.root} is a shallow clone: the queue's order and the gate need its whole "
                "history",
                hint="clone it fully: git fetch --unshallow (git-sync: --depth=0; actions/checkout: fetch-depth: 0)",
            )

    def relative(self, path: Path) -> str:
        return path.resolve().relative_to(self.root).as_posix()

    def relatives(self, shown: Iterable[str]) -> dict[str, str]:
        return relative_paths(self.root, shown)  # each one's `relative`, with one realpath a folder

    def _log(self, *args: str) -> str:
        """`git log -z`: paths NUL-terminated and never quoted (git quotes non-ASCII, quotes, newlines by default)."""
        repo = _repository(self._repo)
        try:
            return str(repo.git.log("-z", *args))
        except git.GitCommandError as exc:
            raise GitError(
                f"git log failed: {str(exc.stderr).strip()[:256]}", hint="is the repository intact?"
            ) from None

    def introductions(self, folder: Path, paths: Sequence[str] | None = None) -> dict[str, Commit]:
        """Repository-relative path of each file added under `folder` (or only of `paths`, repository-relative) →
        the commit that first added it. A rename adds its new path (`--no-renames`: the same answer whether the
        old path is asked about or not)."""
        if self._repo is None or self.head() is None:
            return {}
        return _first_per_file(
            self._log(
                "--diff-filter=A",
                "--no-renames",
                "--reverse",
                "--format=%x00%H %ct %ae %an",
                "--name-only",
                "--",
                *self._pathspec(folder, paths),
            )
        )

    def config(self, section: str, option: str) -> str | None:
        """A git config value as the repository sees it (its config, the user's, the system's); None when unset or
        outside a repository."""
        if self._repo is None:
            return None
        try:
            value = self._repo.config_reader().get_value(section, option, default="")
        except (configparser.Error, OSError):
            return None
        return str(value).strip() or None

    def last_commits(self, folder: Path, paths: Sequence[str] | None = None) -> dict[str, Commit]:
        """Repository-relative path → the newest commit that touched it (under `folder`, or only `paths`)."""
        if self._repo is None or self.head() is None:
            return {}
        pathspec = self._pathspec(folder, paths)
        return _first_per_file(self._log("--no-renames", "--format=%x00%H %ct %ae %an", "--name-only", "--", *pathspec))

    def _pathspec(self, folder: Path, paths: Sequence[str] | None) -> list[str]:
        """The folder, or the files (literal, from the top: a name may hold `*`): git walks only their history."""
        if paths is None:
            return [str(folder.resolve())]
        return [literal(path) for path in paths]

    def blob_ids(self, folder: Path) -> dict[str, str]:
        """Repository-relative path → git blob id of each regular spec file under `folder` at HEAD, from the tree
        alone (no file is read; a symlink is left out: what it reads is not its blob)."""
        head = self.head()
        if head is None:
            return {}
        found: dict[str, str] = {}
        for path, (mode, sha) in self.history.tree(head, self.relative(folder)).items():  # the gate's listing too
            name = path.rpartition("/")[2]
            if mode in REGULAR and has_spec_suffix(name) and name.rpartition(".")[0] != "policy":
                found[path] = sha
        return found

    def authors_since(self, ref: str | None, folder: Path, head: str = "HEAD") -> dict[str, set[str]]:
        """Path → e-mail addresses of the authors of the commits in ref..head (ref None: every commit up to head)
        that touched it (merges left out: a merge's author merged, and what it brings is its other commits')."""
        tip = self.history.commit_of(head)
        span = f"{self.history.commit_of(ref)}..{tip}" if ref is not None else tip
        out = self._log("--no-merges", span, "--format=%x00%H %ct %ae %an", "--name-only", "--", str(folder.resolve()))
        authors: dict[str, set[str]] = {}
        for commit, names in _blocks(out):
            for name in names:
                authors.setdefault(name, set()).add(commit.author_email)
        return authors

    @functools.cached_property
    def history(self) -> GitHistory:
        """What the approval gate reads of the history (`adapters/githistory.py`)."""
        return GitHistory(_repository(self._repo), self.root)

    def resolve(self, ref: str) -> str:
        if self._repo is None:
            raise GitError("not a git repository, so --base cannot be used", hint="run inside the specs repository")
        if not SAFE_REF.match(ref):
            raise GitError(
                f"{ref!r} is not an acceptable git ref", hint="pass a branch, tag or commit, e.g. origin/main"
            )
        try:
            commit = self._repo.commit(ref)
            commit.tree.hexsha  # noqa: B018 - a shallow clone knows a parent's id but not its object: read it
            return str(commit.hexsha)
        except (git.BadName, ValueError, git.GitCommandError):
            shallow = Path(self._repo.git_dir, "shallow").exists()
            hint = (
                "this is a shallow clone: fetch with depth 0 (git fetch --unshallow, or actions/checkout "
                "with fetch-depth: 0)"
                if shallow
                else "fetch it first, e.g. git fetch origin main"
            )
            raise GitError(f"git ref {ref!r} is not in this repository", hint=hint) from None

    def changed_since(self, ref: str, folder: Path) -> set[str]:
        """Repository-relative paths under `folder` that differ from `ref` on disk: added, changed or renamed since
        it (committed or not), and every untracked file (ignored ones too: the folder's reader reads them)."""
        self.resolve(ref)
        repo = _repository(self._repo)
        where = str(folder.resolve())
        try:
            diff = str(repo.git.diff("-z", "--name-only", "--no-renames", "--diff-filter=ACMT", ref, "--", where))
            untracked = str(repo.git.ls_files("-z", "--others", "--full-name", "--", where))
        except git.GitCommandError as exc:
            raise GitError(
                f"git diff failed: {str(exc.stderr).strip()[:256]}", hint="is the repository intact?"
            ) from None
        return {name for name in (*diff.split("\0"), *untracked.split("\0")) if name}

    def uncommitted(self, folder: Path) -> Uncommitted:
        """Spec and policy files under `folder` that differ from HEAD: (path as shown, how), sorted. Ignored files
        count too: the working-tree reader would apply them as well. And whether anything else there differs (a
        folder's walk may still see it: a symlinked folder, a nested repository)."""
        repo = _repository(self._repo)
        try:
            out = str(
                repo.git.status(
                    "--porcelain=v1", "-z", "--untracked-files=all", "--ignored", "--", str(folder.resolve())
                )
            )
        except git.GitCommandError as exc:
            raise GitError(
                f"git status failed: {str(exc.stderr).strip()[:256]}", hint="is the repository intact?"
            ) from None
        entries = _status_entries(out)
        files = sorted((display(self.root / path), how) for path, how in entries if Path(path).suffix in SPEC_SUFFIXES)
        return Uncommitted(files, other=len(files) < len(entries))

    def committed(self, folder: Path, skip: Container[str] = ()) -> tuple[list[SourceFile], SourceFile | None]:
        """The spec files and the policy under `folder` as committed at HEAD (nothing in a repository without
        commits); paths as in the working tree, the policy's marked `@HEAD`; `skip`: repository-relative paths
        not to read."""
        sha = self.head()
        if sha is None:
            return [], None
        return self.specs_at(sha, folder, skip), self.policy_at(sha, folder, shown="HEAD")

    def policy_at(self, ref: str, folder: Path, shown: str | None = None) -> SourceFile | None:
        """`folder/policy.yaml` (or .yml) as it was at `ref`, if it existed (its path marked `@ref`, or `@shown`)."""
        repo = _repository(self._repo)
        commit = repo.commit(self.resolve(ref))
        prefix = self.relative(folder)
        for suffix in SPEC_SUFFIXES:
            path = f"{prefix}/policy{suffix}" if prefix not in ("", ".") else f"policy{suffix}"
            item = _entry(commit.tree, path)
            if item is None:
                continue
            blob = _follow(commit.tree, item, prefix)
            if blob is None:  # judged by the default policy instead, a pull request could escape the base's rules
                raise GitError(
                    f"{path} at {ref} is a symlink that leads out of the specs folder: the base's policy is unread",
                    hint=f"make {path} an ordinary file on {ref}",
                )
            return SourceFile(f"{path}@{shown or ref}", "policy", blob.data_stream.read())
        return None

    def specs_at(self, ref: str, folder: Path, skip: Container[str] = ()) -> list[SourceFile]:
        """The spec files under `folder` as they were at `ref` (paths as in the working tree), but `skip`
        (repository-relative paths); a symlink is followed inside the folder only, as in the working tree."""
        repo = _repository(self._repo)
        commit = repo.commit(self.resolve(ref))
        prefix = self.relative(folder)
        tree = _entry(commit.tree, prefix) if prefix not in ("", ".") else commit.tree
        if not isinstance(tree, git.Tree):  # absent at `ref`, or a symlink there: no spec to compare with
            return []
        named = [
            item
            for item in tree.traverse()
            if isinstance(item, git.Blob) and _is_spec(str(item.path)) and str(item.path) not in skip
        ]
        return [
            SourceFile(display(self.root / item.path), Path(item.path).stem, blob.data_stream.read())
            for item in named
            if (blob := _follow(commit.tree, item, prefix)) is not None
        ]


_STATUS_WORDS = {"??": "untracked", "!!": "ignored by git"}


class Uncommitted(NamedTuple):
    files: list[tuple[str, str]]  # spec and policy files: (path as shown, how)
    other: bool  # anything else under the folder differs from HEAD


def _status_entries(out: str) -> list[tuple[str, str]]:
    """Parse `git status --porcelain=v1 -z`: `XY path` per entry, a rename's or copy's source path after it."""
    entries: list[tuple[str, str]] = []
    tokens = iter(out.split("\x00"))
    for token in tokens:
        if len(token) < 4:  # `XY p` at least; skips the empty token after the last NUL
            continue
        code, path = token[:2], token[3:]
        if "R" in code or "C" in code:
            next(tokens, None)
        if code in _STATUS_WORDS:
            how = _STATUS_WORDS[code]
        elif "D" in code:
            how = "deleted, not committed"
        else:
            how = "staged, not committed" if code[1] == " " else "modified, not committed"
        entries.append((path, how))
    return entries


def _is_spec(path: str) -> bool:
    return Path(path).suffix in SPEC_SUFFIXES and Path(path).stem != "policy"


def _entry(tree: git.Tree, path: str) -> git.Tree | git.Blob | None:
    """The tree or blob at `path`, None when there is none (or a folder on the way is a symlink: git does not
    follow it, nor does the working tree reader)."""
    try:
        item = tree / path
    except (KeyError, TypeError, AttributeError):
        return None
    return item if isinstance(item, git.Tree | git.Blob) else None


def _follow(root: git.Tree, item: git.Tree | git.Blob, prefix: str) -> git.Blob | None:
    """A blob, or the blob its symlink chain leads to while it stays in the specs folder `prefix` (None: it leads
    out, nowhere, to a folder or round in a loop)."""
    for _ in range(LINK_HOPS):
        if not isinstance(item, git.Blob):
            return None
        if item.mode != git.Blob.link_mode:
            return item
        target = item.data_stream.read().decode("utf-8", "surrogateescape")
        path = posixpath.normpath(posixpath.join(posixpath.dirname(str(item.path)), target))
        inside = prefix in ("", ".") or path.startswith(f"{prefix}/")
        if not inside or path.startswith(("/", "../")) or path == ".." or (found := _entry(root, path)) is None:
            return None
        item = found
    return None


def _blocks(out: str) -> list[tuple[Commit, list[str]]]:
    """Parse `git log -z --format=%x00… --name-only`: each commit is an empty token (the %x00), its header, then
    its paths (the first after a newline); a path is never empty, so an empty token always starts a commit."""
    blocks: list[tuple[Commit, list[str]]] = []
    header_next = False
    for token in out.split("\x00"):
        if not token:
            header_next = True
        elif header_next:
            sha, timestamp, email, *name = token.strip("\n").split(" ", 3)
            blocks.append((Commit(sha, int(timestamp), email.lower(), name[0] if name else ""), []))
            header_next = False
        elif blocks:
            paths = blocks[-1][1]
            paths.append(token[1:] if not paths and token.startswith("\n") else token)
    return blocks


def _first_per_file(out: str) -> dict[str, Commit]:
    found: dict[str, Commit] = {}
    for commit, names in _blocks(out):
        for name in names:
            found.setdefault(name, commit)
    return found
