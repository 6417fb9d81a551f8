"""The controller's own store (SQLAlchemy + Alembic): bindings, the hash-chained audit log, the lease.

SQLite by default, PostgreSQL in production; never Airflow's metadata database.  Owns SQLAlchemy and
Alembic: their exceptions become `StoreError`.  Appends are serialised (SQLite `BEGIN IMMEDIATE`,
PostgreSQL `LOCK TABLE … SHARE ROW EXCLUSIVE`), so concurrent writers never fork the chain or reuse a seq.
Migrations are serialised the same way (SQLite `BEGIN IMMEDIATE`, PostgreSQL an advisory transaction
lock), with the revision re-read under the lock, so two first starts on a fresh store both work.

`Store(url, read_only=True)` never creates, migrates or writes: a missing store (or SQLite file or
folder) is an error, and SQLite is opened with `mode=ro`, PostgreSQL with read-only transactions.

`Store(url, audit_key=…)` keys the chain: every append carries HMAC-SHA256(key, hash) and `verify` checks
them; appends refuse to continue a keyed chain without the key, or with another key.

The lease: `acquire` takes it, `keep` renews it from a daemon thread with its own engine (its own
connection) while the process lives, so a killed holder's short lease lapses and is taken over.  Every
`intent` append re-checks, in its own transaction, that this process still holds the lease (a fence):
a reconciler whose lease was taken away cannot record an intent, so it makes no further change.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import sqlite3
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import (
    JSON,
    Connection,
    Engine,
    Integer,
    Text,
    cast,
    create_engine,
    delete,
    event,
    insert,
    select,
    text,
    type_coerce,
    update,
)
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, NoSuchModuleError, SQLAlchemyError

from controller.adapters.store.outbox import insert_notifications
from controller.adapters.store.tables import audit_events, bindings, lease
from controller.core.audit.chain import (
    GENESIS,
    SCALARS,
    TIME_FORMAT,
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
from controller.core.audit.notify import Notification
from controller.core.model.airflow import summary_from_json
from controller.core.model.binding import Approval, Binding, CreateFacts, Phase
from controller.core.model.chunks import Progress
from controller.core.model.secret import Secret, redact_url, url_problem
from controller.core.model.spec import DesiredState, canonical_json
from controller.errors import LockHeld, StoreError, truncate

MIGRATIONS = Path(__file__).parent / "migrations"
SCHEMA_HEAD = "0006"  # the newest migration; a test keeps it equal to Alembic's head
KNOWN_REVISIONS = frozenset({"0001", "0002", "0003", "0004", "0005", "0006"})
LEASE_NAME = "reconcile"
SUPPORTED = ("sqlite", "postgresql")
INSTALL_POSTGRES = "pip install 'airflow-backfill-controller[postgres]'"
URL_EXAMPLES = "sqlite:///path/to/state.db or postgresql://USER@HOST:5432/DBNAME"
SCHEMA_LOCK_KEY = 4_242_100_901  # PostgreSQL advisory lock serialising migrations of one database
log = logging.getLogger(__name__)
_TIME = TIME_FORMAT
Clock = Callable[[], datetime]


def stamp(moment: datetime) -> str:
    """Fixed-width UTC text, so string order is time order."""
    return moment.astimezone(UTC).strftime(_TIME)


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True, slots=True)
class Lease:
    lease_id: str
    holder: str
    host: str
    pid: int
    acquired_at: str
    expires_at: str

    def describe(self) -> str:
        return f"{self.holder} on {self.host} (pid {self.pid}) since {self.acquired_at}, lease {self.lease_id}"


@dataclass(frozen=True, slots=True)
class EventFilter:
    spec: str | None = None
    dag: str | None = None
    action: str | None = None
    since: str | None = None


class LeaseLost(LockHeld):
    """This process's lease was taken away or lapsed: it must make no further change (exit 5)."""


