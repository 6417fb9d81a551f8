"""Benchmark: a create on a DAG with a long backfill history vs a fresh DAG (issue 49: history read once, kept).

    .venv/bin/python bench/history_create.py fake [--sizes 0,300,3000]
    .venv/bin/python bench/history_create.py real [--history 300] [--rounds 3]   # a running local Airflow
    .venv/bin/python bench/history_create.py running [--rounds 5]                # a running local Airflow

fake: in-process, the stateful fake Airflow: per history size, the Airflow calls and the controller's CPU of the
      pass that creates a spec on a DAG whose history the store keeps (its first create read it once), beside the
      same pass without the kept history (the previous behaviour: the DAG's whole history listed, 100 a page).
real: a real Airflow (BACKFILLCTL_AIRFLOW_URL/_USERNAME/_PASSWORD, via the counting proxy): `--history` finished
      backfills are made on one DAG (created and cancelled), then per round one `reconcile --once` that creates a
      spec on it, on a DAG without history, and the floor (one process: 1 auth + 1 POST), alternating. Each side's
      store read its DAG once before (a first create, not timed), as a long-running reconciler's has.
running: the same creates in one running reconciler (as `reconcile --watch` runs them: start-up, login and
      preflight paid once), beside a running client's POST alone; the calls each create pass made and Airflow's own
      time for them (each response's elapsed).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from _common import Run, airflow_env, alternate, calls_text, load_note, median, ratio, secs, table
from airflow_rows import SPEC, Airflow, Bench, Windows, iso

from controller.adapters.airflow import AirflowClient
from controller.commands.reconcile.reconciler import Reconciler
from controller.commands.runtime.settings import Settings
from controller.core.model.secret import Secret
from tests.commands.reconcile.harness import Bench as FakeBench
from tests.fakes.airflow import FakeAirflow

LISTING = ("GET", "/api/v2/backfills")
HISTORY_DAG, FRESH_DAG = "demo_finance_ledger", "demo_flaky"


# --- fake ----------------------------------------------------------------------------------------------------


def fake_row(sizes: list[int]) -> None:
    rows = []
    for size in sizes:
        for kept in (True, False):
            airflow = FakeAirflow()
            airflow.scheduler_running = False
            for _n in range(size):  # finished backfills of 2019, before any spec
                made = airflow._new_backfill(
                    airflow.dags["demo_daily"],
                    {"from_date": "2019-01-01T00:00:00Z", "to_date": "2019-01-01T00:00:00Z"},
                    [],
                )
                made["completed_at"] = made["created_at"]
            with tempfile.TemporaryDirectory() as tmp:
                bench = FakeBench(Path(tmp), fake=airflow)
                bench.spec(
                    "first", dag="demo_daily", start="2025-01-01", end="2025-01-07", run_on_latest_version="true"
                )
                bench.run()  # reads the DAG's history once, creates
                for run in airflow.runs.values():
                    run.update(state="success")
                airflow.mark_complete()
                bench.spec(
                    "second", dag="demo_daily", start="2025-03-01", end="2025-03-07", run_on_latest_version="true"
                )
                reconciler = bench.reconciler()
                if not kept:
                    reconciler.observer.history = None  # the previous behaviour: the whole history every create
                start = len(airflow.requests)
                cpu = time.process_time()
                result = reconciler.run_once()
                cpu = time.process_time() - cpu
                assert [o.value for _i, o in result.applied] == ["created"], result.plan
                calls = Counter(c for c in airflow.requests[start:] if c != ("POST", "/auth/token"))
                bench.close()
            rows.append([f"{size:,}", "kept" if kept else "whole (before)", sum(calls.values()), calls[LISTING],
                         f"{cpu * 1000:.0f} ms"])  # fmt: skip
    print(
        table(
            "a create on a DAG with N past backfills (fake Airflow, in-process)",
            ["past backfills", "history", "Airflow calls", "of them backfill listings", "pass CPU (incl. the fake)"],
            rows,
        )
    )


# --- real ----------------------------------------------------------------------------------------------------


def history_size(admin: Airflow, dag: str) -> int:
    """How many backfills the DAG has had (one uncounted call)."""
    answer = admin.http.get("/api/v2/backfills", params={"dag_id": dag, "limit": 1})
    return int(answer.json()["total_entries"])


class Real(Bench):
    def seed(self, count: int) -> int:
        """`count` finished one-day backfills on HISTORY_DAG (created, cancelled); its history's size after."""
        have = self.history_size(HISTORY_DAG)
        day = datetime(1950, 1, 1, tzinfo=UTC) + timedelta(days=have)
        for n in range(max(count - have, 0)):
            first = iso(day + timedelta(days=n))
            body = {"dag_id": HISTORY_DAG, "from_date": first, "to_date": first, "max_active_runs": 1}
            self.admin.create_and_cancel(body)
        return self.history_size(HISTORY_DAG)

    def history_size(self, dag: str) -> int:
        return history_size(self.admin, dag)

    def spec(self, folder: Path, name: str, dag: str) -> dict[str, object]:
        start, end = self.windows.take(dag)
        (folder / "specs" / f"{name}.yaml").write_text(SPEC.format(name=name, dag=dag, start=start, end=end))
        return {"dag_id": dag, "from_date": start, "to_date": end, "reprocess_behavior": "completed",
                "max_active_runs": 1}  # fmt: skip

    def kept_store(self, dag: str, index: int) -> Path:
        """A work folder whose store read the DAG's history once (a first create, then cancelled, and a pass that
        sees it end: its ending's reads are not the create's)."""
        folder = self.folder(f"history-{dag}")
        self.spec(folder, f"first-{index}", dag)
        self.backfillctl(folder, "reconcile", "--once")
        self.admin.cancel_active((dag,))
        self.backfillctl(folder, "reconcile", "--once")
        return folder

    def create_on(self, dag: str, index: int, calls: dict[str, Counter[tuple[str, str]]], key: str) -> Run:
        folder = self.kept_store(dag, index)
        self.spec(folder, f"second-{index}", dag)
        result, calls[key] = self.backfillctl_run(folder, "reconcile", "--once")
        self.admin.cancel_active((dag,))
        return result

    def floor_create(self, index: int, calls: dict[str, Counter[tuple[str, str]]]) -> float:
        folder = self.folder("history-floor")
        body = self.spec(folder, f"floor-{index}", FRESH_DAG)
        (folder / "bodies.json").write_text(json.dumps([body]))
        wall, _, calls["floor"] = self.floor("create", str(folder / "bodies.json"))
        self.admin.cancel_active((FRESH_DAG,))
        return wall


