"""Progressive execution against the real Apache Airflow 3.3.2 (issue 13): chunks, a canary, a failure halt.

`demo_chunked` (hourly, an EmptyOperator task) and `demo_halting` (hourly, fails every third hour, no
retries), on dates of their own (a random fortnight and day in 2020–2023), so the tests share a session's
Airflow with the others and also run again on a kept one. Airflow is sampled by a
thread (every second) while the passes run, straight through its REST API, not through the controller.

Time: Airflow marks a backfill complete only at a fixed 30 s scheduler tick, and the next chunk waits for
that, so a chunk costs one tick when its runs finish within it. With a Python task 48 runs took 10 s on a quiet
machine but over 30 s under the suite's load (two ticks: 355 s for the two weeks); `demo_chunked`'s task is an
EmptyOperator, which the scheduler marks itself, so the two weeks take 7 ticks (~210 s) and the file ~4 min.
"""

from __future__ import annotations

import json
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from controller.commands.reconcile.reconciler import PassResult
from controller.core.audit.chain import AuditRecord
from tests.commands.reconcile.harness import Bench

pytestmark = pytest.mark.airflow
DAGS = ("demo_chunked", "demo_halting")
HOUR = timedelta(hours=1)

# A reconciler killed right after Airflow accepted a create, before it could write the outcome (SIGKILL: no
# `finally`, no rollback, the lease stays behind), like a CI runner that disappears mid-pass.
KILLED_AFTER_CREATE = """
import os, signal, sys
from controller.adapters.airflow import AirflowClient
from controller.cli import main
real_create = AirflowClient.create
def create(self, *args, **kwargs):
    created = real_create(self, *args, **kwargs)
    print(f"created #{created.id}; killed", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
AirflowClient.create = create
sys.exit(main(["reconcile", "--once"]))
"""


@pytest.fixture
def bench(tmp_path: Path, airflow_url: str) -> Iterator[Bench]:
    b = Bench(tmp_path, url=airflow_url)
    yield b
    with b.client() as client:
        for dag in DAGS:
            for backfill in client.list_backfills(dag):
                if backfill.active:
                    client.cancel(backfill.id)
    b.close()


@pytest.fixture
def airflow(airflow_url: str) -> Iterator[Airflow]:
    view = Airflow(airflow_url)
    yield view
    view.close()


