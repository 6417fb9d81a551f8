"""Opening what a command needs, in the right order: store first (fail closed), lease, then Airflow."""

from __future__ import annotations

import contextlib
import signal
import socket
import time
from collections.abc import Callable, Iterator
from types import FrameType

from controller.adapters.store import Lease, Store
from controller.commands.reconcile import Reconciler, make_client
from controller.commands.settings import Settings
from controller.core.audit import controller_event
from controller.errors import LockHeld

LEASE_TTL = 300.0


@contextlib.contextmanager
def open_reconciler(
    settings: Settings, *, lease: bool = False, wait_lock: bool = False, sleep: Callable[[float], None] = time.sleep
) -> Iterator[Reconciler]:
    store = Store(settings.store_url)
    held: Lease | None = None
    try:
        if lease:
            held = _acquire(store, settings, wait_lock, sleep)
        with make_client(settings) as client:
            reconciler = Reconciler(settings, store, client)
            reconciler.lease = held
            yield reconciler
    finally:
        if held is not None:
            with contextlib.suppress(LockHeld):
                store.release(held)
        store.close()


def _acquire(store: Store, settings: Settings, wait: bool, sleep: Callable[[float], None]) -> Lease:
    holder = f"{settings.actor}@{socket.gethostname()}"
    while True:
        try:
            mine, previous = store.acquire(holder, LEASE_TTL)
        except LockHeld:
            if not wait:
                raise
            sleep(2.0)
            continue
        if previous is not None:
            store.append(
                controller_event(
                    "lease", settings.actor, "taken-over", f"took over the expired lease of {previous.describe()}"
                )
            )
        return mine


class Stop:
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
