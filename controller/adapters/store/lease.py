"""The reconcile lease (table `lease`): one reconciler at a time per store.

`acquire` takes it, `keep` renews it from a daemon thread with its own engine (its own connection) while
the process lives, so a killed holder's short lease lapses and is taken over.  `fence`, run by every
`intent` append inside its own transaction, re-checks that this process still holds the lease: a
reconciler whose lease was taken away cannot record an intent, so it makes no further change.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import uuid
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from sqlalchemy import Connection, delete, insert, select, update
from sqlalchemy.exc import IntegrityError

from controller.adapters.store.database import Clock, Database, stamp
from controller.adapters.store.tables import lease
from controller.errors import LockHeld, StoreError

LEASE_NAME = "reconcile"
log = logging.getLogger("controller.adapters.store")  # the name JSON log lines carry, as before the split


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


class LeaseLost(LockHeld):
    """This process's lease was taken away or lapsed: it must make no further change (exit 5)."""


class Leases:
    def __init__(self, db: Database, clock: Clock) -> None:
        self._db, self._clock = db, clock
        self._keeper: _LeaseKeeper | None = None
        self._fence: str | None = None  # the lease id every intent append checks

    def close(self) -> None:
        if self._keeper is not None:
            self._keeper.stop()
            self._keeper = None

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
        with self._db.tx("taking the lease") as conn:
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
        with self._db.tx("renewing the lease") as conn:
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
        self._keeper = _LeaseKeeper(self._db.url, mine, ttl=ttl, every=every, clock=self._clock)

    def ok(self) -> bool:
        """False once a renewal found the lease taken away, or it could not be renewed before it expired."""
        return self._keeper is None or self._keeper.lost() is None

    def check(self) -> None:
        """Raise `LeaseLost` (exit 5) if the kept lease is gone; call it before each mutating call."""
        if self._keeper is not None and (lost := self._keeper.lost()) is not None:
            raise LeaseLost(
                f"{lost}; this reconciler stopped before its next change",
                hint="another reconciler owns the store now; find out why the heartbeat stopped (a paused or "
                "overloaded process, a slow or unreachable store) before running this one again",
            )

    def held(self) -> Lease | None:
        """The lease this store keeps (with its latest expiry), if any."""
        return None if self._keeper is None else self._keeper.lease

    def fence(self, conn: Connection) -> None:
        """Inside an intent's transaction: raise `LeaseLost` unless the kept lease (if any) is still ours."""
        if self._fence is None:
            return
        lease_id, row, now = self._fence, _lease(conn), stamp(self._clock())
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
        with self._db.tx("releasing the lease") as conn:
            conn.execute(delete(lease).where(lease.c.lease_id == mine.lease_id))

    def current(self) -> Lease | None:
        with self._db.tx("reading the lease") as conn:
            return _lease(conn)

    def unlock(self, lease_id: str) -> Lease:
        with self._db.tx("unlocking") as conn:
            current = _lease(conn)
            if current is None or current.lease_id != lease_id:
                held = f"the lease is {current.lease_id}" if current else "nobody holds the lease"
                raise StoreError(
                    f"no lease with id {lease_id!r}; {held}",
                    hint="pass the exact LEASE_ID printed by the refusal or `backfillctl audit show`",
                )
            conn.execute(delete(lease).where(lease.c.lease_id == lease_id))
            return current


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
        self._db = Database(url, migrate=False)
        self._leases = Leases(self._db, clock)
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
                renewed = self._leases.heartbeat(self.lease, self._ttl)
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
        self._db.close()