def real_row(args: argparse.Namespace) -> None:
    bench = Real(args)
    try:
        print(f"Airflow {bench.env.url} via counting proxy {bench.proxy.url}; {load_note()}", flush=True)
        bench.admin.cancel_active((HISTORY_DAG, FRESH_DAG))
        started = time.perf_counter()
        size = bench.seed(args.history)
        print(
            f"{HISTORY_DAG}: {size:,} past backfills ({time.perf_counter() - started:.0f} s to make the missing ones)"
        )
        fresh_size = bench.history_size(FRESH_DAG)
        calls: dict[str, Counter[tuple[str, str]]] = {}
        actions: dict[str, Callable[[int], float | Run]] = {
            "floor": lambda i: bench.floor_create(i, calls),
            "fresh": lambda i: bench.create_on(FRESH_DAG, i, calls, "fresh"),
            "history": lambda i: bench.create_on(HISTORY_DAG, i, calls, "history"),
        }
        times = alternate(args.rounds, actions)
        wall = {k: median([t.wall if isinstance(t, Run) else t for t in v]) for k, v in times.items()}
        rows = [
            ["floor (httpx, 1 auth + 1 POST)", "—", secs(wall["floor"]), sum(calls["floor"].values()), "1.00×", "—"],
            *[
                [
                    f"backfillctl reconcile --once, {what}",
                    f"{n:,}",
                    secs(wall[key]),
                    sum(calls[key].values()),
                    ratio(wall[key], wall["floor"]),
                    ratio(wall[key], wall["fresh"]),
                ]
                for key, what, n in (("fresh", FRESH_DAG, fresh_size), ("history", HISTORY_DAG, size))
            ],
        ]
        print(
            table(
                f"a create on a DAG with {size:,} past backfills vs a DAG without, medians of {args.rounds} rounds",
                ["work", "past backfills", "wall", "calls (login included)", "/ floor", "/ fresh DAG"],
                rows,
            )
        )
        for key in ("fresh", "history"):
            print(f"{key} calls: {calls_text(calls[key])}")
        print(f"done; {load_note()}")
    finally:
        bench.admin.cancel_active((HISTORY_DAG, FRESH_DAG))
        bench.close()