class Store:
    def __init__(
        self,
        url: str,
        *,
        clock: Clock = _utcnow,
        migrate: bool = True,
        read_only: bool = False,
        audit_key: Secret | None = None,
    ) -> None:
        self.url = normalise_url(url)
        self.read_only = read_only
        self._key = audit_key
        self._clock = clock
        self._keeper: _LeaseKeeper | None = None
        self._fence: str | None = None  # the lease id every intent append checks
        self._batch = threading.local()  # this thread's open batch connection (see `batch`), if any
        path = _sqlite_path(self.url)
        sqlite = make_url(self.url).get_backend_name() == "sqlite"
        if read_only and sqlite and (path is None or not path.is_file()):
            raise self._missing()  # checked before connecting: SQLite would create the file (or memory)
        if path is not None and not read_only:
            try:
                path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(
                    f"store {self.safe_url}: cannot create the folder {path.parent}: {exc.strerror}",
                    hint="point BACKFILLCTL_STORE_URL at a writable path",
                ) from None
        self.engine = _engine(self.url, self.safe_url, read_only=read_only)
        try:
            if read_only:
                self.check_current()
            elif migrate:
                self.migrate()
        except BaseException:
            self.engine.dispose()
            raise

    @property
    def safe_url(self) -> str:
        return redact_url(self.url)

    def close(self) -> None:
        if self._keeper is not None:
            self._keeper.stop()
            self._keeper = None
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _failed(self, what: str, exc: SQLAlchemyError, hint: str | None = None) -> StoreError:
        reason = _reason(exc)
        if hint is None or _unreachable(reason):
            hint = "check BACKFILLCTL_STORE_URL and that the database is reachable"
        if _read_only_refusal(reason):
            hint = "the database refused a write: the store's user (or file) needs write access for this command"
        return StoreError(f"store {self.safe_url}: {what} failed: {reason}", hint=hint)

    def _unversioned(self) -> StoreError:
        return StoreError(
            f"the store at {self.safe_url} has audit tables but no schema version: its alembic_version table "
            "is missing (dropped, or not restored with the rest)",
            hint="restore the store from a backup; or, if you know the revision it was at (this backfillctl "  # noqa: S608 - a hint, not a query
            f"writes {SCHEMA_HEAD}), recreate the table by hand: CREATE TABLE alembic_version (version_num "
            f"VARCHAR(32) NOT NULL PRIMARY KEY); INSERT INTO alembic_version VALUES ('{SCHEMA_HEAD}'); "
            "then run `backfillctl audit verify`",
        )

    def _missing(self) -> StoreError:
        path = _sqlite_path(self.url)
        where = ""
        if path is not None and not path.is_absolute():
            where = f" (a relative SQLite path, resolved against the current directory {Path.cwd()})"
        return StoreError(
            f"no store at {self.safe_url}; reconcile creates it",
            hint=f"check BACKFILLCTL_STORE_URL{where}, or run `backfillctl reconcile` first"
            " (`backfillctl plan --no-store` plans without one)",
        )

    @contextlib.contextmanager
    def _tx(self, what: str, hint: str | None = None) -> Iterator[Connection]:
        joined: Connection | None = getattr(self._batch, "conn", None)
        try:
            if joined is not None:
                yield joined
                return
            with self.engine.begin() as conn:
                yield conn
        except SQLAlchemyError as exc:
            raise self._failed(what, exc, hint) from None

    @contextlib.contextmanager
    def batch(self, what: str) -> Iterator[None]:
        """One transaction for this thread's writes until the block ends: all of them or none. For records
        of observations only (adoptions, phases), which change nothing outside the store; never around an
        intent, which must be committed before its call. A batch saves a durable commit (an fsync on
        SQLite, ~3 ms) per write: 1,000 adoptions after a lost store take 1 commit instead of 2,000."""
        if getattr(self._batch, "conn", None) is not None:
            yield
            return
        try:
            with self.engine.begin() as conn:
                self._batch.conn = conn
                try:
                    yield
                finally:
                    self._batch.conn = None
        except SQLAlchemyError as exc:
            raise self._failed(what, exc) from None

    # --- schema ---------------------------------------------------------------------------------------

    def migrate(self) -> tuple[str | None, str]:
        """Upgrade to the newest schema; refuse a store written by a newer backfillctl.

        The common case (already current) reads one row and never imports Alembic.  Otherwise the
        upgrade runs under a lock (PostgreSQL advisory transaction lock, SQLite `BEGIN IMMEDIATE`) and
        re-reads the revision first, so concurrent first starts wait for each other instead of racing.
        Returns (the revision found under the lock, the head).
        """
        current = self.revision()
        self._refuse_newer(current)
        if current == SCHEMA_HEAD:
            return current, SCHEMA_HEAD
        hint = (
            "the database is reachable but the schema upgrade failed with the error above; fix that cause "
            "(e.g. the store's user needs CREATE rights), then run `backfillctl store migrate`"
        )
        with self._tx(f"migration to schema revision {SCHEMA_HEAD}", hint) as conn:
            if conn.dialect.name == "postgresql":
                conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": SCHEMA_LOCK_KEY})
            current = _revision(conn)  # again, under the lock: another process may have migrated meanwhile
            self._refuse_newer(current)
            # tables without a version, judged under the lock: a concurrent first start's half-done migration
            # is invisible here, so what remains is a store whose version table is gone (scratch would fail)
            if current is None and conn.dialect.has_table(conn, audit_events.name):
                raise self._unversioned()
            if current != SCHEMA_HEAD:
                _alembic(conn, "upgrade", SCHEMA_HEAD)
        return current, SCHEMA_HEAD

    def check_current(self) -> str:
        """For read-only use: the store must exist and be at this backfillctl's schema revision."""
        current = self.revision()
        if current is None:
            raise self._unversioned() if self._has_tables() else self._missing()
        self._refuse_newer(current)
        if current != SCHEMA_HEAD:
            raise StoreError(
                f"store {self.safe_url} is at schema revision {current}, this backfillctl needs {SCHEMA_HEAD}: "
                "run `backfillctl store migrate`",
                hint="read-only commands never change the store; `backfillctl reconcile` also migrates it",
            )
        return current

    def _refuse_newer(self, current: str | None) -> None:
        if current is not None and current not in KNOWN_REVISIONS:
            raise StoreError(
                f"store {self.safe_url} has schema revision {current}, newer than this backfillctl "
                f"knows (head {SCHEMA_HEAD})",
                hint="upgrade backfillctl; never point an old one at it",
            )

    def _has_tables(self) -> bool:
        try:
            with self.engine.connect() as conn:
                return bool(conn.dialect.has_table(conn, audit_events.name))
        except SQLAlchemyError as exc:
            raise self._failed("reading the store's tables", exc) from None

    def revision(self) -> str | None:
        try:
            with self.engine.connect() as conn:
                return _revision(conn)
        except SQLAlchemyError as exc:
            raise self._failed("reading the schema revision", exc) from None

    # --- audit ----------------------------------------------------------------------------------------

    def append(self, entry: AuditEntry, notifications: Sequence[Notification] = ()) -> AuditRecord:
        """Append one event to the chain (serialised across processes), with its outbox rows if any."""
        if entry.phase == "intent":
            self.check_lease()
        with self._tx(f"writing the audit event {entry.action}/{entry.phase}") as conn:
            if conn.dialect.name == "postgresql":
                conn.exec_driver_sql("LOCK TABLE audit_events IN SHARE ROW EXCLUSIVE MODE")
            if entry.phase == "intent" and self._fence is not None:
                self._check_fence(conn, self._fence)
            last = conn.execute(
                select(audit_events.c.seq, audit_events.c.hash, audit_events.c.mac)
                .order_by(audit_events.c.seq.desc())
                .limit(1)
            ).first()
            seq, prev = (last.seq + 1, last.hash) if last else (1, GENESIS)
            key = self._key_bytes()
            if last is not None and last.mac is not None:
                self._check_keyed_tail(last.seq, last.hash, last.mac, key)
            record = seal(seq, stamp(self._clock()), entry, prev, key)
            conn.execute(insert(audit_events).values(**_row(record)))
            if notifications:  # the outbox: committed with the record or not at all (issue 15)
                insert_notifications(conn, record, notifications, stamp(self._clock()))
        return record

    def _key_bytes(self) -> bytes | None:
        return None if self._key is None else key_bytes(self._key.reveal())

    def _check_keyed_tail(self, seq: int, hash_: str, mac: str, key: bytes | None) -> None:
        """A keyed chain goes on only with its key: an unkeyed or foreign-keyed append would break it."""
        if key is None:
            raise StoreError(
                f"store {self.safe_url}: the audit chain is keyed (seq {seq} carries a MAC) and "
                "BACKFILLCTL_AUDIT_KEY is not set: a record without a MAC would break it",
                hint="set BACKFILLCTL_AUDIT_KEY to the key the chain was written with",
            )
        if mac != record_mac(key, hash_):
            raise StoreError(
                f"store {self.safe_url}: the last audit record (seq {seq}) carries a MAC that "
                "BACKFILLCTL_AUDIT_KEY did not make: the key is not the one the chain was written with, or the "
                "record was added without the key",
                hint="check the key; then run `backfillctl audit verify` to find the first record not made with it",
            )

    def last_event_time(self) -> datetime | None:
        """When the newest audit event was written (None: the log is empty)."""
        query = select(audit_events.c.time).order_by(audit_events.c.seq.desc()).limit(1)
        with self._tx("reading the newest audit event") as conn:
            value = conn.execute(query).scalar()
        return None if value is None else datetime.strptime(value, _TIME).replace(tzinfo=UTC)

    def events(
        self, where: EventFilter | None = None, batch: int = 2000, *, last: int | None = None
    ) -> Iterator[AuditRecord | Unreadable]:
        """Events in seq order, fetched in batches (flat memory for any size); `last`: only the newest N. A row
        no backfillctl wrote (seq ≤ 0, a BLOB where text belongs, a request that is not JSON) comes as
        `Unreadable`, never hidden."""
        sqlite = self.engine.dialect.name == "sqlite"
        query = select(*_raw_columns(sqlite)).order_by(audit_events.c.seq)
        for column, value in _filters(where or EventFilter()):
            query = query.where(column >= value) if column is audit_events.c.time else query.where(column == value)
        if last is not None:  # one read from the end, however long the log is
            newest = query.order_by(None).order_by(audit_events.c.seq.desc()).limit(last)
            with self._tx("reading audit events") as conn:
                rows = conn.execute(newest).mappings().all()
            yield from (_record(row) for row in reversed(rows))
            return
        start = FIRST_SEQ
        while True:
            with self._tx("reading audit events") as conn:
                rows = conn.execute(query.where(audit_events.c.seq >= start).limit(batch)).mappings().all()
            yield from (_record(row) for row in rows)
            if len(rows) < batch:
                return
            start = rows[-1]["seq"] + 1

    def verify(self, expect_head: str | None = None) -> VerifyResult:
        return verify_chain(self.links(), expect_head, self._key_bytes())

    def links(self, batch: int = 10000) -> Iterator[ChainLink]:
        """(seq, prev_hash, hash, body JSON, mac) in seq order, from the stored canonical JSON text, no
        decoding; every row, seq ≤ 0 included, so that verify sees it."""
        columns = ", ".join(_LINK_COLUMNS)
        query = text(f"SELECT {columns} FROM audit_events WHERE seq >= :start ORDER BY seq LIMIT :n")  # noqa: S608
        start = FIRST_SEQ
        while True:
            with self._tx("reading audit events") as conn:
                rows = conn.execute(query, {"start": start, "n": batch}).all()
            yield from map(_link, rows)
            if len(rows) < batch:
                return
            start = rows[-1][0] + 1

    # --- lease ----------------------------------------------------------------------------------------

    def acquire(self, holder: str, ttl: float, now: datetime | None = None) -> tuple[Lease, Lease | None]:
        """Take the lease; return (ours, the expired one we took over or None). Raises LockHeld."""
        moment = now or self._clock()
        mine = Lease(
            uuid.uuid4().hex[:16],
            holder,
            socket.gethostname(),
            os.getpid(),
            stamp(moment),
            stamp(moment + timedelta(seconds=ttl)),
        )
        with self._tx("taking the lease") as conn:
            current = _lease(conn)
            if current is None:
                if _insert_lease(conn, mine):
                    return mine, None
                current = _lease(conn)  # PostgreSQL: the winner of the same moment has committed; name it
                if current is None:
                    raise LockHeld(
                        "lock held by another reconciler that started at the same moment",
                        hint="retry, or use --wait-lock",
                    )
            if current.expires_at > stamp(moment):
                raise LockHeld(
                    f"lock held by {current.describe()}; it expires at {current.expires_at}",
                    hint="wait for it, use --wait-lock, or `backfillctl store unlock LEASE_ID` if it is stuck",
                )
            taken = conn.execute(
                update(lease)
                .where(lease.c.name == LEASE_NAME, lease.c.lease_id == current.lease_id)
                .values(**_lease_row(mine))
            )
            if taken.rowcount != 1:
                raise LockHeld("lock was taken over by another reconciler just now", hint="retry, or use --wait-lock")
            return mine, current

    def heartbeat(self, mine: Lease, ttl: float) -> Lease:
        renewed = Lease(**{**_lease_dict(mine), "expires_at": stamp(self._clock() + timedelta(seconds=ttl))})
        with self._tx("renewing the lease") as conn:
            done = conn.execute(
                update(lease).where(lease.c.lease_id == mine.lease_id).values(expires_at=renewed.expires_at)
            )
            if done.rowcount != 1:
                raise LockHeld(f"lease {mine.lease_id} was taken away (unlocked or expired and taken over)")
        return renewed

    def keep(self, mine: Lease, ttl: float, every: float) -> None:
        """Renew `mine` every `every` seconds from a daemon thread (its own engine) while the process lives.

        From now on every intent append checks, in its transaction, that the lease is still ours.
        """
        if self._keeper is not None:
            self._keeper.stop()
        self._fence = mine.lease_id
        self._keeper = _LeaseKeeper(self.url, mine, ttl=ttl, every=every, clock=self._clock)

    def lease_ok(self) -> bool:
        """False once a renewal found the lease taken away, or it could not be renewed before it expired."""
        return self._keeper is None or self._keeper.lost() is None

    def check_lease(self) -> None:
        """Raise `LeaseLost` (exit 5) if the kept lease is gone; call it before each mutating call."""
        if self._keeper is not None and (lost := self._keeper.lost()) is not None:
            raise LeaseLost(
                f"{lost}; this reconciler stopped before its next change",
                hint="another reconciler owns the store now; find out why the heartbeat stopped (a paused or "
                "overloaded process, a slow or unreachable store) before running this one again",
            )

    def held_lease(self) -> Lease | None:
        """The lease this store keeps (with its latest expiry), if any."""
        return None if self._keeper is None else self._keeper.lease

    def _check_fence(self, conn: Connection, lease_id: str) -> None:
        row = _lease(conn)
        now = stamp(self._clock())
        if row is None or row.lease_id != lease_id or row.expires_at <= now:
            if row is None:
                why = f"lease {lease_id} was released by someone else (store unlock?)"
            elif row.lease_id != lease_id:
                why = f"lease {lease_id} was taken over by {row.describe()}"
            else:
                why = f"lease {lease_id} expired at {row.expires_at} without renewal"
            if self._keeper is not None:
                self._keeper.mark_lost(why)
            raise LeaseLost(
                f"{why}; this reconciler stopped before its next change",
                hint="another reconciler may own the store now; nothing further was changed by this one",
            )

    def release_kept(self) -> None:
        """Stop renewing and release the kept lease (if it is still ours)."""
        keeper, self._keeper, self._fence = self._keeper, None, None
        if keeper is not None:
            keeper.stop()
            with contextlib.suppress(LockHeld, StoreError):
                self.release(keeper.lease)

    def release(self, mine: Lease) -> None:
        with self._tx("releasing the lease") as conn:
            conn.execute(delete(lease).where(lease.c.lease_id == mine.lease_id))

    def current_lease(self) -> Lease | None:
        with self._tx("reading the lease") as conn:
            return _lease(conn)

    def unlock(self, lease_id: str) -> Lease:
        with self._tx("unlocking") as conn:
            current = _lease(conn)
            if current is None or current.lease_id != lease_id:
                held = f"the lease is {current.lease_id}" if current else "nobody holds the lease"
                raise StoreError(
                    f"no lease with id {lease_id!r}; {held}",
                    hint="pass the exact LEASE_ID printed by the refusal or `backfillctl audit show`",
                )
            conn.execute(delete(lease).where(lease.c.lease_id == lease_id))
            return current

    # --- bindings -------------------------------------------------------------------------------------

    def save_binding(self, binding: Binding) -> None:
        """Insert or replace what the store remembers of one spec (one transaction)."""
        now = stamp(self._clock())
        values = _binding_row(binding)
        with self._tx(f"saving the binding of {binding.spec_name}") as conn:
            where = bindings.c.spec_name == binding.spec_name
            if conn.execute(select(bindings.c.spec_name).where(where)).first():
                conn.execute(update(bindings).where(where).values(**values, updated_at=now))
            else:
                conn.execute(insert(bindings).values(**values, created_at=now, updated_at=now))

    def pending_creates(self) -> dict[str, datetime]:
        """Specs whose latest create event is an intent without an outcome (a crash or an ambiguous call); an
        adoption of what the intent created closes it too (a chunked spec creates again after that)."""
        last: dict[str, tuple[str, str]] = {}
        query = (
            select(audit_events.c.spec_name, audit_events.c.phase, audit_events.c.time)
            .where(audit_events.c.action.in_(("create", "adopt")))
            .order_by(audit_events.c.seq)
        )
        with self._tx("reading create intents") as conn:
            for name, phase, time in conn.execute(query):
                last[name] = (phase, time)
        return {
            name: datetime.strptime(time, _TIME).replace(tzinfo=UTC)
            for name, (phase, time) in last.items()
            if phase == "intent"
        }

    def recorded_findings(self) -> dict[tuple[str, str, int | None], str]:
        """The latest audited message of each finding, by (kind, DAG, backfill id): a finding is audited on change."""
        query = (
            select(audit_events.c.outcome, audit_events.c.dag_id, audit_events.c.backfill_id, audit_events.c.message)
            .where(audit_events.c.action == "finding")
            .order_by(audit_events.c.seq)
        )
        with self._tx("reading audited findings") as conn:
            return {(kind, dag, backfill): message for kind, dag, backfill, message in conn.execute(query)}

    def binding(self, spec_name: str) -> Binding | None:
        with self._tx("reading a binding") as conn:
            row = conn.execute(select(bindings).where(bindings.c.spec_name == spec_name)).mappings().first()
            return None if row is None else _binding(dict(row))

    def bindings(self) -> dict[str, Binding]:
        with self._tx("reading bindings") as conn:
            return {row["spec_name"]: _binding(dict(row)) for row in conn.execute(select(bindings)).mappings()}


