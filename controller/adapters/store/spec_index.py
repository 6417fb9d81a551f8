"""The index of spec files (table `spec_index`, one row a git blob): what a pass needs of a spec whose file has not
changed: its provenance, so that it is not looked up in git history again; and, once the spec is finished, the rest,
so that it is not read, parsed or validated again either.

A row keeps the spec's document as loaded (plain JSON values: the model is built from it as from the file), its
digest, the phase it finished in, and its provenance: when it was introduced and by whom (the queue position),
and the last commit that touched it. A row that cannot be read back is no row: its file is read as a new one.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, insert, select

from controller.adapters.store.database import Clock, Database, batches, decoded, json_text, stamp
from controller.adapters.store.revisions import bump_finished
from controller.adapters.store.tables import spec_index
from controller.core.model.spec import PUBLISH

log = logging.getLogger(__name__)
FACTS_VERSION = 1  # a row of another version is not read (its file is read, and indexed again)


@dataclass(frozen=True, slots=True)
class IndexedSpec:
    """A spec file as the index keeps it (`path` repository-relative)."""

    blob_id: str
    path: str
    name: str
    dag_id: str
    digest: str
    phase: str  # its binding's when it was indexed ("Pending": none); the binding decides, never this
    data: Mapping[str, Any]  # the document's values, as the YAML loader gave them
    introduced: int | None  # the commit time that added the file (None: not known, queued last)
    author_email: str  # of the commit that added it ("" when not known)
    last_commit: str | None  # the newest commit that touched it

    def facts(self) -> dict[str, Any]:
        return {
            "version": FACTS_VERSION,
            "data": dict(self.data),
            "introduced": self.introduced,
            "author_email": self.author_email,
            "last_commit": self.last_commit,
        }


@dataclass(frozen=True, slots=True)
class IndexedHead:
    """What a pass reads of every row (`SpecIndex.heads`): which files go unread, and which of those rest; a row's
    document and provenance are read only for the rows a pass builds or orders (`SpecIndex.all(blobs)`)."""

    blob_id: str
    path: str
    name: str
    dag_id: str
    digest: str
    publishes: bool  # its document has a publish run (`publish: null` is none, as the spec reads it)


class SpecIndex:
    def __init__(self, db: Database, clock: Clock) -> None:
        self._db, self._clock = db, clock

    def all(self, blobs: Collection[str] | None = None) -> dict[str, IndexedSpec]:
        """Every readable row, or those of `blobs`, by blob id."""
        c = spec_index.c
        query = select(c.blob_id, c.path, c.spec_name, c.dag_id, c.spec_digest, c.phase, json_text(c.facts))
        with self._db.tx("reading the spec index") as conn:
            if blobs is None:
                rows = conn.execute(query).all()
            else:
                rows = [r for chunk in batches(sorted(blobs)) for r in conn.execute(query.where(c.blob_id.in_(chunk)))]
        found: dict[str, IndexedSpec] = {}
        for row, facts in zip(rows, decoded([row[6] for row in rows]), strict=True):
            entry = _entry(*row[:6], facts=facts)
            if entry is not None:
                found[entry.blob_id] = entry
        return found

    def heads(self) -> dict[str, IndexedHead]:
        """Every row this version wrote, by blob id, its document left in the database but for one key."""
        c = spec_index.c
        publishes = c.facts[("data", PUBLISH)].as_string().is_not(None)
        query = select(c.blob_id, c.path, c.spec_name, c.dag_id, c.spec_digest, publishes)
        with self._db.tx("reading the spec index") as conn:
            rows = conn.execute(query.where(c.facts["version"].as_integer() == FACTS_VERSION)).all()
        return {r[0]: IndexedHead(r[0], r[1], r[2], r[3], r[4], publishes=bool(r[5])) for r in rows}

    def save(self, entries: Sequence[IndexedSpec], present: Collection[str] | None) -> None:
        """Insert or replace `entries`, and drop the rows of blobs not `present` (files gone or changed; None: drop
        none), in one transaction; a change bumps the revision rest summaries are keyed by (`rest_summary.py`)."""
        now = stamp(self._clock())
        with self._db.tx("saving the spec index") as conn:
            known = {r[0] for r in conn.execute(select(spec_index.c.blob_id)).all()}
            gone = (known - set(known if present is None else present)) | {
                e.blob_id for e in entries if e.blob_id in known
            }
            for chunk in batches(sorted(gone)):  # a statement's parameters are bounded (SQLite: 32,766)
                conn.execute(delete(spec_index).where(spec_index.c.blob_id.in_(chunk)))
            if entries:
                conn.execute(insert(spec_index), [_row(e, now) for e in entries])
            if entries or gone:
                bump_finished(conn)


def _row(entry: IndexedSpec, now: str) -> dict[str, Any]:
    return {
        "blob_id": entry.blob_id,
        "path": entry.path,
        "spec_name": entry.name,
        "dag_id": entry.dag_id,
        "spec_digest": entry.digest,
        "phase": entry.phase,
        "facts": entry.facts(),
        "indexed_at": now,
    }


def _entry(*columns: str, facts: Any) -> IndexedSpec | None:
    """The row as a value; None (logged) when its facts are not what this version writes."""
    if not isinstance(facts, dict) or facts.get("version") != FACTS_VERSION or not isinstance(facts.get("data"), dict):
        log.info("spec index row of %s is unreadable; its file is read again", columns[1])
        return None
    introduced = facts.get("introduced")
    blob_id, path, name, dag_id, spec_digest, phase = columns
    return IndexedSpec(
        blob_id,
        path,
        name,
        dag_id,
        spec_digest,
        phase,
        facts["data"],
        introduced if isinstance(introduced, int) else None,
        str(facts.get("author_email") or ""),
        facts.get("last_commit") if isinstance(facts.get("last_commit"), str) else None,
    )
