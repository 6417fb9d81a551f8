"""The hash-chained audit log (table `audit_events`): append, read back, verify, adopt and rotate its key.

Appends are serialised (SQLite `BEGIN IMMEDIATE`, PostgreSQL an advisory transaction lock, which needs no
privilege beyond INSERT and SELECT: the reconciler's role has no other on this table), so concurrent writers never
fork the chain or reuse a seq.  With an audit key the chain is keyed: every append carries HMAC-SHA256(key, hash)
and `verify` checks them; appends refuse to continue a keyed chain without the key or with another key, and a
keyed writer refuses to continue an unkeyed chain: only `adopt_key` (`audit adopt-key`) keys one, and only
`rotate_key` (`audit rotate-key`) changes the key (core/audit/keying.py has the rules).  An append runs the
caller's `fence` (the lease check) and `then` (the outbox rows) inside its own transaction, so each is committed
with the record or not at all.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Connection, Integer, Row, Text, cast, func, insert, select, text, type_coerce

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
)
from controller.core.audit.keying import adoption_entry, key_id, rotation_entry, verify_chain
from controller.core.model.secret import Secret
from controller.core.model.spec import canonical_json
from controller.errors import ConfigError, StoreError

_LINK_COLUMNS = ("seq", "prev_hash", "hash", *SCALARS, "request", "response", "mac")
FIRST_SEQ = -(2**63)  # the smallest seq a store can hold: rows below 1 are read too, and reported
APPEND_LOCK_KEY = 4_242_100_902  # PostgreSQL advisory lock serialising appends (beside the schema's, database.py)
_INTEGERS = frozenset(c.name for c in audit_events.c if isinstance(c.type, Integer))
_JSONS = frozenset(c.name for c in audit_events.c if isinstance(c.type, JSON))
Fence = Callable[[Connection], None]  # raises to refuse the append, inside its transaction
Then = Callable[[Connection, AuditRecord], None]  # more writes committed with the record
MakeEntry = Callable[[int, str], AuditEntry]  # (seq, prev_hash) → the entry to seal there
ADOPT_HINT = (
    "if this chain was never keyed, check it (`backfillctl audit verify` without the key) and adopt the key: "
    "`backfillctl audit adopt-key`; if it was keyed, its MACs were removed: restore the store from a backup"
)


@dataclass(frozen=True, slots=True)
class FirstCreate:
    """A spec's first create intent: its file's digest and last commit at the time."""

    spec_digest: str | None
    spec_commit: str | None


@dataclass(frozen=True, slots=True)
class EventFilter:
    spec: str | None = None
    dag: str | None = None
    action: str | None = None
    since: str | None = None


# built once: building the statements (and their cache keys) per append was ~3/4 of its time (373 → 100 µs)
_LAST = select(audit_events.c.seq, audit_events.c.hash, audit_events.c.mac).order_by(audit_events.c.seq.desc()).limit(1)
_INSERT = insert(audit_events)
_APPEND_LOCK = text(f"SELECT pg_advisory_xact_lock({APPEND_LOCK_KEY})")


class AuditLog:
    def __init__(self, db: Database, *, key: Secret | None, clock: Clock, previous_keys: Sequence[Secret] = ()) -> None:
        self._db, self._key, self._clock, self._previous = db, key, clock, tuple(previous_keys)

    def append(self, entry: AuditEntry, *, fence: Fence | None = None, then: Then | None = None) -> AuditRecord:
        """Append one event to the chain (serialised across processes)."""
        with self._db.tx(f"writing the audit event {entry.action}/{entry.phase}") as conn:
            _lock(conn)
            if fence is not None:
                fence(conn)
            last = conn.execute(_LAST).first()
            key = self.key_bytes()
            if last is not None:
                self._check_tail(last.seq, last.hash, last.mac, key)
            record = _insert(conn, last, lambda _seq, _prev: entry, key, stamp(self._clock()))
            if then is not None:
                then(conn, record)
        return record

    def key_bytes(self) -> bytes | None:
        return None if self._key is None else key_bytes(self._key.reveal())

    def _check_tail(self, seq: int, hash_: str, mac: str | None, key: bytes | None) -> None:
        """A keyed chain goes on only with its key, an unkeyed one only without a key (or by `adopt_key`)."""
        if mac is None and key is not None:
            raise StoreError(
                f"store {self._db.safe_url}: the audit chain is not keyed (seq {seq}, its newest record, carries no "
                "MAC) and BACKFILLCTL_AUDIT_KEY is set: a writer with the key continues only a keyed chain, so "
                "nothing was written",
                hint=ADOPT_HINT,
            )
        if mac is not None and key is None:
            raise StoreError(
                f"store {self._db.safe_url}: the audit chain is keyed (seq {seq} carries a MAC) and "
                "BACKFILLCTL_AUDIT_KEY is not set: a record without a MAC would break it",
                hint="set BACKFILLCTL_AUDIT_KEY to the key the chain was written with",
            )
        if mac is not None and key is not None and mac != record_mac(key, hash_):
            raise StoreError(
                f"store {self._db.safe_url}: the last audit record (seq {seq}) carries a MAC that "
                "BACKFILLCTL_AUDIT_KEY did not make: the key is not the one the chain was written with, or the "
                "record was added without the key",
                hint="check the key (after `backfillctl audit rotate-key`, the new one); then run `backfillctl audit "
                "verify` to find the first record not made with it",
            )

    # --- the key: adopt, rotate -------------------------------------------------------------------------

    def adopt_key(self, actor: str, expect_head: str | None = None) -> AuditRecord:
        """Key an unkeyed chain: the adoption record, the first with a MAC, pins every record before it."""
        key = self._required_key("audit adopt-key", "the key to adopt")
        checked = self._checked(verify_chain(self.links(), expect_head), "adopting a key")
        if checked.keyed_from is not None:
            raise StoreError(
                f"store {self._db.safe_url}: the audit chain is keyed already, from seq {checked.keyed_from}: a "
                "chain adopts a key once",
                hint="`backfillctl audit verify` checks it with the key; `backfillctl audit rotate-key` changes it",
            )
        return self._write_key_record(checked, lambda seq, _prev: adoption_entry(actor, key, seq), key)

    def rotate_key(self, actor: str) -> AuditRecord:
        """Change the chain's key: the rotation record carries the new key's MAC and the old key's."""
        new = self._required_key("audit rotate-key", "the new key")
        previous = self._previous_bytes()
        if not previous:
            raise ConfigError(
                "audit rotate-key needs the chain's key in BACKFILLCTL_AUDIT_KEYS_PREVIOUS (and the new one in "
                "BACKFILLCTL_AUDIT_KEY)",
                hint='e.g. BACKFILLCTL_AUDIT_KEYS_PREVIOUS="$OLD_KEY" BACKFILLCTL_AUDIT_KEY="$NEW_KEY" '
                "backfillctl audit rotate-key",
            )
        if key_id(new) in {key_id(old) for old in previous}:
            raise ConfigError(
                "BACKFILLCTL_AUDIT_KEY is also in BACKFILLCTL_AUDIT_KEYS_PREVIOUS: a rotation needs a new key",
                hint="make one: `python -c 'import secrets; print(secrets.token_hex(32))'`",
            )
        result = verify_chain(self.links(), None, new, previous=previous, require_current=False)
        checked = self._checked(result, "rotating the key")
        old = next((k for k in previous if key_id(k) == checked.key_id), None)
        if old is None:  # verified with these keys, yet the newest MACs are none of the old ones: new's, or none
            already = "'s newest records carry BACKFILLCTL_AUDIT_KEY's MACs already"
            raise StoreError(
                f"store {self._db.safe_url}: the audit chain"
                + (" is not keyed" if checked.keyed_from is None else already)
                + ": there is nothing to rotate",
                hint=ADOPT_HINT if checked.keyed_from is None else "set the keys as they are; nothing to do",
            )
        return self._write_key_record(checked, lambda seq, prev: rotation_entry(actor, old, new, prev, seq), new)

    def _required_key(self, command: str, what: str) -> bytes:
        key = self.key_bytes()
        if key is None:
            raise ConfigError(
                f"{command} needs BACKFILLCTL_AUDIT_KEY: {what}",
                hint="a random secret of at least 32 bytes, e.g. `python -c 'import secrets; "
                "print(secrets.token_hex(32))'`, kept in your secret store",
            )
        return key

    def _previous_bytes(self) -> tuple[bytes, ...]:
        return tuple(key_bytes(key.reveal()) for key in self._previous)

    def _checked(self, result: VerifyResult, doing: str) -> VerifyResult:
        """A chain is adopted or rotated only when intact: the new record vouches for everything before it."""
        if result.problem is None:
            return result
        found = result.problem
        raise StoreError(
            f"store {self._db.safe_url}: the audit chain does not verify ({found.kind} at seq {found.seq}: "
            f"{found.message}), so nothing was written: {doing} would vouch for it",
            hint="see `backfillctl audit verify`; restore the store from a backup if it was tampered with",
        )

    def _write_key_record(self, checked: VerifyResult, make: MakeEntry, key: bytes) -> AuditRecord:
        with self._db.tx("writing the audit key record") as conn:
            _lock(conn)
            last = conn.execute(_LAST).first()
            if (GENESIS if last is None else last.hash) != checked.head_hash:
                raise StoreError(
                    f"store {self._db.safe_url}: the audit chain grew while it was checked (head seq "
                    f"{checked.head_seq} then, {0 if last is None else last.seq} now): nothing was written",
                    hint="run the command again",
                )
            return _insert(conn, last, make, key, stamp(self._clock()))

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
        return verify_chain(self.links(), expect_head, self.key_bytes(), previous=self._previous_bytes())

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

    def first_creates(self, names: Collection[str]) -> dict[str, FirstCreate]:
        """Each named spec's first create intent: the file's digest and last commit then (a store from before
        bindings kept what was applied learns it here, once)."""
        first = (
            select(audit_events.c.spec_name, func.min(audit_events.c.seq).label("seq"))
            .where(audit_events.c.action == "create", audit_events.c.phase == "intent")
            .where(audit_events.c.spec_name.in_(sorted(names)))
            .group_by(audit_events.c.spec_name)
            .subquery()
        )
        query = select(audit_events.c.spec_name, audit_events.c.spec_digest, audit_events.c.spec_commit).join(
            first, audit_events.c.seq == first.c.seq
        )
        with self._db.tx("reading first create intents") as conn:
            return {name: FirstCreate(digest, commit) for name, digest, commit in conn.execute(query)}

    def recorded_findings(self) -> dict[tuple[str, str, int | None], str]:
        """The latest audited message of each finding, by (kind, DAG, backfill id): a finding is audited on change."""
        query = (
            select(audit_events.c.outcome, audit_events.c.dag_id, audit_events.c.backfill_id, audit_events.c.message)
            .where(audit_events.c.action == "finding")
            .order_by(audit_events.c.seq)
        )
        with self._db.tx("reading audited findings") as conn:
            return {(kind, dag, backfill): message for kind, dag, backfill, message in conn.execute(query)}


def _lock(conn: Connection) -> None:
    """The append lock: an advisory one on PostgreSQL (SQLite's is the transaction's `BEGIN IMMEDIATE`)."""
    if conn.dialect.name == "postgresql":
        conn.execute(_APPEND_LOCK)


def _insert(
    conn: Connection, last: Row[Any, Any, Any] | None, make: MakeEntry, key: bytes | None, time: str
) -> AuditRecord:
    """Seal the next record after `last` and insert it."""
    seq, prev = (last.seq + 1, last.hash) if last else (1, GENESIS)
    record = seal(seq, time, make(seq, prev), prev, key)
    conn.execute(_INSERT, _row(record))
    return record


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