class NoStore(Store):
    """`plan --no-store`: no bindings, no create intents, nothing opened; any other use is refused.

    The plan then reads like a first apply (for pull-request plans that get no store secret).
    """

    def __init__(self) -> None:  # no super().__init__: nothing is opened
        self.url = "none"
        self.read_only = True
        self._keeper = None
        self._fence = None
        self._key = None
        self._batch = threading.local()

    @property
    def safe_url(self) -> str:
        return "(none: --no-store)"

    def close(self) -> None:
        pass

    def bindings(self) -> dict[str, Binding]:
        return {}

    def pending_creates(self) -> dict[str, datetime]:
        return {}

    def recorded_findings(self) -> dict[tuple[str, str, int | None], str]:
        return {}

    @contextlib.contextmanager
    def _tx(self, what: str, hint: str | None = None) -> Iterator[Connection]:
        raise StoreError(f"{what} needs a store, and this command runs with --no-store")
        yield  # pragma: no cover - a generator for contextmanager


def _binding(row: Mapping[str, Any]) -> Binding:
    """The one place a bindings row becomes a core value."""
    detail = dict(row.get("detail") or {})
    backfill_id = row["backfill_id"]
    owned = tuple(detail.get("backfills") or (() if backfill_id is None else (backfill_id,)))
    return Binding(
        spec_name=row["spec_name"],
        dag_id=row["dag_id"],
        backfill_id=backfill_id,
        phase=Phase(row["phase"]),
        applied_state=DesiredState(row.get("applied_state") or DesiredState.ACTIVE.value),
        spec_digest=row["spec_digest"],
        reason=detail.get("reason", ""),
        runs=None if row.get("run_counts") is None else summary_from_json(row["run_counts"]),
        created=CreateFacts.from_json(detail),
        backfills=owned,
        git_commit=row.get("git_commit"),
        airflow_url=row.get("airflow_url") or "",
        updated_at=row.get("updated_at"),
        guard=detail.get("guard", ""),
        progress=None if detail.get("progress") is None else Progress.from_json(detail["progress"]),
        refused=bool(detail.get("refused")),
        approval=Approval.from_json(detail.get("approval")),
    )


