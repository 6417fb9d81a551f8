"""The hash-chained audit log (table `audit_events`): append, read back, verify.

Appends are serialised (SQLite `BEGIN IMMEDIATE`, PostgreSQL `LOCK TABLE … SHARE ROW EXCLUSIVE`), so
concurrent writers never fork the chain or reuse a seq.  With an audit key the chain is keyed: every append
carries HMAC-SHA256(key, hash) and `verify` checks them; appends refuse to continue a keyed chain without
the key, or with another key.  An append runs the caller's `fence` (the lease check) and `then` (the outbox
rows) inside its own transaction, so each is committed with the record or not at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Connection, Integer, Text, cast, insert, select, text, type_coerce

from controller.adapters.store.database import Clock, Database, stamp, unstamp
from controller.adapters.store.tables import audit_events
from controller.core.audit.chain import (
    GENESIS,
    SCALARS,
    AuditEntry,
    AuditRecord,
    ChainLink,
    Unreadable,
    VerifyResult,
    body_text,
    key_bytes,
    record_mac,
    seal,
    verify_chain,
)
from controller.core.model.secret import Secret
from controller.core.model.spec import canonical_json
from controller.errors import StoreError

_LINK_COLUMNS = ("seq", "prev_hash", "hash", *SCALARS, "request", "response", "mac")
FIRST_SEQ = -(2**63)  # the smallest seq a store can hold: rows below 1 are read too, and reported
_INTEGERS = frozenset(c.name for c in audit_events.c if isinstance(c.type, Integer))
_JSONS = frozenset(c.name for c in audit_events.c if isinstance(c.type, JSON))
Fence = Callable[[Connection], None]  # raises to refuse the append, inside its transaction
Then = Callable[[Connection, AuditRecord], None]  # more writes committed with the record


@dataclass(frozen=True, slots=True)
class EventFilter:
    spec: str | None = None
    dag: str | None = None
    action: str | None = None
    since: str | None = None


# built once: building the statements (and their cache keys) per append was ~3/4 of its time (373 → 100 µs)
_LAST = select(audit_events.c.seq, audit_events.c.hash, audit_events.c.mac).order_by(audit_events.c.seq.desc()).limit(1)
_INSERT = insert(audit_events)


class AuditLog:
    def __init__(self, db: Database, *, key: Secret | None, clock: Clock) -> None:
        self._db, self._key, self._clock = db, key, clock

    def append(self, entry: AuditEntry, *, fence: Fence | None = None, then: Then | None = None) -> AuditRecord:
        """Append one event to the chain (serialised across processes)."""
        with self._db.tx(f"writing the audit event {entry.action}/{entry.phase}") as conn:
            if conn.dialect.name == "postgresql":
                conn.exec_driver_sql("LOCK TABLE audit_events IN SHARE ROW EXCLUSIVE MODE")
            if fence is not None:
                fence(conn)
            last = conn.execute(_LAST).first()
            seq, prev = (last.seq + 1, last.hash) if last else (1, GENESIS)
            key = self.key_bytes()
            if last is not None and last.mac is not None:
                self._check_keyed_tail(last.seq, last.hash, last.mac, key)
            record = seal(seq, stamp(self._clock()), entry, prev, key)
            conn.execute(_INSERT, _row(record))
            if then is not None:
                then(conn, record)
        return record

    def key_bytes(self) -> bytes | None:
        return None if self._key is None else key_bytes(self._key.reveal())

    def _check_keyed_tail(self, seq: int, hash_: str, mac: str, key: bytes | None) -> None:
        """A keyed chain goes on only with its key: an unkeyed or foreign-keyed append would break it."""
        if key is None:
            raise StoreError(
                f"store {self._db.safe_url}: the audit chain is keyed (seq {seq} carries a MAC) and "
                "BACKFILLCTL_AUDIT_KEY is not set: a record without a MAC would break it",
                hint="set BACKFILLCTL_AUDIT_KEY to the key the chain was written with",
            )
        if mac != record_mac(key, hash_):
            raise StoreError(
                f"store {self._db.safe_url}: the last audit record (seq {seq}) carries a MAC that "
                "BACKFILLCTL_AUDIT_KEY did not make: the key is not the one the chain was written with, or the "
                "record was added without the key",
                hint="check the key; then run `backfillctl audit verify` to find the first record not made with it",
            )

    def last_event_time(self) -> datetime | None:
        """When the newest audit event was written (None: the log is empty)."""
        query = select(audit_events.c.time).order_by(audit_events.c.seq.desc()).limit(1)
        with self._db.tx("reading the newest audit event") as conn:
            value = conn.execute(query).scalar()
        return None if value is None else unstamp(value)

    def events(
        self, where: EventFilter | None = None, batch: int = 2000, *, last: int | None = None
    ) -> Iterator[AuditRecord | Unreadable]:
        """Events in seq order, fetched in batches (flat memory for any size); `last`: only the newest N. A row
        no backfillctl wrote (seq ≤ 0, a BLOB where text belongs, a request that is not JSON) comes as
        `Unreadable`, never hidden."""
        sqlite = self._db.engine.dialect.name == "sqlite"
        query = select(*_raw_columns(sqlite)).order_by(audit_events.c.seq)
        for column, value in _filters(where or EventFilter()):
            query = query.where(column >= value) if column is audit_events.c.time else query.where(column == value)
        if last is not None:  # one read from the end, however long the log is
            newest = query.order_by(None).order_by(audit_events.c.seq.desc()).limit(last)
            with self._db.tx("reading audit events") as conn:
                rows = conn.execute(newest).mappings().all()
            yield from (_record(row) for row in reversed(rows))
            return
        start = FIRST_SEQ
        while True:
            with self._db.tx("reading audit events") as conn:
                rows = conn.execute(query.where(audit_events.c.seq >= start).limit(batch)).mappings().all()
            yield from (_record(row) for row in rows)
            if len(rows) < batch:
                return
            start = rows[-1]["seq"] + 1

    def verify(self, expect_head: str | None = None) -> VerifyResult:
        return verify_chain(self.links(), expect_head, self.key_bytes())

    def links(self, batch: int = 10000) -> Iterator[ChainLink]:
        """(seq, prev_hash, hash, body JSON, mac) in seq order, from the stored canonical JSON text, no
        decoding; every row, seq ≤ 0 included, so that verify sees it."""
        columns = ", ".join(_LINK_COLUMNS)
        query = text(f"SELECT {columns} FROM audit_events WHERE seq >= :start ORDER BY seq LIMIT :n")  # noqa: S608
        start = FIRST_SEQ
        while True:
            with self._db.tx("reading audit events") as conn:
                rows = conn.execute(query, {"start": start, "n": batch}).all()
            yield from map(_link, rows)
            if len(rows) < batch:
                return
            start = rows[-1][0] + 1

    def pending_creates(self) -> dict[str, datetime]:
        """Specs whose latest create event is an intent without an outcome (a crash or an ambiguous call); an
        adoption of what the intent created closes it too (a chunked spec creates again after that)."""
        last: dict[str, tuple[str, str]] = {}
        query = (
            select(audit_events.c.spec_name, audit_events.c.phase, audit_events.c.time)
            .where(audit_events.c.action.in_(("create", "adopt")))
            .order_by(audit_events.c.seq)
        )
        with self._db.tx("reading create intents") as conn:
            for name, phase, time in conn.execute(query):
                last[name] = (phase, time)
        return {name: unstamp(time) for name, (phase, time) in last.items() if phase == "intent"}

    def recorded_findings(self) -> dict[tuple[str, str, int | None], str]:
        """The latest audited message of each finding, by (kind, DAG, backfill id): a finding is audited on change."""
        query = (
            select(audit_events.c.outcome, audit_events.c.dag_id, audit_events.c.backfill_id, audit_events.c.message)
            .where(audit_events.c.action == "finding")
            .order_by(audit_events.c.seq)
        )
        with self._db.tx("reading audited findings") as conn:
            return {(kind, dag, backfill): message for kind, dag, backfill, message in conn.execute(query)}


def _json_text(value: Any) -> str:
    """Stored JSON as canonical text: SQLite hands back our canonical text, PostgreSQL a decoded value."""
    if value is None:
        return "null"
    return value if isinstance(value, str) else canonical_json(value)


def _link(row: Sequence[Any]) -> ChainLink:
    seq, prev, hash_, mac = row[0], row[1], row[2], row[-1]
    try:
        if type(prev) is not str or type(hash_) is not str or (mac is not None and type(mac) is not str):
            raise TypeError(seq)
        body: str | Unreadable = body_text(dict(zip(SCALARS, row[3:-3])), _json_text(row[-3]), _json_text(row[-2]))  # noqa: B905 - the query's columns
    except TypeError:  # a BLOB where text belongs: the row was edited outside backfillctl
        body = Unreadable(seq, _wrong_types(dict(zip(_LINK_COLUMNS, row, strict=True))) or "a column of another type")
    return seq, prev, hash_, body, mac


def _wrong_types(row: Mapping[str, Any]) -> str | None:
    """What is stored with a type no backfillctl writes ('message holds a BLOB, not text'), if anything."""
    wrong = [
        f"{name} holds {_kind(value)}, not {'an integer' if name in _INTEGERS else 'text'}"
        for name, value in row.items()
        if value is not None and not isinstance(value, int if name in _INTEGERS else str) and name not in _JSONS
    ]
    wrong += [f"{name} holds {_kind(row[name])}, not JSON text" for name in _JSONS if isinstance(row[name], bytes)]
    return "; ".join(wrong) or None


def _kind(value: Any) -> str:
    return {bytes: "a BLOB", int: "an integer", float: "a real number", str: "text"}.get(
        type(value), type(value).__name__
    )


def _row(record: AuditRecord) -> dict[str, Any]:
    data = record.as_json()
    return {k: (dict(v) if isinstance(v, Mapping) else v) for k, v in data.items()}


def _raw_columns(sqlite: bool) -> list[Any]:
    """Every column, JSON as its stored text (decoded per row in `_record`, where a bad one is reported)."""
    as_text = (lambda c: type_coerce(c, Text)) if sqlite else (lambda c: cast(c, Text))  # SQLite keeps BLOBs as such
    return [as_text(c).label(c.name) if c.name in _JSONS else c for c in audit_events.c]


def _record(row: Mapping[Any, Any]) -> AuditRecord | Unreadable:
    seq = row["seq"]
    if seq < 1:
        return Unreadable(seq, "its seq is outside the chain, which starts at seq 1: a row added by hand")
    wrong = _wrong_types(row)
    if wrong is not None:
        return Unreadable(seq, wrong)
    decoded = {name: _decoded(row[name]) for name in _JSONS}
    bad = sorted(name for name, value in decoded.items() if value is _NOT_JSON)
    if bad:
        return Unreadable(seq, "; ".join(f"{name} is not JSON" for name in bad))
    fields = {k: decoded.get(k, row[k]) for k in AuditEntry.__dataclass_fields__}
    return AuditRecord(seq, row["time"], AuditEntry(**fields), row["prev_hash"], row["hash"], row["mac"])


_NOT_JSON = object()


def _decoded(value: Any) -> Any:
    """Stored JSON text decoded; a number stays one (SQLite's numeric affinity may have converted it)."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except (ValueError, RecursionError):
        return _NOT_JSON


def _filters(where: EventFilter) -> Iterator[tuple[Any, str]]:
    pairs = (
        (audit_events.c.spec_name, where.spec),
        (audit_events.c.dag_id, where.dag),
        (audit_events.c.action, where.action),
        (audit_events.c.time, where.since),
    )
    return ((column, value) for column, value in pairs if value is not None)
