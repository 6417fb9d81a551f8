"""Opening a reconciler: the store (read-only, or none), the lease, then Airflow, in that order (fail closed)."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator

from controller.adapters.gitsource import GitSource
from controller.adapters.store import NoStore
from controller.commands.reconcile.reconciler import Reconciler
from controller.commands.reconcile.spec_source import last_good_policy
from controller.commands.runtime import session
from controller.commands.runtime.environments import production_settings
from controller.commands.runtime.settings import Settings


@contextlib.contextmanager
def open_reconciler(
    settings: Settings,
    *,
    lease: bool = False,
    wait_lock: bool = False,
    lock_timeout: float | None = None,
    read_only: bool = False,
    no_store: bool = False,
    allow_dirty: bool = False,
    lists_dags: bool = True,
    sleep: Callable[[float], None] = time.sleep,
    notify: Callable[[str], None] = session.stderr_line,
) -> Iterator[Reconciler]:
    """Open the store (read-only, or none at all for `plan --no-store`), take the lease, then Airflow (whose
    preflight reads the DAG listing's first page for the passes, unless the command `lists_dags` not).

    With `lease`, a daemon thread renews the lease every HEARTBEAT_EVERY seconds for the whole session
    (every pass, `--once` included); the store refuses intents once it is lost (`LeaseLost`, exit 5).
    """
    git = GitSource(settings.specs_dir)
    git.require_full_history()  # before the store, the lease and Airflow: a shallow clone is refused at once
    store = NoStore() if no_store else session.open_store(settings, read_only=read_only)
    try:
        settings = production_settings(settings, last_good_policy(store))  # as the policy names production's
        with contextlib.ExitStack() as stack:
            if lease:
                stack.enter_context(session.hold_lease(store, settings, wait_lock, lock_timeout, sleep, notify))
            with session.make_client(settings, lists_dags=lists_dags) as client:
                reconciler = Reconciler(
                    settings, store, client, allow_dirty=allow_dirty, connect=session.make_client, git=git
                )
                stack.callback(reconciler.close)  # the other environments' clients
                yield reconciler
    finally:
        store.close()
