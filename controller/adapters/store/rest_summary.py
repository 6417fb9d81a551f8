"""The rest summary (table `rest_summaries`, one row per specs folder): what the last pass that read every finished
spec's row found at rest, so that a pass over the same folder tree and the same finished bindings reads only the live
specs: their files, bindings and index rows; the finished ones are counted from here.

It is keyed by what it was made from: the folder's tree at HEAD, the store's `finished` revision (table
`store_revisions`: bumped in the same transaction by every write of a binding whose old or new phase is terminal, and
by every write of the spec index), and this release's format. A summary whose key differs is not read: the pass takes
the whole path, which writes a new one. A row that cannot be read back is no summary.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from sqlalchemy import Table, select
from sqlalchemy.dialects import sqlite

from controller import __version__
from controller.adapters.store.database import Clock, Database, stamp
from controller.adapters.store.revisions import REVISION
from controller.adapters.store.spec_index import IndexedHead
from controller.adapters.store.tables import rest_summaries
from controller.core.model.binding import Claim, Phase
from controller.core.plan.rest import Resting

log = logging.getLogger(__name__)
_FOLDER_WIDTH: int = getattr(rest_summaries.c.folder.type, "length", 0) or 0  # the column's String(width)
FORMAT = f"1/{__version__}"  # a summary another release wrote is made again


@dataclass(frozen=True, slots=True)
class RestKey:
    """What a summary was made from: a pass with another key does not read it."""

    tree: str  # the specs folder's tree id at HEAD
    revision: int  # the store's `finished` revision before the pass read anything
    format: str = FORMAT


def _mapping() -> Mapping[str, Any]:
    return MappingProxyType({})


@dataclass(frozen=True, slots=True)
class RestSummary:
    """The specs at rest, and what a pass reads instead of every row: the spec files it read (relative to the folder),
    the finished bindings not at rest (read whole), of the files not at rest, their rows and blob ids
    (repository-relative paths; `entries`: those unread, built from their rows), and the claims of the specs at rest
    the pass walked (a finished binding's claim changes only with a write that bumps the revision)."""

    key: RestKey
    resting: Resting
    others: tuple[str, ...] = ()
    walked: tuple[str, ...] = ()
    entries: Mapping[str, IndexedHead] = field(default_factory=_mapping)
    known: Mapping[str, IndexedHead] = field(default_factory=_mapping)
    blobs: Mapping[str, str] = field(default_factory=_mapping)
    claims: Mapping[str, Claim] = field(default_factory=_mapping)

    def as_json(self) -> dict[str, Any]:
        return {
            "key": {"tree": self.key.tree, "revision": self.key.revision, "format": self.key.format},
            "phases": [[phase.value, count] for phase, count in self.resting.phases],
            "by_dag": {dag: list(names) for dag, names in self.resting.by_dag.items()},
            "others": list(self.others),
            "walked": list(self.walked),
            "entries": {path: _head_json(head) for path, head in self.entries.items()},
            "known": {path: _head_json(head) for path, head in self.known.items()},
            "blobs": dict(self.blobs),
            "claims": {name: [c.dag_id, c.backfill_id, list(c.owned), c.drained] for name, c in self.claims.items()},
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RestSummary:
        key = data["key"]
        resting = Resting(
            tuple((Phase(phase), int(count)) for phase, count in data["phases"]),
            MappingProxyType({str(dag): tuple(map(str, names)) for dag, names in data["by_dag"].items()}),
        )
        return cls(
            RestKey(str(key["tree"]), int(key["revision"]), str(key["format"])),
            resting,
            tuple(map(str, data["others"])),
            tuple(map(str, data["walked"])),
            MappingProxyType({str(p): _head(h) for p, h in data["entries"].items()}),
            MappingProxyType({str(p): _head(h) for p, h in data["known"].items()}),
            MappingProxyType({str(p): str(b) for p, b in data["blobs"].items()}),
            MappingProxyType({str(name): _claim(str(name), *values) for name, values in data["claims"].items()}),
        )


def _claim(name: str, dag_id: Any, backfill_id: Any, owned: Any, drained: Any) -> Claim:
    current = None if backfill_id is None else int(backfill_id)
    return Claim(name, str(dag_id), current, tuple(int(i) for i in owned), bool(drained))


def _head_json(head: IndexedHead) -> list[Any]:
    return [head.blob_id, head.path, head.name, head.dag_id, head.digest, head.publishes]


def _head(values: list[Any]) -> IndexedHead:
    blob_id, path, name, dag_id, digest, publishes = values
    return IndexedHead(str(blob_id), str(path), str(name), str(dag_id), str(digest), publishes=bool(publishes))


class RestSummaries:
    def __init__(self, db: Database, clock: Clock) -> None:
        self._db, self._clock = db, clock

    def revision(self) -> int | None:
        """The store's `finished` revision (None: not kept, no summary is used)."""
        with self._db.tx("reading the store's revision") as conn:
            found = conn.execute(REVISION).scalar()
        return None if found is None else int(found)

    def get(self, folder: str) -> RestSummary | None:
        with self._db.tx("reading the rest summary") as conn:
            data = conn.execute(select(rest_summaries.c.summary).where(rest_summaries.c.folder == folder)).scalar()
        if data is None:
            return None
        try:
            return RestSummary.from_json(data)
        except (KeyError, TypeError, ValueError, AttributeError):
            log.info("the rest summary of %s is unreadable; this pass reads every finished spec's row", folder)
            return None

    def save(self, folder: str, summary: RestSummary) -> bool:
        """Keep `summary` for `folder` (an upsert: two passes may save at once) unless a write bumped the revision
        since it was read (False then). One a write bumps after this check is kept, and never read: its key is
        behind the revision from then on."""
        if len(folder) > _FOLDER_WIDTH:  # a folder the column cannot name gets no summary
            return False
        values = {"folder": folder, "summary": summary.as_json(), "written_at": stamp(self._clock())}
        with self._db.tx("saving the rest summary") as conn:
            if conn.execute(REVISION).scalar() != summary.key.revision:
                return False
            upsert = _insert(conn.dialect.name, rest_summaries)
            kept = {"summary": upsert.excluded.summary, "written_at": upsert.excluded.written_at}
            conn.execute(upsert.values(values).on_conflict_do_update(index_elements=["folder"], set_=kept))
        return True


def _insert(dialect: str, table: Table) -> Any:
    """The dialect's INSERT … ON CONFLICT. Its PostgreSQL module (with every async driver: ~17 ms a start) is imported
    only on PostgreSQL, where the engine has loaded it already."""
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql  # noqa: PLC0415 - see the docstring

        return postgresql.insert(table)
    return sqlite.insert(table)
