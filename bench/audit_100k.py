"""Benchmark: `audit verify` over N events, and `audit export` peak memory at N/10 and N events.

Run: .venv/bin/python bench/audit_100k.py [--events 100000] [--url sqlite:///…]
The store is filled directly (bulk insert of properly chained records), then the CLI is timed as a
whole process; peak RSS comes from wait4's rusage of each child.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sqlalchemy import insert

from controller.adapters.store import Store, _row, stamp
from controller.adapters.store.tables import audit_events
from controller.core.audit import GENESIS, AuditEntry, seal


def fill(url: str, count: int) -> None:
    store = Store(url)
    prev, rows, now = GENESIS, [], stamp(__import__("datetime").datetime.now(__import__("datetime").UTC))
    for seq in range(1, count + 1):
        entry = AuditEntry(
            action="observe",
            phase="observation",
            actor="bench",
            controller_version="0.1.0",
            spec_name=f"spec-{seq % 50}",
            dag_id=f"dag_{seq % 10}",
            backfill_id=seq % 500,
            request={"method": "GET", "path": f"/api/v2/backfills/{seq % 500}"},
            response={"status": 200},
            message="phase Running: 3 of 7 runs done",
        )
        record = seal(seq, now, entry, prev)
        rows.append(_row(record))
        prev = record.hash
        if len(rows) == 5000:
            with store.engine.begin() as conn:
                conn.execute(insert(audit_events), rows)
            rows = []
    if rows:
        with store.engine.begin() as conn:
            conn.execute(insert(audit_events), rows)
    store.close()


def best(args: list[str], url: str, repeat: int = 3) -> tuple[float, float]:
    runs = [run(args, url) for _ in range(repeat)]
    return min(r[0] for r in runs), max(r[1] for r in runs)


def run(args: list[str], url: str) -> tuple[float, float, int]:
    env = {**os.environ, "BACKFILLCTL_STORE_URL": url}
    started = time.perf_counter()
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "backfillctl"), *args], env=env, stdout=subprocess.DEVNULL
    )
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - started
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"backfillctl {' '.join(args)} failed")
    return elapsed, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--url")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for count in (args.events // 10, args.events):
            url = args.url or f"sqlite:///{tmp}/state-{count}.db"
            started = time.perf_counter()
            fill(url, count)
            filled = time.perf_counter() - started
            verify_s, verify_mb = best(["audit", "verify"], url)
            export_s, export_mb = best(["audit", "export", "--format", "jsonl"], url)
            print(
                f"{count:>7} events (filled in {filled:.1f}s): verify {verify_s:.2f}s peak {verify_mb:.0f} MB; "
                f"export {export_s:.2f}s peak {export_mb:.0f} MB"
            )


if __name__ == "__main__":
    main()
