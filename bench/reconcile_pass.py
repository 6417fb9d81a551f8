"""Benchmark: API calls and the controller's own CPU time per steady-state reconcile pass.

50 specs over 10 DAGs (one active backfill per DAG, 40 queued), against the in-process fake Airflow
(whose own handler time is measured and subtracted), SQLite store in a temp folder.
Then the cost of a spec's own runs (issue 24), 10 DAGs each with one finished backfill and one running over an
overlapping range (its dates are part of its range): calls per pass while they run, in the pass they finish (their
runs are read once) and after. The same script runs on an older checkout (copy it into its bench/).
Run: .venv/bin/python bench/reconcile_pass.py [--passes 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.commands.reconcile.harness import Bench
from tests.fakes.airflow import Dag, FakeAirflow


class TimedFake(FakeAirflow):
    cpu = 0.0

    def handle(self, request: httpx.Request) -> httpx.Response:
        started = time.process_time()
        try:
            return super().handle(request)
        finally:
            self.cpu += time.process_time() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--passes", type=int, default=20)
    args = parser.parse_args()
    fake = TimedFake(dags=[Dag(f"dag_{d}") for d in range(10)])
    fake.scheduler_running = False
    with tempfile.TemporaryDirectory() as tmp:
        bench = Bench(Path(tmp), fake=fake)
        for n in range(50):
            month = n // 10 + 1
            bench.spec(
                f"s{n:02d}", dag=f"dag_{n % 10}", start=f"2024-{month:02d}-01", end=f"2024-{month:02d}-25", mar=1
            )
        bench.run()  # creates the 10 queue heads
        reconciler = bench.reconciler()
        cpu, calls = [], []
        for _ in range(args.passes):
            before_requests, fake.cpu = len(fake.requests), 0.0
            started = time.process_time()
            result = reconciler.run_once()
            cpu.append(time.process_time() - started - fake.cpu)
            calls.append(Counter(m for m, _ in fake.requests[before_requests:]))
            assert not result.applied
        bench.close()
    per_pass = calls[-1]
    print(f"50 specs over 10 DAGs, steady state, {args.passes} passes:")
    print(
        f"  Airflow calls per pass: {sum(per_pass.values())} ({dict(per_pass)}; per DAG with work its backfills and "
        "one DAG-runs query per active backfill, plus one DAG listing for every DAG's details; 0 for finished specs)"
    )
    print(f"  controller CPU per pass: median {statistics.median(cpu) * 1000:.0f} ms, max {max(cpu) * 1000:.0f} ms")
    overlapping(args.passes, "daily")
    overlapping(args.passes, "hourly")
    notes(args.passes)


def drain(fake: FakeAirflow) -> None:
    """Airflow runs every run to its end and marks the backfills complete."""
    for backfill_id in list(fake.backfills):
        while fake.start_runs(backfill_id) or fake.finish_run(backfill_id, "success"):
            pass
    fake.mark_complete()


def overlapping(passes: int, schedule: str) -> None:
    """Per DAG: `a` (days 1-20) finished, then `b` (none, days 11-25) runs days 21-25 only (hourly: 120 runs,
    more than a page)."""
    fake = TimedFake(dags=[Dag(f"dag_{d}", schedule=schedule) for d in range(10)])
    fake.scheduler_running = False
    with tempfile.TemporaryDirectory() as tmp:
        bench = Bench(Path(tmp), fake=fake)
        for d in range(10):
            bench.spec(f"a{d}", dag=f"dag_{d}", start="2024-01-01", end="2024-01-20", mar=20)
            bench.spec(f"b{d}", dag=f"dag_{d}", start="2024-01-11", end="2024-01-25", mar=5)
        bench.run()  # creates the a's
        drain(fake)
        bench.run()  # the a's finish, the b's are created
        reconciler = bench.reconciler()

        def one_pass() -> int:
            start = len(fake.requests)
            reconciler.run_once()
            return sum(1 for m, _ in fake.requests[start:] if m == "GET")

        running = [one_pass() for _ in range(passes)]
        drain(fake)
        finishing, after = one_pass(), one_pass()
        bench.close()
    print(f"10 {schedule} DAGs, each: a finished backfill and a running one over an overlapping range (5 of 15 days):")
    print(
        f"  GET calls per pass while running: {statistics.median(running):.0f}; in the pass they finish: "
        f"{finishing}; after: {after}"
    )


def notes(passes: int) -> None:
    """Run notes (the policy's `airflow_notes`): 10 DAGs, one running backfill of 25 runs each, with notes on and
    off: Airflow calls of each pass (notes: one listing a spec and at most 100 PATCHes a pass, then nothing)."""
    for on in (False, True):
        fake = TimedFake(dags=[Dag(f"dag_{d}") for d in range(10)])
        fake.scheduler_running = False
        with tempfile.TemporaryDirectory() as tmp:
            bench = Bench(Path(tmp), fake=fake)
            if on:
                bench.policy('version: 1\nairflow_notes: {dags: ["dag_*"]}\n')
            for d in range(10):
                bench.spec(f"n{d}", dag=f"dag_{d}", start="2024-01-01", end="2024-01-25", mar=1)
            reconciler = bench.reconciler()
            counts = []
            for _ in range(max(passes, 5)):
                start = len(fake.requests)
                reconciler.run_once()
                counts.append(Counter(m for m, _ in fake.requests[start:]))
            bench.close()
        shown = ", ".join(f"{sum(c.values())} ({c['PATCH']} PATCH)" for c in counts[:5])
        print(
            f"10 DAGs, a running backfill of 25 runs each, run notes {'on' if on else 'off'}: "
            f"calls of passes 1-5: {shown}"
        )


if __name__ == "__main__":
    main()
