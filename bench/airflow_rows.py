"""Benchmark against a real local Airflow 3.3.2: floor vs alternative vs backfillctl, side by side (issue 12).

Needs a running local Airflow (it starts nothing itself) and BACKFILLCTL_AIRFLOW_URL/_USERNAME/_PASSWORD:
    scripts/airflow-local up --dir /tmp/bench-airflow --fresh
    eval "$(scripts/airflow-local env --dir /tmp/bench-airflow)"
    .venv/bin/python bench/airflow_rows.py --airflow-dir /tmp/bench-airflow [ROWS…] [--rounds 3]

Rows (default: create plan pass lost):
  create  create N backfills on N DAGs (7 runs each). floor: one process doing 1 auth + N POSTs (httpx);
          alternative: `airflow backfill create` × N with Airflow's own CLI; backfillctl: `reconcile --once`.
  plan    `backfillctl plan` for 10 and 40 new specs; floor: 1 auth + N dry runs.
  pass    one `reconcile --once` over --finished finished specs (default 1,000; seeded in the store, no Airflow
          backfills needed; committed 10 a commit in a git repository) + 5 live ones (created for real), beside
          the same pass over the 5 live ones alone: wall, peak RSS, what the finished specs add; also `validate`,
          and the floor of the 5 live specs' reads (1 auth, each DAG's newest backfill, every page of its runs).
          `--hold-scheduler`: Airflow's scheduler is stopped while the rounds are timed (the pass's own cost,
          not the running tasks' load on a 2-core machine).
  lost    first `reconcile --once` after a lost store, over --lost finished specs (real, finished backfills
          created + cancelled by the bench; default 25,100; `--lost 1000,10000` measures the issue's sizes:
          ~8 minutes to create the 10,000 backfills here), beside --before.
  year    (slow) `plan` for one year of demo_hourly (8,760 runs); floor: 1 auth + 1 dry run.
  large   (slow: Airflow takes ~105 s to create 8,760 runs) a pass while a 1-year hourly backfill runs;
          floor: 1 auth + 1 backfill GET + 4 counting dagRuns GETs.
  chunked (slow: ~3 min) one year of demo_chunked (8,760 hourly runs) as one unchunked create vs
          `execution: {chunk_runs: 720}`: `plan` and the first `reconcile --once` (wall, peak RSS of the
          process), each create call as Airflow took it (timed at the proxy, so past the client's timeout),
          and the peak of queued runs in Airflow (sampled every second until the create's runs all exist).
          The chunked side stops after its first chunk; everything it made is cancelled.
Every backfillctl and floor call goes through a counting loopback proxy in front of Airflow (so both pay the
same hop; `--latency MS` adds a remote server's round trip to each); the Airflow CLI talks to the metadata DB
directly. Backfills the bench creates are cancelled.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    AIRFLOW_VENV,
    BIN,
    REPO,
    AirflowEnv,
    CountingProxy,
    Run,
    airflow_cli_env,
    airflow_env,
    alternate,
    backfillctl,
    calls_text,
    commit_history,
    finished_binding,
    for_before,
    load_note,
    median,
    ratio,
    run,
    secs,
    table,
)

DAGS = (
    "demo_daily",
    "demo_hourly",
    "demo_depends_on_past",
    "demo_finance_ledger",
    "demo_flaky",
    "demo_params",
    "demo_slow",
    "demo_tz",
)
UTC_DAGS = DAGS[:-1]  # demo_tz ticks at midnight New York: a one-day UTC window may hold no run
SPEC = """version: 1
name: {name}
dag_id: {dag}
from_date: "{start}"
to_date: "{end}"
reprocess_behavior: completed
max_active_runs: 1
ticket: CHG-1234
reason: benchmark backfill {name}
requested_by: bench-requester
approvers: [bench-approver]
"""
FLOOR = str(Path(__file__).resolve().parent / "_floor.py")


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class Windows:
    """Fresh 7-run date windows, so no contender finds runs another one made (reprocess `completed` anyway)."""

    def __init__(self, start: datetime) -> None:
        self.next = start

    def take(self, dag: str, runs: int = 7) -> tuple[str, str]:
        start = self.next
        self.next += timedelta(days=runs + 1)
        step = timedelta(hours=1) if dag == "demo_hourly" else timedelta(days=1)
        return iso(start), iso(start + step * (runs - 1))


class Airflow:
    """Uncounted admin calls (set-up and clean-up), straight to Airflow."""

    def __init__(self, env: AirflowEnv) -> None:
        self.http = httpx.Client(base_url=env.url, timeout=600)
        token = (
            env.token
            or self.http.post("/auth/token", json={"username": env.username, "password": env.password}).json()[
                "access_token"
            ]
        )
        self.http.headers["Authorization"] = f"Bearer {token}"

    def cancel_active(self, dags: tuple[str, ...] = DAGS) -> int:
        cancelled = 0
        for dag in dags:
            answer = self.http.get("/api/v2/backfills", params={"dag_id": dag, "limit": 100, "order_by": "-id"})
            for backfill in answer.json()["backfills"]:
                if backfill["completed_at"] is None:
                    self.http.put(f"/api/v2/backfills/{backfill['id']}/cancel")
                    cancelled += 1
        return cancelled

    def latest_end(self, dags: tuple[str, ...] = DAGS) -> datetime | None:
        """The latest `to_date` of any backfill on `dags`: a window after it holds no run an earlier bench made."""
        ends = []
        for dag in dags:
            offset, total = 0, 1
            while offset < total:
                params = {"dag_id": dag, "limit": 100, "offset": offset}
                answer = self.http.get("/api/v2/backfills", params=params).json()
                ends += [datetime.fromisoformat(b["to_date"].replace("Z", "+00:00")) for b in answer["backfills"]]
                offset, total = offset + 100, answer["total_entries"]
        return max(ends, default=None)

    def wait_for_runs(self, dag: str, start: str, end: str, runs: int, timeout: float = 400) -> None:
        """Until the range holds `runs` runs: Airflow inserts a large backfill's runs for minutes."""
        deadline = time.monotonic() + timeout
        params = {"logical_date_gte": start, "logical_date_lte": end, "limit": 1}
        while self.http.get(f"/api/v2/dags/{dag}/dagRuns", params=params).json()["total_entries"] < runs:
            if time.monotonic() > deadline:
                sys.exit(f"{dag}: fewer than {runs} runs in {start} … {end} after {timeout:.0f} s")
            time.sleep(5)

    def backfills(self, dag: str, start: str, end: str) -> list[tuple[int, int]]:
        """(id, runs in its range) of the DAG's backfills inside [start, end], oldest first."""
        answer = self.http.get("/api/v2/backfills", params={"dag_id": dag, "limit": 100, "order_by": "-id"})
        found = []
        for backfill in answer.json()["backfills"]:
            first, last = backfill["from_date"], backfill["to_date"]
            if start <= first.replace("+00:00", "Z") and last.replace("+00:00", "Z") <= end:
                params = {"logical_date_gte": first, "logical_date_lte": last, "limit": 1}
                counted = self.http.get(f"/api/v2/dags/{dag}/dagRuns", params=params).json()["total_entries"]
                found.append((int(backfill["id"]), int(counted)))
        return sorted(found)

    def create_and_cancel(self, body: dict[str, object]) -> None:
        answer = self.http.post("/api/v2/backfills", json=body)
        answer.raise_for_status()
        self.http.put(f"/api/v2/backfills/{answer.json()['id']}/cancel").raise_for_status()


