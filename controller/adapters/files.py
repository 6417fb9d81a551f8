"""Reading spec and policy files from disk, confined to the specs tree, and the packaged schemas."""

from __future__ import annotations

import errno
import json
import os
import stat
from collections.abc import Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.core.documents.diagnostics import Diagnostic, Location
from controller.core.documents.yamlsafe import MAX_BYTES
from controller.core.model.spec import SourceFile
from controller.errors import ConfigError

SPEC_SUFFIXES = (".yaml", ".yml")
POLICY_STEM = "policy"
# files read in a row before they are checked: reading and checking in turn for every file costs ~15 % more CPU
# (the system calls between two files evict what the checks keep hot); a few hundred small files are ~100 KB
READ_BATCH = 256
_SCHEMA_DIRS = (Path(__file__).resolve().parents[2] / "schemas", Path(__file__).resolve().parents[1] / "_schemas")


@dataclass
class SpecTree:
    """What `collect` found: spec files (read one at a time by `sources`), the policy file, and files that could
    not be read (`sources` adds to them as it goes)."""

    found: list[tuple[Path, Path]] = field(default_factory=list)  # (file, its root resolved), in order
    policy: SourceFile | None = None
    problems: list[Diagnostic] = field(default_factory=list)

    def sources(self, batch: int = READ_BATCH) -> Iterator[SourceFile]:
        """Read the spec files in order, `batch` at a time (a tree of 10,000 specs is never all in memory); once."""
        self.found.reverse()
        while self.found:  # each path is dropped once read: its memory serves the next files
            read = [self.found.pop() for _ in range(min(batch, len(self.found)))]
            yield from [source for path, root in read if (source := _read(path, root, self)) is not None]


def load_schema(name: str) -> dict[str, Any]:
    """Read `schemas/<name>` from the source tree, or the copy packaged in the wheel."""
    for folder in _SCHEMA_DIRS:
        candidate = folder / name
        if candidate.is_file():
            data: dict[str, Any] = json.loads(candidate.read_text(encoding="utf-8"))
            return data
    raise ConfigError(
        f"schema {name} not found in {', '.join(map(str, _SCHEMA_DIRS))}",
        hint="reinstall the package: pip install -e .",
    )


def collect(
    paths: Sequence[Path], specs_dir: Path, skip: Collection[str] = frozenset(), only: Sequence[str] | None = None
) -> SpecTree:
    """Spec files under `paths` (recursively), plus `specs_dir/policy.yaml` when it exists, but `skip` (paths
    relative to a folder in `paths`, `/`-separated); with `only` (paths relative to `specs_dir`, what an earlier
    walk of an unchanged folder found), those, unwalked. Every folder read from must resolve inside its repository
    (ConfigError), every file inside its folder (a located problem)."""
    tree = SpecTree()
    roots = {root: confine(root) for root in [specs_dir, *(p if p.is_dir() else p.parent for p in paths)]}
    policy_file = policy_path(specs_dir)
    if policy_file is not None:
        tree.policy = _read(policy_file, roots[specs_dir], tree)
    listed = _expand(paths, roots, skip) if only is None else (specs_dir / relative for relative in only)
    for path in sorted(set(listed)):
        if policy_file is None or path.resolve() != policy_file.resolve():
            tree.found.append((path, roots[_root_for(path, paths)]))
    return tree


def confine(folder: Path) -> Path:
    """`folder` resolved, refused when it resolves outside the repository it is in: in CI the pull request controls
    specs/, and a symlink out of the checkout would read (and echo in errors) the runner's files."""
    resolved = folder.resolve()
    repository = _repository(folder)
    if repository is not None and not resolved.is_relative_to(repository.resolve()):
        raise ConfigError(
            f"{display(folder)} resolves to {resolved}, outside the repository {repository}: nothing was read from it",
            hint="specs must be files in the repository: replace the symlink with the folder and its files",
        )
    return resolved


def _repository(folder: Path) -> Path | None:
    """The working tree `folder` is in: the nearest folder at or above it with a `.git`, not a symlink (a symlinked
    folder inside the repository could point at another checkout)."""
    absolute = folder.absolute()
    for candidate in (absolute, *absolute.parents):
        if (candidate / ".git").exists() and not candidate.is_symlink():
            return candidate
    return None


def names_in_tree(specs_dir: Path) -> dict[str, list[str]]:
    """Spec name → files that would carry it (a spec's name must equal its file name), without reading them."""
    policy = policy_path(specs_dir)
    found: dict[str, list[str]] = {}
    for path in sorted(specs_dir.rglob("*")) if specs_dir.is_dir() else ():
        if path.suffix in SPEC_SUFFIXES and not path.is_dir() and path != policy:
            found.setdefault(_stem(path), []).append(display(path))
    return found


