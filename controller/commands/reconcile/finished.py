"""Finished specs that cost a pass nothing: a spec file whose backfill finished and whose git blob is
the one the store's index keeps is not read, parsed, validated or looked up in git history again.

What a pass needs of such a spec comes from its index row: the model (built from the document values the row
keeps, as from the file), the digest, the queue position (when the file was introduced) and its provenance.
A file that changed, is new, differs from HEAD on disk, or whose binding is not the finished one the row was made
for, is read as before. Every file read is indexed (once a blob): a live spec's row gives its provenance without
a walk of git history, and once it is finished, its file goes unread. A lost store has no rows: its first pass
reads everything, as before.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from controller.adapters import files
from controller.adapters.gitsource import Commit, GitSource
from controller.adapters.store import IndexedHead, IndexedSpec, Store
from controller.core.checks.loaded import LoadedSpec
from controller.core.documents.yamlsafe import Document
from controller.core.model.binding import BindingHead
from controller.core.model.spec import SourceFile, parse_spec


@dataclass(frozen=True, slots=True)
class Unread:
    """The spec files a pass does not read (`entries`) and every file's row (`known`): repository-relative path →
    its index row; and every spec file's blob id at HEAD (what a file read this pass is indexed by)."""

    entries: Mapping[str, IndexedHead] = field(default_factory=dict)
    known: Mapping[str, IndexedHead] = field(default_factory=dict)  # every file's row, finished or not (provenance)
    blobs: Mapping[str, str] = field(default_factory=dict)
    prefix: str = ""  # the specs folder, repository-relative ("" at the top)
    differing: frozenset[str] = frozenset()  # repository-relative paths whose file on disk is not HEAD's
    stale: bool = False  # the index keeps blobs HEAD no longer has (dropped when the index is next written)

    def within(self, path: str) -> str:
        """The repository-relative `path` relative to the specs folder."""
        return path[len(self.prefix) + 1 :] if self.prefix else path


class History:
    """What a reconciler keeps of the spec index between its passes (`--watch`): the specs built from its rows (a
    blob's row never changes) and HEAD's blob ids per commit. The rows themselves are read each pass and let go
    after it: kept, their documents would hold ~1 KB a finished spec through every pass (11 MB at 10,000)."""

    def __init__(self) -> None:
        self._built: dict[tuple[str, str], LoadedSpec] = {}  # (blob id, spec path as shown) → the spec
        self._blobs: tuple[tuple[str, str], dict[str, str]] | None = None  # ((commit, folder), path → blob id)

    def blob_ids(self, git: GitSource, folder: Path) -> dict[str, str]:
        """`git.blob_ids(folder)`, read again only when HEAD moved."""
        key = (git.head() or "", str(folder))
        if self._blobs is None or self._blobs[0] != key:
            self._blobs = (key, git.blob_ids(folder))
        return self._blobs[1]

    def rebuilt(self, rows: Mapping[str, IndexedSpec]) -> list[LoadedSpec]:
        """`rebuilt(rows)`, each spec built once per blob and path."""
        fresh = {path: row for path, row in rows.items() if (row.blob_id, path) not in self._built}
        built = zip(fresh.items(), rebuilt(fresh), strict=True)
        self._built.update(((row.blob_id, path), spec) for (path, row), spec in built)
        keys = [(row.blob_id, path) for path, row in rows.items()]
        self._built = {key: self._built[key] for key in keys}  # only this pass's: a changed file's old spec goes
        return list(self._built.values())


def unread_specs(
    git: GitSource,
    store: Store,
    folder: Path,
    bindings: Mapping[str, BindingHead],
    differing: Iterable[str],
    *,
    history: History,
) -> Unread:
    """The finished, unchanged spec files the index holds (none outside git, or without commits)."""
    if not git.available or git.head() is None:
        return Unread()
    blobs = history.blob_ids(git, folder)
    prefix = git.relative(folder)
    changed = frozenset(git.relatives(differing).values())
    index = store.index_heads()
    known = {
        path: row
        for path, blob in blobs.items()
        if (row := index.get(blob)) is not None and row.path == path and path not in changed
    }
    entries = {path: row for path, row in known.items() if _finished(row, bindings.get(row.name))}
    stale = not index.keys() <= set(blobs.values())
    return Unread(entries, known, blobs, "" if prefix == "." else prefix, changed, stale)


def _finished(row: IndexedHead, binding: BindingHead | None) -> bool:
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
    loaded = []
    for path, row in rows.items():
        stem = _stem(row.path)  # no `shared` values: sharing costs more time than it saves memory here (~1 MB)
        spec = parse_spec(Document(path, dict(row.data)), SourceFile(path, stem, b""))
        object.__setattr__(spec, "digest", row.digest)  # new, not shared yet: `replace` costs ~0.1 s over 10,000
        loaded.append(LoadedSpec(spec, None, stem, _reread))
    return loaded


def new_rows(
    read: Sequence[LoadedSpec],
    bindings: Mapping[str, BindingHead],
    unread: Unread,
    relative: Mapping[str, str],
    origins: Mapping[str, tuple[Commit | None, Commit | None]],
) -> list[IndexedSpec]:
    """Rows for the specs read this pass whose file is HEAD's and has none yet (`relative`: spec path →
    repository-relative path; `origins`: repository-relative path → (introduction, last commit)): a live one's row
    gives its provenance from the next pass on, and lets it go unread once it is finished."""
    rows, seen = [], set[str]()
    for item in read:
        spec, binding = item.spec, bindings.get(item.spec.name)
        path = relative.get(spec.path)
        blob = unread.blobs.get(path) if path is not None else None
        if path is None or blob is None or path in unread.differing or path in unread.known or blob in seen:
            continue
        seen.add(blob)  # a symlink read as its target's file: one row
        data = item.doc.data  # read again, once: a document whose file changed since reads as empty
        if not data or not _keeps(data):
            continue
        intro, last = origins.get(path, (None, None))
        rows.append(
            IndexedSpec(
                blob,
                path,
                spec.name,
                spec.dag_id,
                spec.digest,
                binding.phase.value if binding is not None else "Pending",
                data,
                intro.timestamp if intro else None,
                intro.author_email if intro else "",
                last.sha if last else None,
            )
        )
    return rows


def _keeps(data: Mapping[str, Any]) -> bool:
    """The values come back from JSON as they are (not so: a number key, NaN); else the file stays unindexed."""
    try:
        return bool(json.loads(json.dumps(data, allow_nan=False)) == data)
    except (TypeError, ValueError):
        return False


def _stem(path: str) -> str:
    name = path.rpartition("/")[2]
    suffix = next((s for s in files.SPEC_SUFFIXES if name.endswith(s)), "")
    return name[: -len(suffix)] if suffix else name


def _reread(shown: str) -> bytes | None:
    try:
        return files.read_bounded(Path(shown))
    except OSError:
        return None
