"""Opening what a command needs, in the right order: store first (fail closed), lease, then Airflow."""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import sys
import time
from collections.abc import Callable, Iterator
from types import FrameType

from controller.adapters.airflow import AirflowClient
from controller.adapters.store import Store
from controller.adapters.store.lease import Lease
from controller.commands.runtime.settings import Settings
from controller.core.audit.chain import controller_event
from controller.core.audit.vocabulary import Action, Outcome
from controller.core.documents.escaping import plain
from controller.core.model.privilege import connections_warning, role_of, role_warning
from controller.errors import LockHeld

log = logging.getLogger(__name__)

LEASE_TTL = 20.0  # a killed holder's lease lapses this long after its last renewal (takeover within 30 s)
HEARTBEAT_EVERY = 5.0  # renewals per TTL: 4, so a slow store or a busy machine can miss some
WAIT_POLL = 2.0


def stderr_line(line: str) -> None:
    sys.stderr.write(plain(line) + "\n")  # the lease holder's name and host come from the store
    sys.stderr.flush()


def open_store(
    settings: Settings, *, read_only: bool = False, migrate: bool = True, previous_keys: bool = False
) -> Store:
    """The store the settings name, the one way to open it: its audit chain keyed with BACKFILLCTL_AUDIT_KEY (the
    key signs appends and verifies; a read needs none); `previous_keys`: with BACKFILLCTL_AUDIT_KEYS_PREVIOUS, to
    verify or rotate the chain."""
    previous = settings.audit_keys_previous if previous_keys else ()
    return Store(
        settings.store_url,
        read_only=read_only,
        migrate=migrate,
        audit_key=settings.audit_key,
        previous_audit_keys=previous,
    )


def make_client(settings: Settings, *, preflight: bool = True, lists_dags: bool = False) -> AirflowClient:
    """A client for the configured Airflow, checked once (reachable, Airflow 3, credentials accepted); a command that
    `lists_dags` has its preflight read the listing's first page for it (`Server.preflight`)."""
    client = AirflowClient(
        settings.airflow_address(),
        token=settings.airflow_token,
        username=settings.airflow_username,
        password=settings.airflow_password,
        timeout=settings.airflow_timeout,
        max_concurrency=settings.airflow_max_concurrency,
        allow_untested=settings.allow_untested_airflow,
    )
    if preflight:
        try:
            client.preflight(lists_dags=lists_dags)
        except BaseException:
            client.close()
            raise
        if not settings.allow_admin_identity:
            warn_of_privilege(client, settings.airflow_username)
    return client


def warn_of_privilege(client: AirflowClient, username: str | None) -> None:
    """Least privilege: warn when the identity can do more than backfillctl needs, where Airflow lets us tell
    (SimpleAuthManager's role from its token, no call; else one read of connections). Never an error."""
    claims = client.token_claims()
    who = str((claims or {}).get("sub") or username or "from BACKFILLCTL_AIRFLOW_TOKEN")
    role = role_of(claims)
    if role is not None:
        warning = role_warning(who, role)
    else:
        warning = connections_warning(who) if client.can_read_connections() else None
    if warning is not None:
        log.warning("%s", warning)


@contextlib.contextmanager
def hold_lease(  # noqa: PLR0917
    store: Store,
    settings: Settings,
    wait: bool = False,
    timeout: float | None = None,
    sleep: Callable[[float], None] = time.sleep,
    notify: Callable[[str], None] = stderr_line,
    ttl: float = LEASE_TTL,
    every: float = HEARTBEAT_EVERY,
) -> Iterator[Lease]:
    """Take the lease (waiting for it with `wait`, at most `timeout` seconds), keep it renewed, release it."""
    mine = _acquire(store, settings, wait or timeout is not None, timeout, sleep, notify, ttl)
    store.keep(mine, ttl, every)
    try:
        yield mine
    finally:
        store.release_kept()


def _acquire(  # noqa: PLR0917
    store: Store,
    settings: Settings,
    wait: bool,
    timeout: float | None,
    sleep: Callable[[float], None],
    notify: Callable[[str], None],
    ttl: float,
) -> Lease:
    holder = f"{settings.actor}@{socket.gethostname()}"
    started = time.monotonic()
    announced: set[str] = set()
    while True:
        try:
            mine, previous = store.acquire(holder, ttl)
        except LockHeld:
            if not wait:
                raise
            current = store.current_lease()
            if current is not None and current.lease_id not in announced:
                announced.add(current.lease_id)
                notify(f"waiting for the lease held by {current.describe()}; it expires at {current.expires_at}")
            if timeout is not None and time.monotonic() - started >= timeout:
                who = current.describe() if current else "another reconciler"
                raise LockHeld(
                    f"gave up after {timeout:g}s waiting for the lease held by {who}",
                    hint="try again later; if that process is gone, its lease lapses within "
                    f"{LEASE_TTL:g}s, or release it with `backfillctl store unlock LEASE_ID`",
                ) from None
            sleep(WAIT_POLL if timeout is None else max(0.05, min(WAIT_POLL, timeout - (time.monotonic() - started))))
            continue
        if previous is not None:
            store.append(
                controller_event(
                    Action.LEASE,
                    settings.actor,
                    Outcome.TAKEN_OVER,
                    f"took over the expired lease of {previous.describe()}",
                )
            )
        return mine


class Shutdown:
    """SIGTERM/SIGINT set a flag; the current action finishes, then the loop ends."""

    def __init__(self) -> None:
        self.requested = False

    def install(self) -> None:
        signal.signal(signal.SIGTERM, self._handle)
        signal.signal(signal.SIGINT, self._handle)

    def _handle(self, _signum: int, _frame: FrameType | None) -> None:
        self.requested = True

    def wait(self, seconds: float, sleep: Callable[[float], None] = time.sleep) -> None:
        deadline = time.monotonic() + seconds
        while not self.requested and time.monotonic() < deadline:
            sleep(min(0.2, max(0.0, deadline - time.monotonic())))
