"""The reconcile loop below the CLI: once, `--watch` or `--until-complete`, with a stop signal and a deadline.

The CLI parses options and renders each pass through `on_pass`; this module owns the sequence: open the
session (store, lease, Airflow), run passes, wait, stop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import StrEnum

from controller.commands import collector
from controller.commands.passhooks import MonitorOptions, PassHooks
from controller.commands.reconcile import PassResult
from controller.commands.session import Shutdown, open_reconciler
from controller.commands.settings import Settings
from controller.core.plan.provenance import Evidence


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
    evidence: Evidence | None = None  # the merged pull request's reviews: the approval gate at reconcile


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
        while True:
            with hooks.around(reconciler) as after_pass:  # notifications, metrics, health, status page
                result = reconciler.run_once(dry_run=options.dry_run, plan_checksum=checksum)
                after_pass(result)
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


def _finished(result: PassResult, options: LoopOptions, stop: Shutdown) -> bool:
    if options.dry_run or stop.requested or options.repeat is Repeat.ONCE:
        return True
    return options.repeat is Repeat.UNTIL_COMPLETE and result.settled