def z(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def at(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


class Airflow:
    """Airflow's own view, read with its REST API (a token of its own, not the controller's client)."""

    def __init__(self, url: str) -> None:
        token = httpx.post(f"{url}/auth/token", json={"username": "admin", "password": "admin"}, timeout=30)
        token.raise_for_status()
        self.http = httpx.Client(
            base_url=url, headers={"Authorization": f"Bearer {token.json()['access_token']}"}, timeout=30
        )

    def close(self) -> None:
        self.http.close()

    def runs(self, dag: str, *states: str, first: datetime | None = None, last: datetime | None = None) -> int:
        params: dict[str, Any] = {"run_type": "backfill", "limit": 1}
        if states:
            params["state"] = list(states)
        if first is not None:
            params["logical_date_gte"] = z(first)
        if last is not None:
            params["logical_date_lte"] = z(last)
        answer = self.http.get(f"/api/v2/dags/{dag}/dagRuns", params=params)
        answer.raise_for_status()
        return int(answer.json()["total_entries"])

    def in_flight(self, dag: str) -> int:
        return self.runs(dag, "queued", "running")

    def backfills(self, dag: str, first: datetime, last: datetime) -> list[dict[str, Any]]:
        """The DAG's backfills whose range lies inside [first, last], oldest first."""
        answer = self.http.get("/api/v2/backfills", params={"dag_id": dag, "limit": 100})
        answer.raise_for_status()
        found = [b for b in answer.json()["backfills"] if first <= at(b["from_date"]) and at(b["to_date"]) <= last]
        return sorted(found, key=lambda b: int(b["id"]))


@dataclass
class Sampler:
    """Samples `probe` every `every` seconds in a thread until stopped; keeps every value."""

    probe: Callable[[], int]
    every: float = 1.0
    values: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.values.append(self.probe())
            except httpx.HTTPError as exc:  # a sample lost is not a test failure; too many are
                self.errors.append(repr(exc))
            self._stop.wait(self.every)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def passes_until(bench: Bench, done: Callable[[PassResult], bool], *, seconds: float, every: float = 2.0) -> PassResult:
    """Reconcile passes every `every` seconds until `done`."""
    deadline = time.monotonic() + seconds
    while True:
        result = bench.run()
        if done(result):
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"not done after {seconds:.0f} s: {rows(result)}")
        time.sleep(every)


def rows(result: PassResult) -> list[tuple[str, str, str]]:
    return [(i.spec, i.phase.value, i.reason) for i in result.current.items]


def phase(result: PassResult, spec: str) -> str:
    (item,) = [i for i in result.current.items if i.spec == spec]
    return str(item.phase.value)


def cli_json(bench: Bench, *args: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-m", "controller", *args, "--format", "json"],
        env=bench.cli_env(),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def status_row(bench: Bench, spec: str) -> dict[str, Any]:
    (row,) = [r for r in cli_json(bench, "status", spec)["specs"] if r["spec"] == spec]
    return dict(row)


def show(events: list[AuditRecord]) -> None:
    """The spec's audit trail on stdout (pytest shows it with a failure)."""
    for e in events:
        entry = e.entry
        print(f"{e.time} {entry.action}/{entry.phase} {entry.outcome} #{entry.backfill_id} {entry.message}")


def creates(events: list[AuditRecord]) -> list[AuditRecord]:
    return [e for e in events if e.entry.action == "create"]


def chunk_intents(events: list[AuditRecord]) -> list[str]:
    return [e.entry.message or "" for e in creates(events) if e.entry.phase == "intent"]


def bound_ids(events: list[AuditRecord]) -> list[int]:
    """Backfill ids the audit says the spec got: created (outcome) or adopted after a crash, in order."""
    return [
        e.entry.backfill_id
        for e in events
        if e.entry.backfill_id is not None
        and (
            (e.entry.action == "create" and e.entry.phase == "outcome")
            or (e.entry.action == "adopt" and e.entry.outcome == "adopted")
        )
    ]


# --- 1. two weeks in chunks of 48: a canary, a promotion that raises the concurrency, a killed reconciler ----

# a fortnight of its own on every run, so the test also runs again on an Airflow kept from an earlier session
# (reprocess none: dates that already ran would leave nothing to do)
FIRST = datetime(2020, 1, 1, tzinfo=UTC) + timedelta(days=14 * secrets.randbelow(100))
LAST = FIRST + timedelta(days=14) - HOUR  # 336 hourly runs
SPAN = {"dag": "demo_chunked", "start": z(FIRST), "end": z(LAST)}
EXECUTION = "{chunk_runs: 48, canary_runs: 48}"  # 7 chunks: the canary, then 6 more once promoted


def test_two_weeks_in_chunks_of_48_canary_promotion_and_a_killed_reconciler(bench: Bench, airflow: Airflow) -> None:
    """One spec, the whole story (each chunk costs a 30 s Airflow completion tick, so one spec, not three):

    - the canary chunk (48 runs, max_active_runs 16) runs, then the spec waits in AwaitingPromotion;
    - a reviewed change sets `promote: true` and raises max_active_runs to 48: the next chunks get it;
    - between the 3rd and the 4th chunk a reconciler is SIGKILLed right after Airflow accepted its create;
    - sampled every second throughout, the DAG never has more than 48 queued+running backfill runs;
    - at the end: exactly 7 contiguous, disjoint backfills of 48 runs, each with its create audit, Succeeded.
    """
    started = time.monotonic()
    bench.spec("two-weeks", mar=16, execution=EXECUTION, **SPAN)
    with Sampler(lambda: airflow.in_flight("demo_chunked")) as inflight:
        canary = passes_until(bench, lambda r: phase(r, "two-weeks") == "AwaitingPromotion", seconds=150)
        (first,) = airflow.backfills("demo_chunked", FIRST, LAST)
        assert (at(first["from_date"]), at(first["to_date"]), first["max_active_runs"]) == (
            FIRST,
            FIRST + 47 * HOUR,
            16,
        )
        assert airflow.runs("demo_chunked", "success", first=FIRST, last=LAST) == 48
        waiting = status_row(bench, "two-weeks")  # asserted at the end, after what Airflow and the audit say
        for _ in range(3):  # it stays there: no second chunk without a reviewed `promote: true`
            held = bench.run()
            assert phase(held, "two-weeks") == "AwaitingPromotion", rows(held)
            assert held.applied == []
            time.sleep(1)
        assert len(airflow.backfills("demo_chunked", FIRST, LAST)) == 1
        print(f"canary done after {time.monotonic() - started:.0f} s: {rows(canary)}")

        # the reviewed change: promote, and raise the concurrency (it applies from the next chunk)
        bench.spec("two-weeks", mar=48, execution=EXECUTION, promote="true", **SPAN)
        promoted = bench.run()
        assert [(i.kind.value, o) for i, o in promoted.applied] == [("create", "created")], promoted.applied
        ours = airflow.backfills("demo_chunked", FIRST, LAST)
        assert [(b["id"], b["max_active_runs"]) for b in ours] == [(first["id"], 16), (ours[-1]["id"], 48)]

        killed, deadline = False, time.monotonic() + 420
        while True:
            assert time.monotonic() < deadline, f"not Succeeded after 420 s: {rows(bench.run())}"
            # from the 3rd chunk on, until one is killed, every pass is a reconciler that dies right after its
            # create reaches Airflow (before it records the outcome): the 4th chunk's create, between two chunks
            if not killed and len(airflow.backfills("demo_chunked", FIRST, LAST)) >= 3:
                crash = subprocess.run(
                    [sys.executable, "-c", KILLED_AFTER_CREATE],
                    env=bench.cli_env(),
                    capture_output=True,
                    text=True,
                    check=False,
                )
                if crash.returncode != -signal.SIGKILL:
                    assert crash.returncode == 0, crash.stderr  # a pass that created nothing: the next one
                    time.sleep(2)
                    continue
                killed = True
                intents = chunk_intents(bench.events("two-weeks"))
                assert intents[-1].startswith("chunk 4 of 7:"), intents
                last = creates(bench.events("two-weeks"))[-1].entry
                assert (last.phase, last.outcome) == ("intent", None)  # intent without outcome
                assert len(airflow.backfills("demo_chunked", FIRST, LAST)) == 4  # it did reach Airflow
                lease = bench.store.current_lease()
                assert lease is not None  # SIGKILL left the lease: an operator releases it by its id
                bench.store.unlock(lease.lease_id)
            result = bench.run()
            if phase(result, "two-weeks") == "Succeeded":
                break
            assert phase(result, "two-weeks") in ("Pending", "Running"), rows(result)
            time.sleep(2)
        time.sleep(1.5)  # one more sample after the end
    print(f"chunked two weeks: {time.monotonic() - started:.0f} s, in flight at most {max(inflight.values, default=0)}")
    assert killed
    assert len(inflight.errors) < 5, inflight.errors
    assert inflight.values
    assert 0 < max(inflight.values) <= 48, inflight.values  # never two chunks at once

    # Airflow: exactly 7 backfills, contiguous and disjoint, 48 runs each, all complete and successful
    ours = airflow.backfills("demo_chunked", FIRST, LAST)
    assert len(ours) == 7, [(b["id"], b["from_date"], b["to_date"]) for b in ours]
    spans = [(at(b["from_date"]), at(b["to_date"])) for b in ours]
    assert spans == [(FIRST + 48 * k * HOUR, FIRST + (48 * k + 47) * HOUR) for k in range(7)]
    assert [b["max_active_runs"] for b in ours] == [16] + [48] * 6
    assert all(b["completed_at"] and not b["is_paused"] for b in ours)
    assert [airflow.runs("demo_chunked", first=a, last=b) for a, b in spans] == [48] * 7
    assert airflow.runs("demo_chunked", "success", first=FIRST, last=LAST) == 336

    # audit: the promotion once; one create intent per chunk ("chunk K of 7: …", the 2nd naming the new
    # concurrency); every backfill bound once: the killed reconciler's 4th chunk adopted, never created again
    # and never reported as lost
    events = bench.events("two-weeks")
    show(events)
    assert [(e.entry.action, e.entry.outcome) for e in events if e.entry.action == "promote"] == [
        ("promote", "promoted")
    ]
    intents = chunk_intents(events)
    assert [m.split(":", 1)[0] for m in intents] == [f"chunk {k} of 7" for k in range(1, 8)], intents
    assert "16" in intents[1], intents[1]
    assert "48" in intents[1], intents[1]
    assert bound_ids(events) == [int(b["id"]) for b in ours]
    outcomes = [e.entry.outcome for e in creates(events) if e.entry.phase == "outcome"]
    assert outcomes.count("created") == 6, outcomes
    assert bench.store.verify().ok

    # status and report: chunk 1 of 7 while waiting, 7 of 7 at the end; one change record with every chunk
    assert (waiting["phase"], waiting.get("chunk")) == ("AwaitingPromotion", {"index": 1, "count": 7})
    report = cli_json(bench, "report", "two-weeks")
    assert report["outcome"] == "Succeeded"
    assert [
        (c["backfill_id"], at(c["from_date"]), at(c["to_date"]), c["runs"], c["max_active_runs"])
        for c in report.get("chunks") or ()
    ] == [(int(b["id"]), lo, hi, 48, b["max_active_runs"]) for b, (lo, hi) in zip(ours, spans, strict=True)]
    row = status_row(bench, "two-weeks")
    assert row["runs"]["success"] == 336
    assert (row["phase"], row.get("chunk")) == ("Succeeded", {"index": 7, "count": 7}), row
    abandoned = [e.entry.message for e in creates(events) if e.entry.outcome == "abandoned"]
    assert abandoned == []  # the killed reconciler's intent did leave a backfill: the 4th, adopted


# --- 2. a DAG that fails often halts, a new `resume` continues ---------------------------------------

HALT_FIRST = datetime(2020, 1, 1, tzinfo=UTC) + timedelta(days=secrets.randbelow(1400))  # a day of its own
HALT_LAST = HALT_FIRST + timedelta(days=1) - HOUR  # 24 runs, 8 fail


def test_a_dag_failing_often_halts_with_its_backfill_paused_and_a_new_resume_value_continues(
    bench: Bench, airflow: Airflow
) -> None:
    spec: dict[str, Any] = {"dag": "demo_halting", "start": z(HALT_FIRST), "end": z(HALT_LAST), "mar": 1}
    bench.spec("halting", execution="{halt_on_failure_ratio: 0.2}", **spec)
    halted = passes_until(bench, lambda r: phase(r, "halting") == "Halted", seconds=90, every=1.0)
    (backfill,) = airflow.backfills("demo_halting", HALT_FIRST, HALT_LAST)
    paused = airflow.http.get(f"/api/v2/backfills/{backfill['id']}").json()
    assert paused["is_paused"] is True
    assert paused["completed_at"] is None
    assert airflow.runs("demo_halting", "queued", first=HALT_FIRST, last=HALT_LAST) > 0  # halted mid-way
    events = bench.events("halting")
    show(events)
    pauses = [e.entry for e in events if e.entry.action == "pause"]
    assert [(p.phase, p.outcome) for p in pauses] == [("intent", None), ("outcome", "halted")], pauses
    message = pauses[0].message or ""
    assert "failed" in message, message
    assert any(ch.isdigit() for ch in message), message  # the figures
    assert pauses[0].backfill_id == backfill["id"]
    assert any("fail" in i.reason for i in halted.current.items), rows(halted)
    assert status_row(bench, "halting")["phase"] == "Halted"

    # halted means halted: nothing more finishes while it waits for a reviewed `resume`
    until = time.monotonic() + 30  # the run that was running when it paused ends
    while airflow.runs("demo_halting", "running", first=HALT_FIRST, last=HALT_LAST) and time.monotonic() < until:
        time.sleep(0.5)
    finished = airflow.runs("demo_halting", "success", "failed", first=HALT_FIRST, last=HALT_LAST)
    for _ in range(2):
        held = bench.run()
        assert phase(held, "halting") == "Halted"
        assert held.applied == []
        time.sleep(1.5)
    assert airflow.runs("demo_halting", "success", "failed", first=HALT_FIRST, last=HALT_LAST) == finished

    bench.spec("halting", execution="{halt_on_failure_ratio: 0.2}", resume='"CHG-2 fix deployed"', **spec)
    resumed = bench.run()
    assert [(i.kind.value, o) for i, o in resumed.applied] == [("unpause", "done")], resumed.applied
    assert airflow.http.get(f"/api/v2/backfills/{backfill['id']}").json()["is_paused"] is False
    unpauses = [(e.entry.phase, e.entry.outcome) for e in bench.events("halting") if e.entry.action == "unpause"]
    assert unpauses == [("intent", None), ("outcome", "done")]
    # the runs continue; failures count again from the resume, so it halts again only after 5 more finished
    again = passes_until(bench, lambda r: phase(r, "halting") != "Running", seconds=90, every=1.0)
    show(bench.events("halting"))
    later = airflow.runs("demo_halting", "success", "failed", first=HALT_FIRST, last=HALT_LAST)
    assert later >= finished + 5, (finished, later)
    assert phase(again, "halting") in ("Halted", "CompletedWithFailures"), rows(again)
    assert bench.store.verify().ok


# --- 3. a lost store: the chunks found in Airflow are adopted, once each and in order, and the spec goes on ------

LOST_FIRST = datetime(2016, 1, 1, tzinfo=UTC) + timedelta(days=secrets.randbelow(1400))  # a day of its own
LOST_LAST = LOST_FIRST + 11 * HOUR  # 12 hourly runs: 3 chunks of 4


def queued_at(airflow: Airflow, first: datetime, last: datetime) -> dict[datetime, datetime]:
    """Each demo_chunked backfill run's logical date → when it was (last) queued."""
    params = {"run_type": "backfill", "logical_date_gte": z(first), "logical_date_lte": z(last), "limit": 100}
    answer = airflow.http.get("/api/v2/dags/demo_chunked/dagRuns", params=params)
    answer.raise_for_status()
    return {at(r["logical_date"]): at(r["queued_at"]) for r in answer.json()["dag_runs"]}


def test_a_chunked_spec_whose_store_was_lost_adopts_its_chunks_once_in_order_and_goes_on(
    bench: Bench, airflow: Airflow, tmp_path: Path
) -> None:
    """Chunk 1 finished and chunk 2 running when the store is lost. Before: chunk 2 was an unmanaged backfill that
    blocked the DAG, and with `completed` chunk 1's dates ran again. Now: both are adopted (one audited adoption
    each, in order, once), chunk 3 follows them, and every date ran once, in its own chunk."""
    span = {"dag": "demo_chunked", "start": z(LOST_FIRST), "end": z(LOST_LAST)}
    bench.spec("lost", mar=1, reprocess="completed", execution="{chunk_runs: 4}", **span)
    first = bench.run()
    assert [(i.kind.value, i.chunk, o) for i, o in first.applied] == [("create", (1, 3), "created")]
    second = passes_until(bench, lambda r: bool(r.applied), seconds=150)  # chunk 1 done: chunk 2 created
    assert [(i.kind.value, i.chunk, o) for i, o in second.applied] == [("create", (2, 3), "created")]
    one, two = airflow.backfills("demo_chunked", LOST_FIRST, LOST_LAST)
    assert (one["completed_at"] is not None, two["completed_at"]) == (True, None)  # chunk 2 is running
    assert airflow.runs("demo_chunked", "success", first=LOST_FIRST, last=LOST_FIRST + 3 * HOUR) == 4

    bench.store.close()
    (tmp_path / "state.db").unlink()  # the store is lost
    bench.store = type(bench.store)(bench.store_url)
    adopting = bench.run()
    assert [(i.kind.value, o) for i, o in adopting.applied] == [("adopt", "adopted")]
    (item,) = adopting.plan.items
    reason = f"adopt chunk backfill(s) #{one['id']}, #{two['id']} (the spec's chunks, not bound)"
    assert (item.phase.value, item.reason) == ("Running", reason)
    assert adopting.current.findings == ()  # no unmanaged backfill blocks the DAG
    binding = bench.store.binding("lost")
    assert binding is not None
    assert binding.progress is not None
    assert binding.backfills == (one["id"], two["id"])
    assert [(c.first, c.last, c.runs) for c in binding.progress.chunks] == [
        (LOST_FIRST, LOST_FIRST + 3 * HOUR, 4),
        (LOST_FIRST + 4 * HOUR, LOST_FIRST + 7 * HOUR, 4),
    ]

    final = passes_until(bench, lambda r: phase(r, "lost") == "Succeeded", seconds=240)
    (done,) = final.current.items
    assert done.runs is not None
    assert dict(done.runs.counts) == {"success": 12}
    ours = airflow.backfills("demo_chunked", LOST_FIRST, LOST_LAST)
    assert [b["id"] for b in ours[:2]] == [one["id"], two["id"]]
    spans = [(at(b["from_date"]), at(b["to_date"])) for b in ours]
    assert spans == [(LOST_FIRST + 4 * k * HOUR, LOST_FIRST + (4 * k + 3) * HOUR) for k in range(3)]
    # no date ran twice: 12 runs, each queued once, by the chunk whose slice holds it (a re-run moves queued_at)
    queued = queued_at(airflow, LOST_FIRST, LOST_LAST)
    assert sorted(queued) == [LOST_FIRST + n * HOUR for n in range(12)]
    created = [at(b["created_at"]) for b in ours] + [datetime.max.replace(tzinfo=UTC)]
    for k, (low, high) in enumerate(spans):
        inside = [when for moment, when in queued.items() if low <= moment <= high]
        assert len(inside) == 4
        assert all(created[k] <= when < created[k + 1] for when in inside), (k, inside, created)

    events = bench.events("lost")
    show(events)
    adoptions = [(e.entry.backfill_id, e.entry.outcome, e.entry.message) for e in events if e.entry.action == "adopt"]
    assert adoptions == [
        (one["id"], "adopted", f"chunk 1: {z(LOST_FIRST)} → {z(LOST_FIRST + 3 * HOUR)}; {reason}"),
        (two["id"], "adopted", f"chunk 2: {z(LOST_FIRST + 4 * HOUR)} → {z(LOST_FIRST + 7 * HOUR)}; {reason}"),
    ]
    assert [(e.entry.phase, e.entry.outcome) for e in creates(events)] == [("intent", None), ("outcome", "created")]
    # the store held how many runs the spec had when its first chunk was planned: after its loss, not known
    (intent,) = chunk_intents(events)
    assert intent.startswith(f"chunk 3 of ?: {z(LOST_FIRST + 8 * HOUR)} → {z(LOST_LAST)} (4 runs), max_active_runs 1;")
    assert bound_ids(events) == [int(b["id"]) for b in ours]
    assert not [e for e in events if e.entry.action == "finding"], [e.entry.message for e in events]
    assert bench.store.verify().ok
