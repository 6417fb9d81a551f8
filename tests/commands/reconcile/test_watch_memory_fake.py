"""`reconcile --watch` memory: a long watch holds no more after 2,000 passes than after its first 200.

The loop below the CLI (`reconcile_loop`: its session, hooks and one Airflow client for the life of the
process) runs passes over a running backfill on the fake Airflow, each reading it from Airflow. The client
once kept a list of every request it sent, for tests to count: 6 entries a pass, about 1.1 MiB of RSS per
1,800 passes, for as long as the process lived. Calls are counted through the observer hook now.
"""

from __future__ import annotations

import gc
import logging
from collections import deque
from pathlib import Path

import pytest

from controller.commands.loop.run import LoopOptions, Repeat, reconcile_loop
from controller.commands.reconcile.reconciler import PassResult, Reconciler
from controller.commands.runtime.session import Shutdown
from tests.commands.reconcile.harness import Bench, fake, in_process

PASSES, WARM_UP = 2000, 200
# RSS after warm-up moves by a few hundred KiB whatever the code (allocator arenas, SQLite's page cache): measured
# +0.5 MiB over 1,800 passes without the list of requests, +1.6 MiB with it
BOUND_KIB = 1024


class _Passes(Shutdown):
    """Stopped by the test after `PASSES` passes; installs no signal handlers (pytest's own stay)."""

    def install(self) -> None:
        pass


def _rss_kib() -> int:
    status = Path("/proc/self/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1])


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads RSS from /proc (Linux)")
def test_a_long_watch_keeps_its_memory_flat(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="controller")  # pytest keeps every record it captures: 2,000 INFO lines
    fake(bench).scheduler_running = False  # the backfill stays running: every pass reads it from Airflow
    fake(bench).requests = deque(maxlen=100)  # type: ignore[assignment] # the fake's own log: the test's, not ours
    bench.spec("held", end="2025-01-31")
    in_process(bench, monkeypatch)
    stop, rss, passes = _Passes(), dict[int, int](), [0]

    def on_pass(result: PassResult) -> None:
        assert not result.errors, result.errors
        passes[0] += 1
        if passes[0] in (WARM_UP, PASSES):
            gc.collect()
            rss[passes[0]] = _rss_kib()
        stop.requested = passes[0] == PASSES

    end = reconcile_loop(bench.settings(), LoopOptions(Repeat.WATCH, interval=0.0), on_pass, stop)
    print(f"RSS {rss[WARM_UP]} KiB after {WARM_UP} passes, {rss[PASSES]} KiB after {PASSES}")
    assert [i.phase.value for i in end.last.current.items] == ["Running"]
    assert rss[PASSES] - rss[WARM_UP] < BOUND_KIB


def test_a_pass_runs_without_the_cyclic_collector_which_runs_again_after_it(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass holds O(history) long-lived objects that each collection would traverse again: the collector waits
    for the pass to end (also one that fails), and is left as it was found."""
    bench.spec("held", end="2025-01-02")
    in_process(bench, monkeypatch)
    seen: list[tuple[str, bool]] = []

    def on_pass(result: PassResult) -> None:
        seen.append(("rendering", gc.isenabled()))

    end = reconcile_loop(bench.settings(), LoopOptions(Repeat.ONCE), on_pass, _Passes())
    assert [i.kind.value for i in end.last.plan.items] == ["create"]
    assert (seen, gc.isenabled()) == ([("rendering", False)], True)

    def failing(self: Reconciler, **_kw: object) -> PassResult:
        seen.append(("pass", gc.isenabled()))
        raise RuntimeError("a pass that fails")

    monkeypatch.setattr(Reconciler, "run_once", failing)
    with pytest.raises(RuntimeError, match="a pass that fails"):
        reconcile_loop(bench.settings(), LoopOptions(Repeat.ONCE), on_pass, _Passes())
    assert (seen[-1], gc.isenabled()) == (("pass", False), True)
    gc.disable()  # a caller that had it off finds it off
    try:
        with pytest.raises(RuntimeError, match="a pass that fails"):
            reconcile_loop(bench.settings(), LoopOptions(Repeat.ONCE), on_pass, _Passes())
        assert not gc.isenabled()
    finally:
        gc.enable()