class QueuedSampler:
    """Queued backfill runs of a DAG's range, sampled every second in a thread (its own client); keeps the peak."""

    def __init__(self, env: AirflowEnv, dag: str, start: str, end: str) -> None:
        self.airflow, self.dag = Airflow(env), dag
        self.params = {"run_type": "backfill", "state": "queued", "logical_date_gte": start, "logical_date_lte": end}
        self.peak_queued = self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def start(self) -> QueuedSampler:
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            with contextlib.suppress(httpx.HTTPError):
                answer = self.airflow.http.get(f"/api/v2/dags/{self.dag}/dagRuns", params={**self.params, "limit": 1})
                self.peak_queued = max(self.peak_queued, int(answer.json()["total_entries"]))
                self.samples += 1
            self._stop.wait(1.0)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=60)
        self.airflow.http.close()


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args, self.env = args, airflow_env()
        self.admin = Airflow(self.env)
        self.proxy = CountingProxy(self.env.url, latency=args.latency / 1000).__enter__()
        self.tmp = Path(tempfile.mkdtemp(prefix="bench-airflow-rows-"))
        # after every backfill an earlier run made on this Airflow (a window it filled makes no run, and a spec
        # adopts a backfill of its range); the rows take up to ~3,000 days, and Airflow refuses future dates
        latest = self.admin.latest_end()
        start = max(datetime(1970, 1, 1, tzinfo=UTC), (latest or datetime.min.replace(tzinfo=UTC)) + timedelta(days=2))
        if start + timedelta(days=3_000) > datetime.now(UTC):
            sys.exit(f"this Airflow's backfills reach {latest:%Y-%m-%d}: start a fresh one (airflow-local up --fresh)")
        self.windows = Windows(start.replace(hour=0, minute=0, second=0, microsecond=0))
        self.seeded = Windows(datetime(1900, 1, 1, tzinfo=UTC))  # finished specs seeded in the store, never sent
        self.out: list[str] = []
        self.floor_calls, self.served = 0, 0.0

    def proc_env(self, **extra: str) -> dict[str, str]:
        env = {**os.environ, "BACKFILLCTL_AIRFLOW_URL": self.proxy.url, "BACKFILLCTL_ACTOR": "bench"}
        return {**env, **extra}

    def folder(self, name: str) -> Path:
        """A work folder with a migrated store, as a reconciler has after its first run (the `lost` row
        deletes it: creating the store is part of that row)."""
        path = self.tmp / f"{name}-{time.monotonic_ns()}"
        (path / "specs").mkdir(parents=True)
        if not (self.tmp / "template.db").exists():
            url = f"sqlite:///{self.tmp}/template.db"
            run([backfillctl(), "store", "migrate"], env={**os.environ, "BACKFILLCTL_STORE_URL": url})
        shutil.copy(self.tmp / "template.db", path / "state.db")
        return path

    def write_specs(self, folder: Path, specs: list[tuple[str, str, str, str]]) -> list[dict[str, object]]:
        bodies = []
        for name, dag, start, end in specs:
            (folder / "specs" / f"{name}.yaml").write_text(SPEC.format(name=name, dag=dag, start=start, end=end))
            bodies.append(
                {
                    "dag_id": dag,
                    "from_date": start,
                    "to_date": end,
                    "reprocess_behavior": "completed",
                    "max_active_runs": 1,
                }
            )
        (folder / "bodies.json").write_text(json.dumps(bodies))
        return bodies

    def backfillctl(
        self, folder: Path, *args: str, ok: tuple[int, ...] = (0,), before: bool = False
    ) -> tuple[float, Counter[tuple[str, str]]]:
        result, calls = self.backfillctl_run(folder, *args, ok=ok, before=before)
        return result.wall, calls

    def backfillctl_run(
        self, folder: Path, *args: str, ok: tuple[int, ...] = (0,), before: bool = False
    ) -> tuple[Run, Counter[tuple[str, str]]]:
        """One `backfillctl` process (wall, CPU, peak RSS) and the API calls it made."""
        self.proxy.reset()
        env = self.proc_env(BACKFILLCTL_SPECS_DIR="specs", BACKFILLCTL_STORE_URL=f"sqlite:///{folder}/state.db")
        if before:
            env["PYTHONPATH"] = str(self.args.before.resolve())
        result = run([backfillctl(), *args], cwd=folder, env=env, ok_codes=ok)
        self.served = sum(took for *_, took, _status in self.proxy.timings)  # Airflow's own time for those calls
        return result, self.proxy.reset()

    @contextlib.contextmanager
    def scheduler_held(self) -> Iterator[None]:
        """With --hold-scheduler, the scheduler and DAG processor stopped (SIGSTOP) while it lasts: the timed calls
        meet an api-server that serves only them (the backfills stay as they are; tasks already running go on)."""
        pids = (
            json.loads((self.args.airflow_dir / "state.json").read_text())["pids"] if self.args.hold_scheduler else {}
        )
        held = [pids[name] for name in ("scheduler", "dag-processor") if name in pids]
        for pid in held:
            os.kill(pid, signal.SIGSTOP)
        try:
            yield
        finally:
            for pid in held:
                os.kill(pid, signal.SIGCONT)

    def floor_run(self, *args: str) -> float:
        """The floor's wall time; its call count kept in `floor_calls`."""
        wall, self.floor_calls, _ = self.floor(*args)
        return wall

    def floor(self, *args: str) -> tuple[float, int, Counter[tuple[str, str]]]:
        self.proxy.reset()
        result = run([sys.executable, FLOOR, *args], env=self.proc_env())
        self.served = sum(took for *_, took, _status in self.proxy.timings)
        return result.wall, int(result.stdout.strip()), self.proxy.reset()

    def emit(self, text: str) -> None:
        print(text, flush=True)
        self.out.append(text)

    # --- rows -------------------------------------------------------------------------------------------

    def create(self) -> None:
        n, rounds = self.args.creates, self.args.rounds
        dags = DAGS[:n]
        airflow = str(AIRFLOW_VENV / "bin" / "airflow")
        cli_env = airflow_cli_env(self.args.airflow_dir)
        calls: dict[str, Counter[tuple[str, str]]] = {}

        def specs(prefix: str, index: int) -> list[tuple[str, str, str, str]]:
            return [(f"{prefix}-{index}-{i}", dag, *self.windows.take(dag)) for i, dag in enumerate(dags)]

        def floor(index: int) -> float:
            folder = self.folder("create-floor")
            self.write_specs(folder, specs("floor", index))
            wall, _, calls["floor"] = self.floor("create", str(folder / "bodies.json"))
            self.admin.cancel_active(dags)
            return wall

        def alternative(index: int) -> float:
            folder = self.folder("create-cli")
            bodies = self.write_specs(folder, specs("cli", index))
            started = time.perf_counter()
            for body in bodies:
                command = [airflow, "backfill", "create", "--dag-id", str(body["dag_id"])]
                command += ["--from-date", str(body["from_date"]), "--to-date", str(body["to_date"])]
                command += ["--reprocess-behavior", "completed", "--max-active-runs", "1"]
                run(command, env=cli_env)
            wall = time.perf_counter() - started
            self.admin.cancel_active(dags)
            return wall

        def ours(index: int) -> float:
            folder = self.folder("create-backfillctl")
            self.write_specs(folder, specs("bfc", index))
            wall, calls["backfillctl"] = self.backfillctl(folder, "reconcile", "--once")
            self.admin.cancel_active(dags)
            return wall

        def before(index: int) -> float:
            folder = self.folder("create-before")
            self.write_specs(folder, specs("bfb", index))
            wall, calls["before"] = self.backfillctl(folder, "reconcile", "--once", before=True)
            self.admin.cancel_active(dags)
            return wall

        self.admin.cancel_active(dags)
        actions = {"floor": floor, "alternative": alternative, "backfillctl": ours}
        times = alternate(rounds, actions | ({"before": before} if self.args.before else {}))
        f, a, b = (median(times[k]) for k in ("floor", "alternative", "backfillctl"))  # type: ignore[arg-type]
        self.emit(
            table(
                f"create {n} backfills ({n} DAGs × 7 runs), medians of {rounds} alternating rounds",
                [
                    "floor (httpx, 1 auth + N POST)",
                    "alternative (`airflow backfill create` × N)",
                    "backfillctl reconcile --once",
                    "backfillctl / floor",
                    "alternative / backfillctl",
                ],
                [
                    [
                        f"{secs(f)}, {sum(calls['floor'].values())} calls",
                        secs(a),
                        f"{secs(b)}, {sum(calls['backfillctl'].values())} calls",
                        ratio(b, f),
                        ratio(a, b),
                    ]
                ],
            )
            + f"\nbackfillctl calls: {calls_text(calls['backfillctl'])}\n"
            + (
                f"before ({self.args.before}): {secs(median(times['before']))}, "  # type: ignore[arg-type]
                f"{sum(calls['before'].values())} calls ({calls_text(calls['before'])})\n"
                if self.args.before
                else ""
            )
        )

    def plan(self) -> None:
        rows = []
        for n in self.args.plans:
            folder = self.folder(f"plan-{n}")
            specs = [(f"plan-{n}-{i}", DAGS[i % len(DAGS)], *self.windows.take(DAGS[i % len(DAGS)])) for i in range(n)]
            self.write_specs(folder, specs)
            self.backfillctl(folder, "store", "migrate")
            calls: dict[str, Counter[tuple[str, str]]] = {}

            def floor(_i: int, folder: Path = folder, calls: dict[str, Counter[tuple[str, str]]] = calls) -> float:
                wall, _, calls["floor"] = self.floor("dry_run", str(folder / "bodies.json"))
                return wall

            def ours(_i: int, folder: Path = folder, calls: dict[str, Counter[tuple[str, str]]] = calls) -> float:
                wall, calls["backfillctl"] = self.backfillctl(folder, "plan")
                return wall

            times = alternate(self.args.rounds, {"floor": floor, "backfillctl": ours})
            f, b = median(times["floor"]), median(times["backfillctl"])  # type: ignore[arg-type]
            rows.append(
                [
                    f"{n} new specs",
                    f"{secs(f)}, {sum(calls['floor'].values())} calls",
                    "—",
                    f"{secs(b)}, {sum(calls['backfillctl'].values())} calls",
                    ratio(b, f),
                ]
            )
            last = calls["backfillctl"]
        self.emit(
            table(
                f"plan, medians of {self.args.rounds} alternating rounds",
                ["work", "floor (1 auth + N dry runs)", "alternative", "backfillctl plan", "ratio"],
                rows,
            )
            + f"\nbackfillctl calls ({self.args.plans[-1]} specs): {calls_text(last)}\n"
        )

    def year(self) -> None:
        """Reprocess `none`, what a spec says by default: the plan also tells how many runs are in range."""
        folder = self.folder("year")
        self.write_specs(folder, [("year-hourly", "demo_hourly", "2023-01-01T00:00:00Z", "2023-12-31T23:00:00Z")])
        spec = folder / "specs" / "year-hourly.yaml"
        spec.write_text(spec.read_text().replace("reprocess_behavior: completed", "reprocess_behavior: none"))
        bodies = folder / "bodies.json"
        bodies.write_text(bodies.read_text().replace('"completed"', '"none"'))
        calls: dict[str, Counter[tuple[str, str]]] = {}

        def floor(_i: int) -> float:
            wall, _, calls["floor"] = self.floor("dry_run", str(bodies))
            return wall

        def ours(_i: int) -> float:
            wall, calls["backfillctl"] = self.backfillctl(folder, "plan")
            return wall

        actions = {"floor": floor, "backfillctl": ours}
        if self.args.before:
            actions["before"] = lambda _i: self.backfillctl(folder, "plan", before=True)[0]
        times = alternate(self.args.slow_rounds, actions)
        f, b = median(times["floor"]), median(times["backfillctl"])  # type: ignore[arg-type]
        self.emit(
            table(
                f"plan, one year of an hourly DAG (8,760 runs), medians of {self.args.slow_rounds} rounds",
                ["floor (1 auth + 1 dry run)", "backfillctl plan", "ratio"],
                [
                    [
                        f"{secs(f)}, {sum(calls['floor'].values())} calls",
                        f"{secs(b)}, {sum(calls['backfillctl'].values())} calls",
                        ratio(b, f),
                    ]
                ],
            )
            + f"\nbackfillctl calls: {calls_text(calls['backfillctl'])}\n"
            + (f"before ({self.args.before}): {secs(median(times['before']))}\n" if self.args.before else "")  # type: ignore[arg-type]
        )

    def large(self) -> None:
        folder = self.folder("large")
        start, end = "2022-01-01T00:00:00Z", "2022-12-31T23:00:00Z"
        self.write_specs(folder, [("large-hourly", "demo_hourly", start, end)])
        self.admin.cancel_active(("demo_hourly",))
        started = time.perf_counter()
        self.backfillctl(folder, "reconcile", "--once")
        created = time.perf_counter() - started
        self.admin.wait_for_runs("demo_hourly", start, end, 8760)  # the create may outlive its answer
        calls: dict[str, Counter[tuple[str, str]]] = {}

        def floor(_i: int) -> float:
            wall, _, calls["floor"] = self.floor("count", "demo_hourly", start, end)
            return wall

        def ours(_i: int) -> float:
            wall, calls["backfillctl"] = self.backfillctl(folder, "reconcile", "--once")
            return wall

        try:
            times = alternate(self.args.slow_rounds, {"floor": floor, "backfillctl": ours})
        finally:
            self.admin.cancel_active(("demo_hourly",))
        f, b = median(times["floor"]), median(times["backfillctl"])  # type: ignore[arg-type]
        self.emit(
            table(
                f"reconcile pass with one running 1-year hourly backfill, medians of {self.args.slow_rounds} rounds",
                ["floor (auth + backfill + 4 counts)", "backfillctl reconcile --once", "ratio"],
                [
                    [
                        f"{secs(f)}, {sum(calls['floor'].values())} calls",
                        f"{secs(b)}, {sum(calls['backfillctl'].values())} calls",
                        ratio(b, f),
                    ]
                ],
            )
            + f"\n(creating it took {created:.1f} s) backfillctl calls: {calls_text(calls['backfillctl'])}\n"
        )

    def chunked(self) -> None:
        """One year of an hourly DAG: one create of 8,760 runs vs the first chunk of 720 (issue 13)."""
        dag, rows = "demo_chunked", []
        base = 1980 + int(time.time()) % 20 * 2  # two fresh years per invocation (reprocess `completed` anyway)
        self.admin.cancel_active((dag,))
        sides = [
            ("one backfill (no `execution`)", "", 8760),
            ("`chunk_runs: 720`", "execution:\n  chunk_runs: 720\n", 720),  # the first chunk only
        ]
        for offset, (side, execution, expected) in enumerate(sides):
            year = base + offset
            start, end = f"{year}-01-01T00:00:00Z", f"{year}-12-31T23:00:00Z"
            folder = self.folder(f"chunked-{offset}")
            self.write_specs(folder, [(f"year-{offset}", dag, start, end)])
            spec = folder / "specs" / f"year-{offset}.yaml"
            spec.write_text(spec.read_text() + execution)
            env = self.proc_env(BACKFILLCTL_SPECS_DIR="specs", BACKFILLCTL_STORE_URL=f"sqlite:///{folder}/state.db")
            self.proxy.reset()
            planned = run([backfillctl(), "plan"], cwd=folder, env=env)
            plan_calls = self.proxy.reset()
            sampler = QueuedSampler(self.env, dag, start, end).start()
            try:
                applied = run([backfillctl(), "reconcile", "--once"], cwd=folder, env=env, ok_codes=(0, 1))
                self.admin.wait_for_runs(dag, start, end, expected)  # a create may outlive its answer
                time.sleep(3)
                created = self.admin.backfills(dag, start, end)
            finally:
                sampler.stop()
                self.admin.cancel_active((dag,))
            creates = [t for m, r, t, _ in self.proxy.timings if (m, r) == ("POST", "/api/v2/backfills")]
            reconcile_calls = self.proxy.reset()
            rows.append(
                [
                    side,
                    f"{secs(planned.wall)}, {sum(plan_calls.values())} calls, {planned.rss_kb / 1024:.0f} MB",
                    f"{secs(applied.wall)} (exit {applied.returncode}), {sum(reconcile_calls.values())} calls, "
                    f"{applied.rss_kb / 1024:.0f} MB",
                    f"{len(created)} backfill(s) of {', '.join(str(n) for _, n in created)} runs; POST "
                    + " / ".join(secs(t) for t in creates),
                    f"{sampler.peak_queued:,} ({sampler.samples} samples)",
                ]
            )
            self.emit(f"{side}: plan calls {calls_text(plan_calls)}; reconcile calls {calls_text(reconcile_calls)}")
        self.emit(
            table(
                "one year of an hourly DAG (8,760 runs): one create vs chunks of 720 (plan + first pass)",
                [
                    "spec",
                    "`plan` (wall, calls, peak RSS)",
                    "first `reconcile --once` (wall, calls, peak RSS)",
                    "created; each create call as Airflow took it",
                    "peak queued runs in Airflow",
                ],
                rows,
            )
        )

    def pass_(self) -> None:
        """A steady `reconcile --once` over the live specs alone and over them beside --finished finished specs (in
        a git repository: 10 finished specs a commit, then the live ones), side by side: what the finished specs
        add to a pass (wall, peak RSS). The first pass of each folder is not timed: it creates (or adopts) the live
        backfills, and indexes the finished specs."""
        finished, live = self.args.finished, self.args.live
        folder, alone = self.folder("pass"), self.folder("pass-live")
        old = [(f"done-{i:05d}", UTC_DAGS[i % 7], *self.seeded.take(UTC_DAGS[i % 7], 1)) for i in range(finished)]
        live_dags = DAGS[:live]
        # 120 runs each with max_active_runs 1: running through the rounds; windows of their own (a window a rerun
        # of the bench shares with a backfill it cancelled can end with no run of its own)
        fresh = [(f"live-{i}", dag, *self.windows.take(dag, 120)) for i, dag in enumerate(live_dags)]
        self.write_specs(folder, [*old, *fresh])
        self.write_specs(alone, fresh)
        names = [name for name, *_ in old]
        commit_history(folder, [*(names[i : i + 10] for i in range(0, finished, 10)), [n for n, *_ in fresh]])
        commit_history(alone, [[n for n, *_ in fresh]])
        self.seed_finished(folder, old)
        self.admin.cancel_active(live_dags)
        try:
            self.backfillctl(folder, "reconcile", "--once")  # creates the live ones (not timed)
            self.backfillctl(alone, "reconcile", "--once")  # adopts them (not timed)
            olds = (
                (for_before(folder, self.args.before), for_before(alone, self.args.before))
                if self.args.before
                else None
            )
            for old_folder in olds or ():
                self.backfillctl_run(old_folder, "reconcile", "--once", before=True)  # indexes, adopts (not timed)
            # the pass after a change: the whole path, which writes the rest summary the steady passes read
            whole = self.backfillctl_run(folder, "reconcile", "--once")[0]
            actions = self.pass_actions(folder, alone, olds)
            ranges = [",".join(fields) for _name, *fields in fresh]
            served: dict[str, list[float]] = {"live": [], "floor": []}  # Airflow's own time, each round

            def live_pass(_i: int) -> Run:
                result = self.backfillctl_run(alone, "reconcile", "--once")[0]
                served["live"].append(self.served)
                return result

            def floor_pass(_i: int) -> float:
                wall = self.floor_run("live", *ranges)
                served["floor"].append(self.served)
                return wall

            actions |= {"live": live_pass, "floor": floor_pass}
            actions |= imports_actions()
            with self.scheduler_held():
                times = alternate(self.args.rounds, actions)
                counted, live_calls = self.backfillctl_run(alone, "reconcile", "--once")  # one more steady pass
            if f"({live} Running)" not in counted.stdout:  # a window an earlier run filled: its backfill made no run
                raise SystemExit(f"the live backfills did not all run through the rounds, rerun:\n{counted.stdout}")
        finally:
            self.admin.cancel_active(live_dags)
        self.emit(self.pass_table(times, finished, live))
        floor = median([t for t in times["floor"] if isinstance(t, float)])
        ours = median([r.wall for r in times["live"] if isinstance(r, Run)])
        self.emit(
            f"the {live} live alone: {sum(live_calls.values())} calls ({calls_text(live_calls)}), for which Airflow "
            f"took {secs(median(served['live']))} (medians); the floor of their reads (1 auth + each DAG's newest "
            f"backfill + every page of its runs, one after another): {secs(floor)}, {self.floor_calls} calls, for "
            f"which Airflow took {secs(median(served['floor']))}; {ratio(ours, floor)}"
        )
        self.emit(imports_bound(times, floor))
        self.emit(
            f"the pass after a change to the specs folder or a finished binding (this checkout: every finished spec's "
            f"rows read, the rest summary written): {secs(whole.wall)}, {whole.rss_kb / 1024:.0f} MB\n"
        )

    def seed_finished(self, folder: Path, old: list[tuple[str, str, str, str]]) -> None:
        """Every old spec finished and bound, as after the passes that ran it (its backfill never sent)."""
        from controller.adapters.store import Store  # noqa: PLC0415

        store = Store(f"sqlite:///{folder}/state.db")
        with store.batch("seeding finished specs"):
            for n, (name, dag, _s, _e) in enumerate(old):
                raw = (folder / "specs" / f"{name}.yaml").read_bytes()
                store.save_binding(finished_binding(name, dag, n, raw, self.proxy.url))
        store.close()

    def pass_actions(
        self, folder: Path, alone: Path, olds: tuple[Path, Path] | None
    ) -> dict[str, Callable[[int], float | Run]]:
        """Each folder's pass; the checkout at --before runs on copies of them (`for_before`: its own store)."""

        def reconcile(where: Path, before: bool = False) -> Callable[[int], float | Run]:
            return lambda _i: self.backfillctl_run(where, "reconcile", "--once", before=before)[0]

        actions = {
            "live": reconcile(alone),
            "history": reconcile(folder),
            "validate": lambda _i: self.backfillctl_run(folder, "validate")[0],
        }
        if olds is not None:
            actions |= {
                "live (before)": reconcile(olds[1], True),
                "history (before)": reconcile(olds[0], True),
                "validate (before)": lambda _i: self.backfillctl_run(olds[0], "validate", before=True)[0],
            }
        return actions

    def pass_table(self, times: dict[str, list[float | Run]], finished: int, live: int) -> str:
        def wall(key: str) -> float:
            return median([r.wall for r in times[key] if isinstance(r, Run)])

        def rss(key: str) -> float:
            return max(r.rss_kb for r in times[key] if isinstance(r, Run)) / 1024

        rows, added = [], {}
        for code, suffix in (("this checkout", ""), (f"before ({self.args.before})", " (before)")):
            if f"live{suffix}" not in times:
                continue
            extra = (wall(f"history{suffix}") - wall(f"live{suffix}"), rss(f"history{suffix}") - rss(f"live{suffix}"))
            added[suffix] = extra
            rows.append(
                [
                    code,
                    f"{secs(wall(f'live{suffix}'))}, {rss(f'live{suffix}'):.0f} MB",
                    f"{secs(wall(f'history{suffix}'))}, {rss(f'history{suffix}'):.0f} MB",
                    f"{secs(extra[0])}, {extra[1]:+.0f} MB",
                    secs(wall(f"validate{suffix}")),
                ]
            )
        if " (before)" in added:
            (b_wall, b_rss), (a_wall, a_rss) = added[" (before)"], added[""]
            rows.append(["before / after", "", ratio(wall("history (before)"), wall("history")), "", ""])
            times = f"{b_wall / a_wall:.1f}× the time" if a_wall >= 0.01 else f"{b_wall - a_wall:.3f} s more"  # noise
            rows.append(["", "", "", f"{times}, {b_rss - a_rss:.0f} MB less", ""])
        title = f"reconcile --once over {live} live specs alone vs beside {finished:,} finished, medians of "
        header = ["code", f"{live} live (wall, peak RSS)", f"{finished:,} finished + {live} live", "added", "validate"]
        return table(title + f"{self.args.rounds} rounds", header, rows)

    def lost(self) -> None:
        """Each size measured (`--lost 1000,10000`: ~8 minutes to create 10,000 backfills here), beside `--before`."""
        rows, last = [], Counter[tuple[str, str]]()
        # each DAG's own windows from a year that differs per invocation: 10,000 specs over 7 DAGs span ~8 years
        year = datetime(1901 + int(time.time()) % 40, 1, 1, tzinfo=UTC)
        windows = {dag: Windows(year) for dag in UTC_DAGS}
        for n in self.args.lost:
            folder = self.folder(f"lost-{n}")
            dags = [UTC_DAGS[i % 7] for i in range(n)]
            bodies = self.write_specs(
                folder, [(f"lost-{n}-{i:05d}", d, *windows[d].take(d, 1)) for i, d in enumerate(dags)]
            )
            self.admin.cancel_active()
            for body in bodies:  # real backfills, finished (cancelled: completed_at is set at once)
                self.admin.create_and_cancel(body)
            calls: dict[str, Counter[tuple[str, str]]] = {}

            def ours(
                _i: int, folder: Path = folder, calls: dict[str, Counter[tuple[str, str]]] = calls, before: bool = False
            ) -> Run:
                (folder / "state.db").unlink(missing_ok=True)  # the lost store
                key = "before" if before else "backfillctl"
                result, calls[key] = self.backfillctl_run(folder, "reconcile", "--once", ok=(0, 1, 5), before=before)
                return result

            actions: dict[str, Callable[[int], float | Run]] = {"backfillctl": ours}
            if self.args.before:
                actions["before"] = lambda i, ours=ours: ours(i, before=True)
            try:
                times = alternate(self.args.slow_rounds, actions)
            finally:
                self.admin.cancel_active()
            for key in actions:
                done = [r for r in times[key] if isinstance(r, Run)]
                wall, cpu, total = (
                    median([r.wall for r in done]),
                    median([r.cpu for r in done]),
                    sum(calls[key].values()),
                )
                rss = max(r.rss_kb for r in done) // 1024  # medians of the rounds; the peak RSS of any
                rows.append(
                    [
                        "—",
                        f"{n:,} finished specs",
                        key,
                        f"{secs(wall)}, {secs(cpu)} CPU, {rss} MB, {total} calls",
                    ]
                )
            last = calls["backfillctl"]
        self.emit(
            table(
                f"first reconcile pass after a lost store, medians of {self.args.slow_rounds} rounds",
                ["floor", "work", "code", "reconcile --once: wall, CPU, peak RSS, calls"],
                rows,
            )
            + f"\nbackfillctl calls ({self.args.lost[-1]:,} specs): {calls_text(last)}\n"
        )

    def close(self) -> None:
        self.proxy.__exit__()


