"""The store's database: its URL, the SQLAlchemy engine, transactions, and the schema (Alembic migrations).

Owns SQLAlchemy's and Alembic's exceptions: they become `StoreError`.  Every other part of the store reads
and writes through `Database.tx`, the one transaction helper.  Migrations are serialised (SQLite `BEGIN
IMMEDIATE`, PostgreSQL an advisory transaction lock), with the revision re-read under the lock, so two first
starts on a fresh store both work.

`Database(url, read_only=True)` never creates, migrates or writes: a missing store (or SQLite file or
folder) is an error, and SQLite is opened with `mode=ro`, PostgreSQL with read-only transactions.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Column, Connection, Engine, Text, cast, create_engine, event, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError, NoSuchModuleError, SQLAlchemyError
from sqlalchemy.sql.elements import Cast

from controller.adapters.store.tables import audit_events
from controller.core.audit.chain import TIME_FORMAT
from controller.core.model.secret import redact_url, url_problem
from controller.core.model.spec import canonical_json
from controller.errors import StoreError, StoreMissing, StoreUnavailable, truncate

MIGRATIONS = Path(__file__).parent / "migrations"
SCHEMA_HEAD = "0011"  # the newest migration; a test keeps it equal to Alembic's head
KNOWN_REVISIONS = frozenset({"0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008", "0009", "0010", "0011"})
SUPPORTED = ("sqlite", "postgresql")
INSTALL_POSTGRES = "pip install 'airflow-backfill-controller[postgres]'"
URL_EXAMPLES = "sqlite:///path/to/state.db or postgresql://USER@HOST:5432/DBNAME"
SCHEMA_LOCK_KEY = 4_242_100_901  # PostgreSQL advisory lock serialising migrations of one database
# what a driver says when the database cannot be reached (PostgreSQL down or restarting, SQLite's folder gone)
UNREACHABLE = (
    "connection failed",
    "could not connect",
    "unable to open database",
    "connection refused",
    "the database system is starting up",
    "the database system is shutting down",
)
DROPPED_HINT = (
    "the connection to the database dropped and the transaction was rolled back: nothing was half-written; "
    "check that the database is up, then run the command again"
)
Clock = Callable[[], datetime]


def batches(items: Sequence[str], size: int = 500) -> list[Sequence[str]]:
    """`items` in lists of `size`: the bound parameters of one statement are limited (SQLite: 32,766)."""
    return [items[i : i + size] for i in range(0, len(items), size)]


def stamp(moment: datetime) -> str:
    """Fixed-width UTC text, so string order is time order."""
    return moment.astimezone(UTC).strftime(TIME_FORMAT)


def unstamp(value: str) -> datetime:
    """And back: the store's time text as an aware datetime."""
    return datetime.strptime(value, TIME_FORMAT).replace(tzinfo=UTC)


def utcnow() -> datetime:
    return datetime.now(UTC)


def json_text(column: Column[Any]) -> Cast[str]:
    """A JSON column read as its text (decoded by `decoded`, not a parse per row by the driver or SQLAlchemy)."""
    return cast(column, Text)


def decoded(texts: Sequence[str | None]) -> list[Any]:
    """JSON columns' texts (`json_text`) as values, as `json.loads` reads each, by the C scanner straight away:
    `json.loads`'s own steps per row cost ~2× as much over a history of specs. A text the scanner does not read
    whole (surrounding whitespace, extra data, not JSON) goes to `json.loads`, which reads or rejects it."""
    return [None if text is None else _value(text) for text in texts]


def _value(text: str) -> Any:
    try:
        value, end = _SCAN(text, 0)
    except StopIteration:  # no value at the start: `json.loads` says why, or skips the whitespace
        return json.loads(text)
    return value if end == len(text) else json.loads(text)


# one value from an index: what `json.loads` calls inside, without its own steps (typeshed lacks the attribute)
_SCAN: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]


