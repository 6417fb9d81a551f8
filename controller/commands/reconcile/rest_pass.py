"""A pass that reads only the live specs: when the store's rest summary of the specs folder was made from HEAD's
tree of that folder and from the finished bindings and index rows as they still are (`adapters/store/rest_summary.py`),
the finished specs at rest are counted from it; their files, bindings and index rows are not read, and the folder is
not walked (the summary lists the files the last walk read).

Any pass whose key differs (a new commit touching the folder, a finished binding or index row written, files that
differ from HEAD, a stop, another release) takes the whole path, and writes the summary again when everything it
read allows one: what rests, with nothing written to the index and no file read twice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from controller.adapters.gitsource import GitSource
from controller.adapters.store import RestKey, RestSummary, Store
from controller.commands.reconcile.finished import Unread
from controller.core.model.binding import BindingHead, Claim
from controller.core.plan.rest import Resting


class Fallback(Exception):  # not an error: the summary cannot stand for this pass, the whole path reads
    """Raised inside a summarised load; the pass reads every finished spec's row instead."""


@dataclass(frozen=True, slots=True)
class Made:
    """What a whole pass found that a summary keeps: what rests, the rows it did not read, the files it read."""

    resting: Resting
    unread: Unread
    walked: tuple[str, ...]


def rest_key(git: GitSource, store: Store, folder: Path, *, clean: bool) -> tuple[str, RestKey] | None:
    """The folder (repository-relative) and the key a summary of this pass must have; None: no summary is read or
    written (files differ from HEAD: not `clean`, not in git, a stop holds, a store without the revision)."""
    head = git.head() if clean and git.available else None
    if head is None:
        return None
    revision = store.finished_revision()  # first: a write after this read makes the summary written stale
    if revision is None or store.stops():
        return None
    relative = git.relative(folder)
    tree = git.history.tree_id(head, relative)
    return None if tree is None else (relative, RestKey(tree, revision))


def unread_of(summary: RestSummary, folder: str) -> Unread:
    """The rows a summarised pass knows without reading the index: those of the files not at rest."""
    return Unread(summary.entries, summary.known, summary.blobs, "" if folder == "." else folder)


def summary_of(
    key: RestKey, made: Made, every: Mapping[str, BindingHead], claims: Mapping[str, Claim]
) -> RestSummary | None:
    """The summary of a whole pass, with the claims it read (None: nothing rests, there is nothing to skip)."""
    names = {name for names in made.resting.by_dag.values() for name in names}
    if not names:
        return None
    unread = made.unread
    resting = {path for path, row in unread.entries.items() if row.name in names}
    return RestSummary(
        key,
        made.resting,
        tuple(sorted(name for name, head in every.items() if head.phase.terminal and name not in names)),
        made.walked,
        {path: row for path, row in unread.entries.items() if path not in resting},
        {path: row for path, row in unread.known.items() if path not in resting},
        {path: blob for path, blob in unread.blobs.items() if path not in resting},
        claims,
    )


def kept_claims(summary: RestSummary, walked: frozenset[str], store: Store) -> dict[str, Claim]:
    """The claims of the `walked` specs at rest: the summary's, and any it does not keep read from the store."""
    found = {name: claim for name, claim in summary.claims.items() if name in walked}
    missing = walked - found.keys()
    return found | (store.claims(missing) if missing else {})