# what a pass needs beyond the floor's httpx: its store, its git, its schema, its YAML, its command line
PASS_LIBRARIES = "sqlalchemy, sqlalchemy.dialects.sqlite, git, jsonschema, yaml, typer"


def imports_actions() -> dict[str, Callable[[int], float | Run]]:
    """A process that imports httpx (the floor's one library), and one that imports the libraries a pass needs too."""

    def importing(modules: str) -> Callable[[int], float | Run]:
        return lambda _i: run([str(BIN / "python"), "-c", f"import {modules}"]).wall

    return {"httpx": importing("httpx"), "libraries": importing(f"httpx, {PASS_LIBRARIES}")}


def imports_bound(times: dict[str, list[float | Run]], floor: float) -> str:
    """What bounds the pass against 1.5× its floor: what the libraries it needs cost to import, beyond httpx."""
    alone, needed = (median([t for t in times[key] if isinstance(t, float)]) for key in ("httpx", "libraries"))
    return (
        f"what bounds it: a process importing httpx takes {secs(alone)}, one importing the libraries a pass needs too "
        f"({PASS_LIBRARIES}) {secs(needed)}: {secs(needed - alone)} more, before any of its own work; 1.5× the "
        f"floor leaves {secs(floor / 2)} over it"
    )


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    parser.add_argument("rows", nargs="*", default=["create", "plan", "pass", "lost"])
    parser.add_argument(
        "--airflow-dir", type=Path, default=Path(os.environ.get("BACKFILLCTL_AIRFLOW_DIR", REPO / ".airflow-local"))
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.0, help="ms each call waits at the proxy (a remote Airflow)")
    parser.add_argument(
        "--before", type=Path, help="pass, lost rows: also time this checkout's controller/ (PYTHONPATH)"
    )
    parser.add_argument("--slow-rounds", type=int, default=2)
    parser.add_argument(
        "--hold-scheduler",
        action="store_true",
        help="pass row: stop Airflow's scheduler and DAG processor while the rounds are timed (the pass's own cost)",
    )
    parser.add_argument("--creates", type=int, default=8)
    parser.add_argument("--plans", type=lambda s: [int(x) for x in s.split(",")], default=[10, 40])
    parser.add_argument("--finished", type=int, default=1000)
    parser.add_argument("--live", type=int, default=5)
    parser.add_argument("--lost", type=lambda s: [int(x) for x in s.split(",")], default=[25, 100])
    args = parser.parse_args()
    bench = Bench(args)
    delay = f" (+{args.latency:g} ms a call)" if args.latency else ""
    print(f"Airflow {bench.env.url} via counting proxy {bench.proxy.url}{delay}; {load_note()}", flush=True)
    try:
        for row in args.rows:
            getattr(bench, {"pass": "pass_"}.get(row, row))()
    finally:
        bench.close()
    print(f"done; {load_note()}")


if __name__ == "__main__":
    main()