def policy_path(specs_dir: Path) -> Path | None:
    for suffix in SPEC_SUFFIXES:
        candidate = specs_dir / f"{POLICY_STEM}{suffix}"
        if candidate.exists() or candidate.is_symlink():
            return candidate
    return None


def _expand(paths: Sequence[Path], roots: dict[Path, Path], skip: Collection[str] = frozenset()) -> Iterable[Path]:
    for path in paths:
        if path.is_dir():
            yield from _walk(path, roots[path], skip)
        elif path.exists() or path.is_symlink():
            yield path
        else:
            raise ConfigError(
                f"{path}: no such file or directory",
                hint="pass spec files or folders, e.g. `backfillctl validate specs/`",
            )


def _walk(folder: Path, resolved: Path, skip: Collection[str] = frozenset()) -> Iterator[Path]:
    """Spec files below `folder` but `skip` (relative to it), and its symlinked folders that lead out of it
    (reported by `_read`; a symlinked folder is never entered: os.walk does not follow links)."""
    start = len(os.fspath(folder)) + 1
    for top, folders, names in os.walk(folder):
        base, within = Path(top), top[start:]
        for name in names:
            if has_spec_suffix(name) and (f"{within}/{name}" if within else name) not in skip:
                yield base / name
        for name in folders:
            link = base / name
            if link.is_symlink() and not link.resolve().is_relative_to(resolved):
                yield link


def has_spec_suffix(name: str) -> bool:
    """`Path(name).suffix in SPEC_SUFFIXES`, on the string (a Path a file costs ~0.1 s over 10,000 files)."""
    return name.endswith(SPEC_SUFFIXES) and name.rfind(".") > 0


def _root_for(path: Path, roots: Sequence[Path]) -> Path:
    for root in roots:
        if root.is_dir() and path.is_relative_to(root):
            return root
    return path.parent


def display(path: Path) -> str:
    """The path as users typed it: relative to the working directory when below it."""
    try:
        return path.absolute().relative_to(Path.cwd()).as_posix()
    except ValueError:
        return path.as_posix()


def _read(path: Path, root: Path, tree: SpecTree) -> SourceFile | None:
    """`path`'s bytes, or a problem in `tree`; `root` is the folder it was found under, resolved."""
    shown = display(path)
    problem = _unsafe(path, root)
    if problem is None:
        try:
            return SourceFile(shown, _stem(path), read_bounded(path), _reread)
        except OSError as exc:
            problem = f"cannot read the file: {exc.strerror or exc}"
    hint = _HINTS.get(problem, "a spec is a few hundred bytes; is this the right file?")
    tree.problems.append(Diagnostic(Location(shown, 1, 1), problem, hint))
    return None


def _stem(path: Path) -> str:
    return path.name[: -len(path.suffix)] if path.suffix in SPEC_SUFFIXES else path.stem


def _unsafe(path: Path, root: Path) -> str | None:
    if not path.resolve().is_relative_to(root):  # every component, not only the last
        if not path.is_symlink():
            return _THROUGH_FOLDER
        return _LINKED_FOLDER if path.is_dir() else _OUTSIDE
    if not path.is_file():
        return "not a regular file"
    size = path.stat().st_size
    if size > MAX_BYTES:
        return f"file is {size} bytes; the limit is {MAX_BYTES} (1 MiB)"
    return None


def read_bounded(path: Path, limit: int = MAX_BYTES) -> bytes:
    """At most `limit + 1` bytes (one more than allowed tells the caller the file is too large) of a regular file;
    a FIFO or a device (/dev/zero) raises OSError before a byte is read: opened without blocking, then checked."""
    with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            raise OSError(errno.EINVAL, "not a regular file", str(path))
        return handle.read(limit + 1)


def _reread(shown: str) -> bytes | None:
    """A spec file again by its shown path (relative to the working directory, or as given), to place a diagnostic
    found after its bytes were dropped; None when it cannot be read (the validator also compares digests)."""
    try:
        return read_bounded(Path(shown))
    except OSError:
        return None


_OUTSIDE = "symlink points outside the specs tree"
_LINKED_FOLDER = "symlinked folder points outside the specs tree; nothing in it was read"
_THROUGH_FOLDER = "resolves outside the specs tree through a symlinked folder"
_HINTS = {
    _OUTSIDE: "copy the spec into the tree instead of linking to it",
    _LINKED_FOLDER: "copy the specs into the tree instead of linking to their folder",
    _THROUGH_FOLDER: "copy the specs into the tree instead of linking to their folder",
    "not a regular file": "specs must be ordinary files",
}


def write_new(path: Path, text: str) -> None:
    """Create a new file; refuse to overwrite an existing one."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        raise ConfigError(
            f"{display(path)} already exists", hint="choose another name; specs are never overwritten"
        ) from None
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
