"""What a `--watch` pass costs over 50 live specs on 20 DAGs of a real Airflow 3.3.2, beside its floor.

One reconciler runs pass after pass, as `reconcile --watch` does (the process and its imports are paid once), over
50 specs committed in a git repository: 2 or 3 a DAG, each DAG's first one active, the others queued behind it
(5 of the 20 DAGs refuse a backfill: no time schedule, or depends_on_past; their specs stay Blocked, observed).
The first pass creates the backfills (not timed); the passes after it are timed, and each one's requests counted
by the client (straight to Airflow: a counting proxy's own hop would cost more than the pass). The floor is the
last pass's GET requests replayed by one httpx client, 2 at once as the pass may send them (the server's own time
for the reads the pass needed).

Needs a running local Airflow (it starts nothing itself) and BACKFILLCTL_AIRFLOW_URL/_USERNAME/_PASSWORD:
    scripts/airflow-local up --dir /tmp/bench-airflow
    eval "$(scripts/airflow-local env --dir /tmp/bench-airflow)"
    .venv/bin/python bench/watch_pass.py [--passes 10]
The backfills it created are cancelled at the end.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import airflow_env, load_note, median, ratio, secs, table

from controller.adapters.airflow import AirflowClient
from controller.commands.reconcile.reconciler import Reconciler
from controller.commands.runtime.settings import Settings
from controller.core.model.secret import Secret
from tests.commands.reconcile.harness import Bench

DAGS = (  # the example DAGs a daily or hourly backfill runs on (not manual, partitioned or asset-scheduled)
    "demo_daily",
    "demo_hourly",
    "demo_chunked",
    "demo_depends_on_past",
    "demo_evolving",
    "demo_finance_ledger",
    "demo_finance_rollup",
    "demo_flaky",
    "demo_guard_a",
    "demo_guard_b",
    "demo_guard_c",
    "demo_halting",
    "demo_orders_export",
    "demo_orders_publish",
    "demo_orders_report",
    "demo_orders_verify",
    "demo_params",
    "demo_pinned_code",
    "demo_slow",
    "demo_tz",
)
SPECS = 50


def specs(bench: Bench) -> None:
    """50 specs over the 20 DAGs, 3-day ranges far in the past (2 or 3 a DAG, queued in name order), in a year of
    their own each run (a range an earlier run's backfill covers would be adopted, not created)."""
    minute = int(time.time() // 60)
    year, month = 1970 + minute % 40, 1 + minute // 40 % 12
    for n in range(SPECS):
        dag = DAGS[n % len(DAGS)]
        day = 1 + 4 * (n // len(DAGS))
        bench.spec(
            f"live-{n:02d}",
            dag=dag,
            start=f"{year}-{month:02d}-{day:02d}",
            end=f"{year}-{month:02d}-{day + 2:02d}",
            mar=1,
        )
    bench.commit("50 live specs")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--passes", type=int, default=10)
    args = parser.parse_args()
    env = airflow_env()
    print(load_note(), flush=True)
    sent: list[httpx.Request] = []
    with tempfile.TemporaryDirectory() as tmp:
        bench = Bench(Path(tmp), url=env.url, git=True)
        settings = Settings(specs_dir=bench.specs, store_url=bench.store_url, airflow_url=env.url, actor="bench")
        client = AirflowClient(env.url, username=env.username, password=Secret(env.password or ""), max_concurrency=2)
        client.transport.http.event_hooks["request"].append(sent.append)
        try:
            specs(bench)
            client.preflight()
            reconciler = Reconciler(settings, bench.store, client, git=None)
            created = sum(1 for _item, outcome in reconciler.run_once().applied if outcome == "created")
            walls, calls = [], []
            for _ in range(args.passes):
                sent.clear()
                started = time.perf_counter()
                reconciler.run_once()
                walls.append(time.perf_counter() - started)
                calls.append(len(sent))
            gets = [r.url.raw_path.decode() for r in sent if r.method == "GET"]
            floor = median([replay(env.url, env.username, env.password, gets) for _ in range(3)])
        finally:
            cancelled = cancel(client, DAGS)
            client.close()
            bench.close()
    wall, per_pass = median(walls), median(calls)
    rows = [
        [
            "backfillctl, one `--watch` pass",
            secs(wall),
            f"{per_pass:.0f}",
            f"{per_pass / SPECS:.2f}",
            ratio(wall, floor),
        ],
        ["floor: the last pass's GETs, 2 at once", secs(floor), f"{len(gets)}", f"{len(gets) / SPECS:.2f}", "1×"],
    ]
    print(load_note())
    title = f"a --watch pass over {SPECS} live specs on {len(DAGS)} DAGs ({created} created by the first pass)"
    print(table(title, ["", "wall (median)", "calls a pass", "calls a live spec", "vs floor"], rows))
    print(f"worst pass {secs(max(walls))} of {args.passes}; cancelled afterwards: {cancelled} backfill(s)")


def replay(url: str, username: str | None, password: str | None, paths: list[str]) -> float:
    """The GETs, 2 at once as the pass may send them, with a token taken before the clock starts."""
    with httpx.Client(base_url=url, timeout=60) as http:
        token = http.post("/auth/token", json={"username": username, "password": password}).json()["access_token"]
        headers = {"Authorization": f"Bearer {token}"}
        started = time.perf_counter()
        with ThreadPoolExecutor(2) as pool:
            for answer in pool.map(lambda path: http.get(path, headers=headers), paths):
                answer.raise_for_status()
        return time.perf_counter() - started


def cancel(client: AirflowClient, dags: tuple[str, ...]) -> int:
    done = Counter[str]()
    for dag in dags:
        for backfill in client.list_backfills(dag):
            if backfill.active:
                client.cancel(backfill.id)
                done[dag] += 1
    return sum(done.values())


if __name__ == "__main__":
    main()
