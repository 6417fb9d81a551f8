"""The controller's own store (SQLAlchemy + Alembic): bindings, the hash-chained audit log, the lease.

SQLite by default, PostgreSQL in production; never Airflow's metadata database.  Owns SQLAlchemy and
Alembic: their exceptions become `StoreError`.  Appends are serialised (SQLite `BEGIN IMMEDIATE`,
PostgreSQL `LOCK TABLE … SHARE ROW EXCLUSIVE`), so concurrent writers never fork the chain or reuse a seq.
Migrations are serialised the same way (SQLite `BEGIN IMMEDIATE`, PostgreSQL an advisory transaction
lock), with the revision re-read under the lock, so two first starts on a fresh store both work.

`Store(url, read_only=True)` never creates, migrates or writes: a missing store (or SQLite file or
folder) is an error, and SQLite is opened with `mode=ro`, PostgreSQL with read-only transactions.

The lease: `acquire` takes it, `keep` renews it from a daemon thread with its own engine (its own
connection) while the process lives, so a killed holder's short lease lapses and is taken over.  Every
`intent` append re-checks, in its own transaction, that this process still holds the lease (a fence):
a reconciler whose lease was taken away cannot record an intent, so it makes no further change.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
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

from sqlalchemy import Connection, Engine, create_engine, delete, event, insert, select, text, update
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, IntegrityError, NoSuchModuleError, SQLAlchemyError

from controller.adapters.store.outbox import insert_notifications
from controller.adapters.store.tables import audit_events, bindings, lease
from controller.core.audit import (
    GENESIS,
    SCALARS,
    TIME_FORMAT,
    AuditEntry,
    AuditRecord,
    ChainLink,
    VerifyResult,
    body_text,
    seal,
    verify_chain,
)
from controller.core.binding import Approval, Binding, CreateFacts
from controller.core.chunks import Progress
from controller.core.model import Phase, summary_from_json
from controller.core.notify import Notification
from controller.core.spec import DesiredState, canonical_json
from controller.errors import LockHeld, StoreError, truncate

MIGRATIONS = Path(__file__).parent / "migrations"
SCHEMA_HEAD = "0005"  # the newest migration; a test keeps it equal to Alembic's head
KNOWN_REVISIONS = frozenset({"0001", "0002", "0003", "0004", "0005"})
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
    def __init__(self, url: str, *, clock: Clock = _utcnow, migrate: bool = True, read_only: bool = False) -> None:
        self.url = normalise_url(url)
        self.read_only = read_only
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
        return safe_url(self.url)

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
            if current != SCHEMA_HEAD:
                _alembic(conn, "upgrade", SCHEMA_HEAD)
        return current, SCHEMA_HEAD

    def check_current(self) -> str:
        """For read-only use: the store must exist and be at this backfillctl's schema revision."""
        current = self.revision()
        if current is None:
            raise self._missing()
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
                select(audit_events.c.seq, audit_events.c.hash).order_by(audit_events.c.seq.desc()).limit(1)
            ).first()
            seq, prev = (last.seq + 1, last.hash) if last else (1, GENESIS)
            record = seal(seq, stamp(self._clock()), entry, prev)
            conn.execute(insert(audit_events).values(**_row(record)))
            if notifications:  # the outbox: committed with the record or not at all (issue 15)
                insert_notifications(conn, record, notifications, stamp(self._clock()))
        return record

    def events(self, where: EventFilter | None = None, batch: int = 2000) -> Iterator[AuditRecord]:
        """Events in seq order, fetched in batches (flat memory for any size)."""
        query = select(audit_events).order_by(audit_events.c.seq)
        for column, value in _filters(where or EventFilter()):
            query = query.where(column >= value) if column is audit_events.c.time else query.where(column == value)
        after = 0
        while True:
            with self._tx("reading audit events") as conn:
                rows = conn.execute(query.where(audit_events.c.seq > after).limit(batch)).mappings().all()
            yield from (_record(row) for row in rows)
            if len(rows) < batch:
                return
            after = rows[-1]["seq"]

    def verify(self, expect_head: str | None = None) -> VerifyResult:
        return verify_chain(self.links(), expect_head)

    def links(self, batch: int = 10000) -> Iterator[ChainLink]:
        """(seq, prev_hash, hash, body JSON) in seq order, from the stored canonical JSON text, no decoding."""
        columns = ", ".join(_LINK_COLUMNS)
        query = text(f"SELECT {columns} FROM audit_events WHERE seq > :after ORDER BY seq LIMIT :n")  # noqa: S608
        after = 0
        while True:
            with self._tx("reading audit events") as conn:
                rows = conn.execute(query, {"after": after, "n": batch}).all()
            for row in rows:
                scalars = dict(zip(SCALARS, row[3:-2], strict=True))
                yield row[0], row[1], row[2], body_text(scalars, _json_text(row[-2]), _json_text(row[-1]))
            if len(rows) < batch:
                return
            after = rows[-1][0]

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
    if url.startswith(("postgresql://", "postgres://")):
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise StoreError(
            f"BACKFILLCTL_STORE_URL is not a database URL: {_redact(url)!r}",
            hint=f"use {URL_EXAMPLES} (supported databases: {', '.join(SUPPORTED)})",
        ) from None
    backend = parsed.get_backend_name()
    if backend not in SUPPORTED:
        raise StoreError(
            f"store {safe_url(url)}: {backend!r} is not a supported database (supported: {', '.join(SUPPORTED)})",
            hint=f"use {URL_EXAMPLES}; PostgreSQL needs the driver: {INSTALL_POSTGRES}",
        )
    return url


def safe_url(url: str) -> str:
    """The URL with its password hidden (`***`)."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return _redact(url)


def _redact(text_: str) -> str:
    """Hide anything that looks like `:password@` in a string that is not a parseable URL."""
    return re.sub(r":.*@", ":***@", text_)


def _sqlite_path(url: str) -> Path | None:
    """The file of a SQLite URL (None for an in-memory database or another dialect)."""
    parsed: URL = make_url(url)
    if parsed.get_backend_name() != "sqlite" or parsed.database in (None, "", ":memory:"):
        return None
    return Path(parsed.database)


_LINK_COLUMNS = ("seq", "prev_hash", "hash", *SCALARS, "request", "response")


def _json_text(value: Any) -> str:
    """Stored JSON as canonical text: SQLite hands back our canonical text, PostgreSQL a decoded value."""
    if value is None:
        return "null"
    return value if isinstance(value, str) else canonical_json(value)


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


def _record(row: Any) -> AuditRecord:
    fields = {k: row[k] for k in AuditEntry.__dataclass_fields__}
    return AuditRecord(row["seq"], row["time"], AuditEntry(**fields), row["prev_hash"], row["hash"])


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