# --- running: a create in a running reconciler ------------------------------------------------------------


def running_row(args: argparse.Namespace) -> None:
    """The pass that creates a spec in a running reconciler (`reconcile --watch`: start-up, login and preflight paid
    once), on a DAG with history and on one without, beside the floor: a running client's POST alone (its token
    taken before). Each side's store read its DAG's history before; each created backfill is cancelled, and a pass
    that sees it end runs before the next create (not timed)."""
    env = airflow_env()
    admin = Airflow(env)
    windows = Windows(datetime(1940 + int(time.time() // 60) % 10, 1, 1, tzinfo=UTC))  # before `seed`'s 1950
    sent: list[httpx.Response] = []
    with tempfile.TemporaryDirectory() as tmp:
        bench = FakeBench(Path(tmp), url=env.url)
        settings = Settings(specs_dir=bench.specs, store_url=bench.store_url, airflow_url=env.url, actor="bench")
        client = AirflowClient(env.url, username=env.username, password=Secret(env.password or ""), max_concurrency=2)
        client.transport.http.event_hooks["response"].append(sent.append)
        try:
            client.preflight()
            reconciler = Reconciler(settings, bench.store, client, git=None)
            sizes = {dag: history_size(admin, dag) for dag in (FRESH_DAG, HISTORY_DAG)}

            def create(dag: str, name: str) -> tuple[float, int, float]:
                start, end = windows.take(dag)
                bench.spec(name, dag=dag, start=start, end=end, reprocess="completed", mar=1)
                sent.clear()
                started = time.perf_counter()
                result = reconciler.run_once()
                wall = time.perf_counter() - started
                assert [o.value for _i, o in result.applied] == ["created"], result.plan
                server = sum(r.elapsed.total_seconds() for r in sent)
                calls = len(sent)
                admin.cancel_active((dag,))
                reconciler.run_once()  # sees it end: not the create's reads
                return wall, calls, server

            def floor(i: int) -> float:
                start, end = windows.take(FRESH_DAG)
                body = {"dag_id": FRESH_DAG, "from_date": start, "to_date": end, "max_active_runs": 1,
                        "reprocess_behavior": "completed"}  # fmt: skip
                started = time.perf_counter()
                admin.http.post("/api/v2/backfills", json=body).raise_for_status()
                wall = time.perf_counter() - started
                admin.cancel_active((FRESH_DAG,))
                return wall

            for dag in (FRESH_DAG, HISTORY_DAG):  # the store reads each DAG's history once
                create(dag, f"first-{dag}")
            made: dict[str, list[tuple[float, int, float]]] = {FRESH_DAG: [], HISTORY_DAG: []}
            floors: list[float] = []
            for i in range(args.rounds):
                floors.append(floor(i))
                for dag, results in made.items():
                    results.append(create(dag, f"run-{i}-{dag}"))
        finally:
            admin.cancel_active((FRESH_DAG, HISTORY_DAG))
            client.close()
            bench.close()
    base = median(floors)
    rows = [["floor: a running client's POST (token held)", "—", secs(base), 1, "—", "1.00×"]]
    for dag, results in made.items():
        wall, server = median([r[0] for r in results]), median([r[2] for r in results])
        calls = median([r[1] for r in results])
        rows.append([f"the pass that creates, {dag}", f"{sizes[dag]:,}", secs(wall), f"{calls:.0f}", secs(server),
                     ratio(wall, base)])  # fmt: skip
    print(
        table(
            f"a create in a running reconciler, medians of {args.rounds} rounds",
            ["work", "past backfills", "wall", "calls", "Airflow's time for them", "/ floor"],
            rows,
        )
    )
    print(f"done; {load_note()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rows", nargs="*", default=["fake"])
    parser.add_argument("--sizes", type=lambda s: [int(x) for x in s.split(",")], default=[0, 300, 3000])
    parser.add_argument("--history", type=int, default=300)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument("--before", type=Path, default=None)
    args = parser.parse_args()
    if "fake" in args.rows:
        fake_row(args.sizes)
    if "real" in args.rows:
        airflow_env()  # exits with how to start one when none is given
        real_row(args)
    if "running" in args.rows:
        running_row(args)


if __name__ == "__main__":
    main()