def _binding_row(binding: Binding) -> dict[str, Any]:
    """And back: the core value as the row's columns (the JSON detail keeps the reason and create facts)."""
    detail: dict[str, Any] = {"reason": binding.reason, "backfills": list(binding.backfills)}
    if binding.guard:  # a guard's pause, remembered across passes (never confused with state: paused)
        detail["guard"] = binding.guard
    if binding.created is not None:
        detail.update(binding.created.as_json())
    if binding.progress is not None:  # a chunked spec's chunks (issue 13): JSON beside the rest, no migration
        detail["progress"] = binding.progress.as_json()
    if binding.refused:  # the last decision, a refusal: JSON beside the rest, no migration
        detail["refused"] = True
    if binding.approval is not None:  # who approved the pull request (reconcile's gate): JSON, no migration
        detail["approval"] = binding.approval.as_json()
    return {
        "spec_name": binding.spec_name,
        "airflow_url": binding.airflow_url,
        "dag_id": binding.dag_id,
        "backfill_id": binding.backfill_id,
        "spec_digest": binding.spec_digest,
        "git_commit": binding.git_commit,
        "phase": binding.phase.value,
        "run_counts": None if binding.runs is None else binding.runs.as_json(),
        "applied_state": binding.applied_state.value,
        "detail": detail,
    }


