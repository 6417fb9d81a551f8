"""The controller's own store (SQLAlchemy + Alembic): bindings, the hash-chained audit log, the lease.

SQLite by default, PostgreSQL in production; never Airflow's metadata database.  Owns SQLAlchemy and
Alembic: their exceptions become `StoreError`.  Appends are serialised (SQLite `BEGIN IMMEDIATE`,
PostgreSQL `LOCK TABLE … SHARE ROW EXCLUSIVE`), so concurrent writers never fork the chain or reuse a seq.
"""

from __future__ import annotations

import contextlib
import os
import socket
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, create_engine, delete, event, insert, select, text, update
from sqlalchemy.engine import make_url
from sqlalchemy.exc import IntegrityError, OperationalError, ProgrammingError, SQLAlchemyError

from controller.adapters.store.tables import audit_events, bindings, lease
from controller.core.audit import (
    GENESIS,
    SCALARS,
    AuditEntry,
    AuditRecord,
    ChainLink,
    VerifyResult,
    body_text,
    seal,
    verify_chain,
)
from controller.core.spec import canonical_json
from controller.errors import LockHeld, StoreError, truncate

MIGRATIONS = Path(__file__).parent / "migrations"
SCHEMA_HEAD = "0004"  # the newest migration; a test keeps it equal to Alembic's head
KNOWN_REVISIONS = frozenset({"0001", "0002", "0003", "0004"})
LEASE_NAME = "reconcile"
_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"
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


class Store:
    def __init__(self, url: str, *, clock: Clock = _utcnow, migrate: bool = True) -> None:
        self.url = normalise_url(url)
        self._clock = clock
        self.engine = _engine(self.url)
        if migrate:
            try:
                self.migrate()
            except BaseException:
                self.engine.dispose()
                raise

    @property
    def safe_url(self) -> str:
        return make_url(self.url).render_as_string(hide_password=True)

    def close(self) -> None:
        self.engine.dispose()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def _failed(self, what: str, exc: SQLAlchemyError) -> StoreError:
        return StoreError(
            f"store {self.safe_url}: {what} failed: {_reason(exc)}",
            hint="check BACKFILLCTL_STORE_URL and that the database is reachable",
        )

    @contextlib.contextmanager
    def _tx(self, what: str) -> Iterator[Connection]:
        try:
            with self.engine.begin() as conn:
                yield conn
        except SQLAlchemyError as exc:
            raise self._failed(what, exc) from None

    # --- schema ---------------------------------------------------------------------------------------

    def migrate(self) -> tuple[str | None, str]:
        """Upgrade to the newest schema; refuse a store written by a newer backfillctl.

        The common case (already current) reads one row and never imports Alembic.
        """
        current = self.revision()
        if current is not None and current not in KNOWN_REVISIONS:
            raise StoreError(
                f"store {self.safe_url} has schema revision {current}, newer than this backfillctl "
                f"knows (head {SCHEMA_HEAD})",
                hint="upgrade backfillctl; never point an old one at it",
            )
        if current != SCHEMA_HEAD:
            with self._tx("migration") as conn:
                _alembic(conn, "upgrade", SCHEMA_HEAD)
        return current, SCHEMA_HEAD

    def revision(self) -> str | None:
        try:
            with self.engine.connect() as conn:
                return conn.execute(text("SELECT version_num FROM alembic_version")).scalar()
        except SQLAlchemyError as exc:
            if isinstance(exc, (OperationalError, ProgrammingError)) and _missing_table(exc):
                return None  # a new, empty database
            raise self._failed("reading the schema revision", exc) from None

    # --- audit ----------------------------------------------------------------------------------------

    def append(self, entry: AuditEntry) -> AuditRecord:
        """Append one event to the chain (serialised across processes)."""
        with self._tx(f"writing the audit event {entry.action}/{entry.phase}") as conn:
            if conn.dialect.name == "postgresql":
                conn.exec_driver_sql("LOCK TABLE audit_events IN SHARE ROW EXCLUSIVE MODE")
            last = conn.execute(
                select(audit_events.c.seq, audit_events.c.hash).order_by(audit_events.c.seq.desc()).limit(1)
            ).first()
            seq, prev = (last.seq + 1, last.hash) if last else (1, GENESIS)
            record = seal(seq, stamp(self._clock()), entry, prev)
            conn.execute(insert(audit_events).values(**_row(record)))
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
                if not _insert_lease(conn, mine):
                    raise LockHeld(
                        "lock held by another reconciler that started at the same moment",
                        hint="retry, or use --wait-lock",
                    )
                return mine, None
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

    def bind(self, spec_name: str, values: Mapping[str, Any]) -> None:
        now = stamp(self._clock())
        with self._tx(f"saving the binding of {spec_name}") as conn:
            exists = conn.execute(select(bindings.c.spec_name).where(bindings.c.spec_name == spec_name)).first()
            if exists:
                conn.execute(update(bindings).where(bindings.c.spec_name == spec_name).values(**values, updated_at=now))
            else:
                conn.execute(insert(bindings).values(spec_name=spec_name, **values, created_at=now, updated_at=now))

    def pending_creates(self) -> dict[str, datetime]:
        """Specs whose latest create event is an intent without an outcome (a crash or an ambiguous call)."""
        last: dict[str, tuple[str, str]] = {}
        query = (
            select(audit_events.c.spec_name, audit_events.c.phase, audit_events.c.time)
            .where(audit_events.c.action == "create")
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

    def binding(self, spec_name: str) -> dict[str, Any] | None:
        with self._tx("reading a binding") as conn:
            row = conn.execute(select(bindings).where(bindings.c.spec_name == spec_name)).mappings().first()
            return None if row is None else dict(row)

    def bindings(self) -> dict[str, dict[str, Any]]:
        with self._tx("reading bindings") as conn:
            return {row["spec_name"]: dict(row) for row in conn.execute(select(bindings)).mappings()}


def normalise_url(url: str) -> str:
    """`postgresql://` means psycopg 3 here (the project's driver); SQLite folders are created."""
    if url.startswith(("postgresql://", "postgres://")):
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    if url.startswith("sqlite:///") and url != "sqlite:///:memory:":
        Path(url.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    return url


_LINK_COLUMNS = ("seq", "prev_hash", "hash", *SCALARS, "request", "response")


def _json_text(value: Any) -> str:
    """Stored JSON as canonical text: SQLite hands back our canonical text, PostgreSQL a decoded value."""
    if value is None:
        return "null"
    return value if isinstance(value, str) else canonical_json(value)


def _engine(url: str) -> Engine:
    if not url.startswith("sqlite"):
        return create_engine(url, pool_pre_ping=True, json_serializer=canonical_json)
    engine = create_engine(url, connect_args={"timeout": 60}, json_serializer=canonical_json)

    @event.listens_for(engine, "connect")
    def _connect(dbapi_conn: Any, _record: Any) -> None:
        dbapi_conn.isolation_level = None
        dbapi_conn.execute("PRAGMA journal_mode=WAL")
        dbapi_conn.execute("PRAGMA busy_timeout=60000")

    @event.listens_for(engine, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def _missing_table(exc: SQLAlchemyError) -> bool:
    text_ = str(getattr(exc, "orig", exc)).lower()
    return "no such table: alembic_version" in text_ or 'relation "alembic_version" does not exist' in text_


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
