"""Benchmark: `audit verify` of 10,000 / 100,000 events, unkeyed and keyed, vs `sqlite3` + a python one-liner.

Run: .venv/bin/python bench/audit_100k.py [--events 100000] [--rounds 3]
The stores are filled directly (bulk insert of properly chained records; the keyed one with
BACKFILLCTL_AUDIT_KEY's MAC on each) by a child process, so that the children timed later do not inherit
the filler's memory in their peak RSS; then every command runs as a whole process, in turn (A B C …). The
alternative is what a user would write without backfillctl: `sqlite3 -json` piped into python recomputing
sha256(prev_hash + canonical JSON) per record (and, keyed, the HMAC). `audit export` is timed too. The table
shows medians of wall time and CPU (user+sys), and peak RSS. No Airflow needed. (No `--before`: a store at
schema 0006 is refused by an older backfillctl.)
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Run, alternate, backfillctl, load_note, median, ratio, run, secs, table

KEY = "bench-audit-key-" * 4  # 64 bytes
RECOMPUTE = """
import hashlib, hmac, json, sys
key = sys.argv[1].encode() if len(sys.argv) > 1 else None
rows, prev = json.load(sys.stdin), "0" * 64
for r in rows:
    h, p, mac = r.pop("hash"), r.pop("prev_hash"), r.pop("mac")
    r["request"], r["response"] = (None if r[k] is None else json.loads(r[k]) for k in ("request", "response"))
    body = json.dumps(r, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert p == prev and hashlib.sha256((prev + body).encode()).hexdigest() == h, r["seq"]
    assert key is None or hmac.new(key, h.encode(), hashlib.sha256).hexdigest() == mac, r["seq"]
    prev = h
print(len(rows), prev)
"""


def fill(url: str, count: int, key: bytes | None) -> None:
    """In the `--fill` child only: the timing parent stays small (a forked child starts with its pages)."""
    from sqlalchemy import insert  # noqa: PLC0415

    from controller.adapters.store import Store  # noqa: PLC0415
    from controller.adapters.store.audit_log import _row  # noqa: PLC0415
    from controller.adapters.store.database import stamp  # noqa: PLC0415
    from controller.adapters.store.tables import audit_events  # noqa: PLC0415
    from controller.core.audit.chain import GENESIS, AuditEntry, seal  # noqa: PLC0415

    store = Store(url)
    prev, rows, now = GENESIS, [], stamp(datetime.now(UTC))
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
        record = seal(seq, now, entry, prev, key)
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


def commands(db: Path, keyed: bool) -> dict[str, tuple[list[str], dict[str, str]]]:
    env = {**os.environ, "BACKFILLCTL_STORE_URL": f"sqlite:///{db}"}
    env.pop("BACKFILLCTL_AUDIT_KEY", None)
    if keyed:
        env["BACKFILLCTL_AUDIT_KEY"] = KEY
    query = "SELECT * FROM audit_events ORDER BY seq"
    script = f"sqlite3 -json {shlex.quote(str(db))} {shlex.quote(query)} | {shlex.quote(sys.executable)} -c "
    script += shlex.quote(RECOMPUTE) + (f" {shlex.quote(KEY)}" if keyed else "")
    found = {
        "sqlite3 -json → python (sha256" + (" + HMAC)" if keyed else ")"): (["bash", "-c", script], env),
        "backfillctl audit verify": ([backfillctl(), "audit", "verify"], env),
    }
    found["backfillctl audit export"] = ([backfillctl(), "audit", "export"], env)
    return found


def quiet(command: list[str], env: dict[str, str]) -> Run:
    """Run with stdout to /dev/null (`exec`: the same process): 60 MB of export read into this process
    would count in every later child's peak RSS (a forked child starts with this process's pages)."""
    return run(["sh", "-c", 'exec "$0" "$@" > /dev/null', *command], env=env)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fill", nargs=3, metavar=("DB", "COUNT", "KEYED"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.fill:
        db, count, keyed = args.fill
        fill(f"sqlite:///{db}", int(count), KEY.encode() if keyed == "keyed" else None)
        return
    rows: list[list[object]] = []
    load_before = load_note()
    with tempfile.TemporaryDirectory() as tmp:
        for count in (args.events // 10, args.events):
            for keyed in (False, True):
                db = Path(tmp) / f"state-{count}-{'keyed' if keyed else 'plain'}.db"
                run([sys.executable, __file__, "--fill", str(db), str(count), "keyed" if keyed else "plain"])
                todo = commands(db, keyed)
                runs = alternate(
                    args.rounds, {name: (lambda _i, c=c, e=e: quiet(c, e)) for name, (c, e) in todo.items()}
                )
                floor = median([r.wall for r in next(iter(runs.values()))])  # type: ignore[union-attr]
                for name, results in runs.items():
                    walls = [r.wall for r in results]  # type: ignore[union-attr]
                    cpus = [r.cpu for r in results]  # type: ignore[union-attr]
                    rss = max(r.rss_kb for r in results) / 1024  # type: ignore[union-attr]
                    rows.append(
                        [
                            f"{count:,}",
                            "keyed" if keyed else "unkeyed",
                            name,
                            secs(median(walls)),
                            secs(median(cpus)),
                            ratio(median(walls), floor),
                            f"{rss:.0f} MB",
                        ]
                    )
    print(
        table(
            f"audit verify, medians of {args.rounds} alternating rounds (ratio: wall vs the sqlite3 + python row)",
            ["events", "chain", "command", "wall", "CPU user+sys", "vs alternative", "peak RSS"],
            rows,
        )
    )
    print(f"before: {load_before}; after: {load_note()}")


if __name__ == "__main__":
    main()