def normalise_url(url: str) -> str:
    """Check a store URL: parseable, a supported database; `postgresql://` means psycopg 3 here.

    Raises `StoreError` (exit 1) with the fix; never creates anything.
    """
    problem = url_problem(url)
    if problem is not None:  # before SQLAlchemy: it splits a password at an unencoded @ and crashes on a bad port
        raise StoreError(
            f"BACKFILLCTL_STORE_URL={redact_url(url)!r} {problem}",
            hint=f"use {URL_EXAMPLES}; percent-encode an @ / ? # in the user name or password (%40 %2F %3F %23)",
        )
    if url.startswith(("postgresql://", "postgres://")):
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise StoreError(
            f"BACKFILLCTL_STORE_URL is not a database URL: {redact_url(url)!r}",
            hint=f"use {URL_EXAMPLES} (supported databases: {', '.join(SUPPORTED)})",
        ) from None
    backend = parsed.get_backend_name()
    if backend not in SUPPORTED:
        raise StoreError(
            f"store {redact_url(url)}: {backend!r} is not a supported database (supported: {', '.join(SUPPORTED)})",
            hint=f"use {URL_EXAMPLES}; PostgreSQL needs the driver: {INSTALL_POSTGRES}",
        )
    return url


def _sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL (None for an in-memory database or another dialect)."""
    parsed: URL = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


_LINK_COLUMNS = ("seq", "prev_hash", "hash", *SCALARS, "request", "response", "mac")
FIRST_SEQ = -(2**63)  # the smallest seq a store can hold: rows below 1 are read too, and reported
_INTEGERS = frozenset(c.name for c in audit_events.c if isinstance(c.type, Integer))
_JSONS = frozenset(c.name for c in audit_events.c if isinstance(c.type, JSON))


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


def _engine(url: str, shown: str, *, read_only: bool = False) -> Engine:
    """Create the engine; a missing or unknown driver is a `StoreError` that says what to install."""
    try:
        return _make_engine(url, read_only)
    except ImportError as exc:
        backend = make_url(url).get_backend_name()
        hint = (
            f"install the PostgreSQL extra: {INSTALL_POSTGRES}"
            if exc.name == "psycopg"
            else f"use postgresql://… (psycopg 3, installed by {INSTALL_POSTGRES})"
        )
        raise StoreError(
            f"store {shown}: the Python driver {exc.name or '?'!r} for {backend} is not installed",
            hint=f"{hint}; supported databases: {', '.join(SUPPORTED)}",
        ) from None
    except NoSuchModuleError:
        driver = make_url(url).get_driver_name()
        raise StoreError(
            f"store {shown}: unknown database driver {driver!r}",
            hint=f"use {URL_EXAMPLES} (PostgreSQL needs {INSTALL_POSTGRES})",
        ) from None


def _make_engine(url: str, read_only: bool) -> Engine:
    if not url.startswith("sqlite"):
        connect_args = {"options": "-c default_transaction_read_only=on"} if read_only else {}
        return create_engine(url, pool_pre_ping=True, json_serializer=canonical_json, connect_args=connect_args)
    path = _sqlite_path(url)
    if read_only and path is not None:
        uri = path.resolve().as_uri() + "?mode=ro"
        engine = create_engine(
            "sqlite://",
            creator=lambda: sqlite3.connect(uri, uri=True, timeout=60, check_same_thread=False),
            json_serializer=canonical_json,
        )
    else:
        engine = create_engine(url, connect_args={"timeout": 60}, json_serializer=canonical_json)

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        dbapi_conn.execute("PRAGMA busy_timeout=60000")  # first: switching to WAL may wait for another opener
        if not read_only:
            _wal(dbapi_conn)

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN" if read_only else "BEGIN IMMEDIATE")

    return engine


def _wal(dbapi_conn: Any, attempts: int = 50) -> None:
    """Switch to WAL. SQLite answers "database is locked" at once (no busy wait) while another process
    holds the file in a write transaction during its first migration: wait for it, 5 s at most."""
    for attempt in range(1, attempts + 1):
        try:
            dbapi_conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or attempt == attempts:
                raise
            time.sleep(0.1)


def _revision(conn: Connection) -> str | None:
    """The Alembic revision, None for a database without our schema (no query that could fail)."""
    if not conn.dialect.has_table(conn, "alembic_version"):
        return None
    value = conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
    return None if value is None else str(value)


def _unreachable(reason: str) -> bool:
    lowered = reason.lower()
    return any(
        marker in lowered
        for marker in ("connection failed", "could not connect", "unable to open database", "connection refused")
    )


def _read_only_refusal(reason: str) -> bool:
    lowered = reason.lower()
    return "readonly database" in lowered or "read-only transaction" in lowered


def _alembic(conn: Connection, action: str, revision: str) -> None:
    from alembic import command  # noqa: PLC0415 - imported only when the schema must change (0.3 s)
    from alembic.config import Config  # noqa: PLC0415

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = conn
    getattr(command, action)(config, revision)


def _reason(exc: SQLAlchemyError) -> str:
    orig = getattr(exc, "orig", None)
    return truncate(f"{type(orig or exc).__name__}: {str(orig or exc).splitlines()[0] if str(orig or exc) else ''}")


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


def _lease(conn: Connection) -> Lease | None:
    row = conn.execute(select(lease).where(lease.c.name == LEASE_NAME)).mappings().first()
    return None if row is None else Lease(**{k: row[k] for k in Lease.__dataclass_fields__})


def _lease_dict(value: Lease) -> dict[str, Any]:
    return {k: getattr(value, k) for k in Lease.__dataclass_fields__}


def _lease_row(value: Lease) -> dict[str, Any]:
    return {"name": LEASE_NAME, **_lease_dict(value)}


def _insert_lease(conn: Connection, mine: Lease) -> bool:
    try:
        with conn.begin_nested():
            conn.execute(insert(lease).values(**_lease_row(mine)))
    except IntegrityError:
        return False
    return True


class _LeaseKeeper:
    """Renews one lease every `every` seconds from a daemon thread, with its own engine (connection).

    A renewal that finds the lease gone marks it lost for good; failing renewals (store unreachable)
    mark it lost once the last renewed expiry has passed, since another reconciler may then take it over.
    """

    def __init__(self, url: str, mine: Lease, *, ttl: float, every: float, clock: Clock) -> None:
        self.lease, self._ttl, self._every, self._clock = mine, ttl, every, clock
        self._store = Store(url, clock=clock, migrate=False)
        self._lost: str | None = None
        self._guard = threading.Lock()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="backfillctl-lease", daemon=True)
        self._thread.start()

    def lost(self) -> str | None:
        with self._guard:
            if self._lost is None and self.lease.expires_at <= stamp(self._clock()):
                self._lost = f"lease {self.lease.lease_id} expired at {self.lease.expires_at} without renewal"
            return self._lost

    def mark_lost(self, why: str) -> None:
        with self._guard:
            self._lost = self._lost or why

    def _run(self) -> None:
        while not self._stopped.wait(self._every):
            try:
                renewed = self._store.heartbeat(self.lease, self._ttl)
            except LockHeld as exc:
                self.mark_lost(exc.message)
                return
            except StoreError as exc:
                log.warning("could not renew the lease %s: %s", self.lease.lease_id, exc.message)
                continue
            with self._guard:
                self.lease = renewed

    def stop(self) -> None:
        self._stopped.set()
        if threading.current_thread() is not self._thread:
            self._thread.join(timeout=30)
        self._store.close()
