"""The reconcile loop below the CLI: once, `--watch` or `--until-complete`, with a stop signal and a deadline.

The CLI parses options and renders each pass through `on_pass`; this module owns the sequence: open the
session (store, lease, Airflow), run passes, wait, stop. A pass that loses the store (`StoreUnavailable`: the
database restarted, the connection was killed) ends at the failed write; `--watch` and `--until-complete` try
again after 1 s, 2 s, 4 s… (at most the interval), logging each attempt; `--once` exits 1.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING

from controller.commands.loop.passhooks import MonitorOptions, PassHooks
from controller.commands.reconcile.gate import EvidenceGiven
from controller.commands.reconcile.opening import open_reconciler
from controller.commands.reconcile.reconciler import PassResult
from controller.commands.runtime import collector
from controller.commands.runtime.session import Shutdown
from controller.commands.runtime.settings import Settings
from controller.errors import StoreUnavailable

if TYPE_CHECKING:
    from controller.commands.loop.forge import EvidenceProvider

log = logging.getLogger(__name__)
RETRY_FIRST = 1.0  # seconds before the first attempt after a pass lost the store; doubling up to the interval
STORE_LOST_HINT = (
    "the pass stopped at that write, and nothing was half-applied: each change's intent is recorded before its "
    "call, and a change whose outcome is missing is adopted by the next pass, never made twice; run reconcile "
    "again once the store is reachable (`--watch` retries by itself)"
)


class Repeat(StrEnum):
    ONCE = "once"
    WATCH = "watch"  # until SIGTERM/SIGINT
    UNTIL_COMPLETE = "until-complete"  # until every spec is settled (or the timeout)


@dataclass(frozen=True, slots=True)
class LoopOptions:
    repeat: Repeat = Repeat.ONCE
    interval: float = 30.0
    dry_run: bool = False
    plan_checksum: str | None = None  # gates the first pass only
    timeout: float | None = None  # with UNTIL_COMPLETE
    wait_lock: bool = False
    lock_timeout: float | None = None
    # metrics port, health threshold, notification delivery budget
    monitor: MonitorOptions = field(default_factory=MonitorOptions)
    allow_dirty: bool = False  # apply spec files that differ from HEAD (audited)
    # the merged changes' evidence and the commits whose evidence could not be fetched: the gate at reconcile
    evidence: EvidenceGiven = field(default_factory=EvidenceGiven)
    rest_finished: bool = False  # the only view is the pass's plan text: count finished specs at rest, not build them


@dataclass(frozen=True, slots=True)
class LoopEnd:
    last: PassResult
    timed_out: bool = False


def reconcile_loop(
    settings: Settings,
    options: LoopOptions,
    on_pass: Callable[[PassResult], None],
    stop: Shutdown | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> LoopEnd:
    stop = stop or Shutdown()
    if options.repeat is not Repeat.ONCE:
        stop.install()
    deadline = None if options.timeout is None else clock() + options.timeout
    checksum = options.plan_checksum
    with (
        _provided(settings) as provider,  # the watch process's own evidence (GitHub settings): checked first
        collector.Passes() as passes,
        PassHooks(settings, options.monitor, deliver=not options.dry_run) as hooks,
        open_reconciler(
            settings,
            lease=not options.dry_run,
            wait_lock=options.wait_lock,
            lock_timeout=options.lock_timeout,
            allow_dirty=options.allow_dirty,
        ) as reconciler,
    ):
        hooks.attach(reconciler)
        reconciler.evidence = options.evidence
        reconciler.rest_finished = options.rest_finished and options.monitor.port is None
        lost = 0  # attempts in a row that lost the store
        while True:
            try:
                if provider is not None:  # before each pass: the evidence of the merges since the last one
                    reconciler.evidence = provider.given(options.evidence)
                with hooks.around(reconciler) as after_pass:  # notifications, metrics, health, status page
                    result = reconciler.run_once(dry_run=options.dry_run, plan_checksum=checksum)
                    after_pass(result)
            except StoreUnavailable as exc:
                lost += 1
                _wait_for_store(exc, lost, options, stop, None if deadline is None else deadline - clock())
                continue
            lost = 0
            on_pass(result)
            checksum = None
            if _finished(result, options, stop):
                return LoopEnd(result)
            if deadline is not None and clock() + options.interval > deadline:
                return LoopEnd(result, timed_out=True)
            with passes.between():
                stop.wait(options.interval)
            if stop.requested:
                return LoopEnd(result)


def _wait_for_store(
    exc: StoreUnavailable, attempt: int, options: LoopOptions, stop: Shutdown, left: float | None
) -> None:
    """A pass that lost the store ended at the failed write; `--watch` and `--until-complete` try again after
    1 s, 2 s, 4 s… (at most the interval). Raises, with what the pass left, when there is no next attempt."""
    delay = min(RETRY_FIRST * 2 ** (attempt - 1), options.interval)
    if options.repeat is Repeat.ONCE or options.dry_run or stop.requested or (left is not None and delay > left):
        raise StoreUnavailable(exc.message, hint=STORE_LOST_HINT) from None
    log.warning("attempt #%d failed; will retry in %.1fs: %s", attempt, delay, exc.message)
    stop.wait(delay)
    if stop.requested:
        raise StoreUnavailable(exc.message, hint=STORE_LOST_HINT) from None


def _finished(result: PassResult, options: LoopOptions, stop: Shutdown) -> bool:
    if options.dry_run or stop.requested or options.repeat is Repeat.ONCE:
        return True
    return options.repeat is Repeat.UNTIL_COMPLETE and result.settled


def _provided(settings: Settings) -> contextlib.AbstractContextManager[EvidenceProvider | None]:
    """`forge.provided`; without any BACKFILLCTL_GITHUB_* variable it is None, and the GitHub client (its JWT
    signing, its HTTP) is never imported: a pass under cron reads no forge."""
    if not any(name.startswith("BACKFILLCTL_GITHUB_") and value.strip() for name, value in settings.environ.items()):
        return contextlib.nullcontext()
    from controller.commands.loop.forge import provided  # noqa: PLC0415

    return provided(settings)