class Database:
    """One store database: opened (and migrated, unless `migrate=False` or `read_only`) on construction."""

    def __init__(self, url: str, *, migrate: bool = True, read_only: bool = False) -> None:
        self.url = normalise_url(url)
        self.read_only = read_only
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
        self.engine.dispose()

    def failed(self, what: str, exc: SQLAlchemyError, hint: str | None = None) -> StoreError:
        """The `StoreError` for a failed database call, with the fix its reason suggests: `StoreUnavailable` when
        the database could not be reached or the connection dropped (the transaction rolled back)."""
        reason = _reason(exc)
        message = f"store {self.safe_url}: {what} failed: {reason}"
        if _dropped(exc):
            return StoreUnavailable(message, hint=DROPPED_HINT)
        if hint is None or _unreachable(reason):
            hint = "check BACKFILLCTL_STORE_URL and that the database is reachable"
        if _read_only_refusal(reason):
            hint = "the database refused a write: the store's user (or file) needs write access for this command"
        return (StoreUnavailable if _unreachable(reason) else StoreError)(message, hint=hint)

    @contextlib.contextmanager
    def tx(self, what: str, hint: str | None = None) -> Iterator[Connection]:
        """One transaction (or this thread's open batch); a database error is a `StoreError` naming `what`."""
        joined: Connection | None = getattr(self._batch, "conn", None)
        try:
            if joined is not None:
                yield joined
                return
            with self.engine.begin() as conn:
                yield conn
        except SQLAlchemyError as exc:
            raise self.failed(what, exc, hint) from None

    @contextlib.contextmanager
    def batch(self, what: str) -> Iterator[None]:
        """One transaction for this thread's writes until the block ends: all of them or none (see `Store.batch`)."""
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
            raise self.failed(what, exc) from None

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
        with self.tx(f"migration to schema revision {SCHEMA_HEAD}", hint) as conn:
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

    def revision(self) -> str | None:
        try:
            with self.engine.connect() as conn:
                return _revision(conn)
        except SQLAlchemyError as exc:
            raise self.failed("reading the schema revision", exc) from None

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
            raise self.failed("reading the store's tables", exc) from None

    def _unversioned(self) -> StoreError:
        return StoreError(
            f"the store at {self.safe_url} has audit tables but no schema version: its alembic_version table "
            "is missing (dropped, or not restored with the rest)",
            hint="restore the store from a backup; or, if you know the revision it was at (this backfillctl "  # noqa: S608 - a hint, not a query
            f"writes {SCHEMA_HEAD}), recreate the table by hand: CREATE TABLE alembic_version (version_num "
            f"VARCHAR(32) NOT NULL PRIMARY KEY); INSERT INTO alembic_version VALUES ('{SCHEMA_HEAD}'); "
            "then run `backfillctl audit verify`",
        )

    def _missing(self) -> StoreMissing:
        path = _sqlite_path(self.url)
        where = ""
        if path is not None and not path.is_absolute():
            where = f" (a relative SQLite path, resolved against the current directory {Path.cwd()})"
        return StoreMissing(
            f"no store at {self.safe_url}; reconcile creates it",
            hint=f"check BACKFILLCTL_STORE_URL{where}, or run `backfillctl reconcile` first"
            " (`backfillctl plan --no-store` plans without one)",
        )


class NoDatabase(Database):
    """`plan --no-store`: nothing is opened, and every transaction is refused."""

    def __init__(self) -> None:  # no super().__init__: nothing is opened
        self.url = "none"
        self.read_only = True
        self._batch = threading.local()

    @property
    def safe_url(self) -> str:
        return "(none: --no-store)"

    def close(self) -> None:
        pass

    @contextlib.contextmanager
    def tx(self, what: str, hint: str | None = None) -> Iterator[Connection]:
        raise StoreError(f"{what} needs a store, and this command runs with --no-store")
        yield  # pragma: no cover - a generator for contextmanager

    @contextlib.contextmanager
    def batch(self, what: str) -> Iterator[None]:
        raise StoreError(f"{what} needs a store, and this command runs with --no-store")
        yield  # pragma: no cover - a generator for contextmanager


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
    return any(marker in lowered for marker in UNREACHABLE)


def _dropped(exc: SQLAlchemyError) -> bool:
    """The connection broke under a statement: SQLAlchemy's own disconnect test (the driver's error codes and
    texts, e.g. PostgreSQL's "terminating connection due to administrator command") marked it invalidated."""
    return isinstance(exc, DBAPIError) and exc.connection_invalidated


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
