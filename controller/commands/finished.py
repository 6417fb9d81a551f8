"""Finished specs that cost a pass nothing (issue 29): a spec file whose backfill finished and whose git blob is
the one the store's index keeps is not read, parsed, validated or looked up in git history again.

What a pass needs of such a spec comes from its index row: the model (built from the document values the row
keeps, as from the file), the digest, the queue position (when the file was introduced) and its provenance.
A file that changed, is new, differs from HEAD on disk, or whose binding is not the finished one the row was made
for, is read as before; a finished spec read in a pass is indexed then, for the passes after it. A lost store has
no rows: its first passes read everything, as before.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from controller.adapters import files
from controller.adapters.gitsource import Commit, GitSource
from controller.adapters.store import IndexedSpec, Store
from controller.core.checks.loaded import LoadedSpec
from controller.core.documents.yamlsafe import Document
from controller.core.model.binding import Binding
from controller.core.model.spec import SourceFile, parse_spec


@dataclass(frozen=True, slots=True)
class Unread:
    """The spec files a pass does not read: repository-relative path → its index row; and every spec file's
    blob id at HEAD (what a finished spec read this pass is indexed by)."""

    entries: Mapping[str, IndexedSpec] = field(default_factory=dict)
    blobs: Mapping[str, str] = field(default_factory=dict)
    prefix: str = ""  # the specs folder, repository-relative ("" at the top)
    differing: frozenset[str] = frozenset()  # repository-relative paths whose file on disk is not HEAD's
    stale: bool = False  # the index keeps blobs HEAD no longer has (dropped when the index is next written)

    def within(self, path: str) -> str:
        """The repository-relative `path` relative to the specs folder."""
        return path[len(self.prefix) + 1 :] if self.prefix else path


def unread_specs(
    git: GitSource, store: Store, folder: Path, bindings: Mapping[str, Binding], differing: Iterable[str]
) -> Unread:
    """The finished, unchanged spec files the index holds (none outside git, or without commits)."""
    if not git.available or git.head() is None:
        return Unread()
    blobs = git.blob_ids(folder)
    prefix = git.relative(folder)
    changed = frozenset(git.relative(Path(shown)) for shown in differing)
    index = store.indexed_specs()
    entries = {}
    for path, blob in blobs.items():
        row = index.get(blob)
        if row is not None and row.path == path and path not in changed and _finished(row, bindings.get(row.name)):
            entries[path] = row
    stale = not index.keys() <= set(blobs.values())
    return Unread(entries, blobs, "" if prefix == "." else prefix, changed, stale)


def _finished(row: IndexedSpec, binding: Binding | None) -> bool:
    """The binding is the finished one the row was made for (a lost or rebuilt store has none)."""
    return binding is not None and binding.phase.terminal and binding.spec_digest == row.digest


def shown_paths(base: Path) -> Callable[[str], str]:
    """A path below `base` (relative to it) → as `files.display` shows it, working out each folder once."""

    @functools.cache
    def folder(parent: str) -> str:
        return files.display(base / parent) if parent else files.display(base)

    def shown(relative: str) -> str:
        parent, _, name = relative.rpartition("/")
        where = folder(parent)
        return name if where == "." else f"{where}/{name}"

    return shown


def rebuilt(rows: Mapping[str, IndexedSpec]) -> list[LoadedSpec]:
    """The index rows (by spec path as shown) as loaded specs; their files are read again only to place a
    diagnostic (as a released spec's are)."""
    shared: dict[object, object] = {}
    loaded = []
    for path, row in rows.items():
        stem = _stem(row.path)
        spec = parse_spec(Document(path, dict(row.data)), SourceFile(path, stem, b""), shared)
        loaded.append(LoadedSpec(replace(spec, digest=row.digest), None, stem, _reread))
    return loaded


def new_rows(
    read: Sequence[LoadedSpec],
    bindings: Mapping[str, Binding],
    unread: Unread,
    relative: Mapping[str, str],
    origins: Mapping[str, tuple[Commit | None, Commit | None]],
) -> list[IndexedSpec]:
    """Rows for the finished specs read this pass whose file is HEAD's (`relative`: spec path → repository-relative
    path; `origins`: repository-relative path → (introduction, last commit))."""
    rows = []
    for item in read:
        spec, binding = item.spec, bindings.get(item.spec.name)
        path = relative.get(spec.path)
        blob = unread.blobs.get(path) if path is not None else None
        if path is None or blob is None or path in unread.differing or binding is None or not binding.phase.terminal:
            continue
        if binding.spec_digest != spec.digest:
            continue
        data = item.doc.data  # read again, once: a document whose file changed since reads as empty
        if not data:
            continue
        intro, last = origins.get(path, (None, None))
        rows.append(
            IndexedSpec(
                blob,
                path,
                spec.name,
                spec.dag_id,
                spec.digest,
                binding.phase.value,
                data,
                intro.timestamp if intro else None,
                intro.author_email if intro else "",
                last.sha if last else None,
            )
        )
    return rows


def _stem(path: str) -> str:
    name = path.rpartition("/")[2]
    suffix = next((s for s in files.SPEC_SUFFIXES if name.endswith(s)), "")
    return name[: -len(suffix)] if suffix else name


def _reread(shown: str) -> bytes | None:
    try:
        return files.read_bounded(Path(shown))
    except OSError:
        return None
