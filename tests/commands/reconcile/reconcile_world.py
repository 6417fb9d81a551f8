"""The R18 state machine's world: the reconcile `Bench` (harness.py, the one whole-controller harness) in a real git
repository, with a real SQLite store, the real Reconciler and the stateful fake Airflow, all on one `Clock`.

Used by the R18 state machine (tests/commands/reconcile/test_reconcile_machine.py) and by its pinned bug reproductions.
The bench brings the specs folder, the store, the client and the settings; the world adds what the machine checks.
Everything the controller touches is recorded on the way, so invariants can be checked from outside:

- every HTTP request passes `World.wire` (the bench's wire), which can inject a fault (a world event or a
  transport error) and checks, at the moment a mutating request is sent, that the store already holds its
  `intent` and that the target backfill is one the store owns;
- every store write passes `CrashStore` (the bench's store), which counts it (a crash can be placed between
  any two calls, HTTP or store) and checks each terminal phase written against the fake's ground truth of the runs.

A crash is `Crash` (a BaseException, like SIGKILL it is caught by nothing in the controller) raised at the
chosen call index, before or after the call takes effect; the reconciler object is then abandoned and the
next pass builds a fresh one on a freshly opened store.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx

from controller.adapters.store import Store
from controller.commands.reconcile.reconciler import PassResult
from controller.core.audit.chain import AuditEntry, AuditRecord
from controller.core.model.binding import Binding, Phase
from controller.errors import AirflowError
from tests.commands.reconcile.harness import Bench
from tests.fakes.airflow import Dag, FakeAirflow

BASE = datetime(2026, 1, 1, tzinfo=UTC)
DAGS = ("dag_a", "dag_b")
CREATE = ("POST", "/api/v2/backfills")
_PUT = re.compile(r"^/api/v2/backfills/(\d+)/(pause|unpause|cancel)$")
FOREIGN_WINDOW = ("2024-06-01", "2024-06-02")  # hand-made backfills never overlap a spec's range
TERMINAL = {p.value for p in Phase if p.terminal}


class Crash(BaseException):
    """Stands for SIGKILL of the reconcile process: nothing in the controller may catch it."""


class Clock:
    """One clock for the store, the fake and the reconciler: 1 ms per reading, so order is exact."""

    def __init__(self) -> None:
        self.ticks = 0

    def __call__(self) -> datetime:
        self.ticks += 1
        return BASE + timedelta(milliseconds=self.ticks)


_TEMPLATE: list[Path] = []


def template_store() -> Path:
    """A freshly migrated, empty store file, made once per session (Alembic is the slow part)."""
    if not _TEMPLATE:
        scratch = "/dev/shm" if os.path.isdir("/dev/shm") else None
        folder = Path(tempfile.mkdtemp(prefix="backfillctl-store-template-", dir=scratch))
        atexit.register(shutil.rmtree, folder, True)
        Store(f"sqlite:///{folder}/state.db").close()
        _TEMPLATE.append(folder / "state.db")
    return _TEMPLATE[0]


@dataclass
class SpecModel:
    name: str
    dag: str
    start: str
    end: str
    reprocess: str
    mar: int
    state: str = "active"
    present: bool = True


@dataclass
class PassRecord:
    number: int
    status: str  # ok | crash | error:<class>
    result: PassResult | None
    requests: list[tuple[str, str]]
    events: list[AuditRecord]
    faulted: bool

    @property
    def mutating(self) -> list[tuple[str, str]]:
        return [(m, p) for m, p in self.requests if (m, p) == CREATE or (m == "PUT" and _PUT.match(p))]


# A fault: (name, matches(request) -> bool, act(request) -> Response | BaseException | None).
# `act` returning None lets the request through to the fake.
Fault = tuple[str, Callable[[httpx.Request], bool], Callable[[httpx.Request], "httpx.Response | BaseException | None"]]


class CrashStore(Store):
    """The real store; counts writes for crash placement and checks terminal phases against the fake."""

    def __init__(self, url: str, *, world: World) -> None:
        super().__init__(url, clock=world.clock)
        self.world = world

    def append(self, entry: AuditEntry) -> AuditRecord:
        self.world.call("store")
        record = super().append(entry)
        self.world.call_done()
        return record

    def save_binding(self, binding: Binding) -> None:
        self.world.call("store")
        self.world.check_terminal(binding.spec_name, binding.phase, binding.backfill_id)
        super().save_binding(binding)
        self.world.call_done()


@dataclass
class World:
    root: Path
    clock: Clock = field(default_factory=Clock)
    specs: dict[str, SpecModel] = field(default_factory=dict)
    foreign: set[int] = field(default_factory=set)  # backfills made by hand: never to be touched
    faults: list[Fault] = field(default_factory=list)
    crash: tuple[int, bool] | None = None  # (call index in the next pass, after the call took effect)
    violations: list[str] = field(default_factory=list)
    passes: list[PassRecord] = field(default_factory=list)
    drift: str = "report"
    note: Callable[[str], None] = lambda _text: None  # coverage events (the machine passes hypothesis.event)

    def __post_init__(self) -> None:
        self.fake = FakeAirflow(now=self.clock, dags=[Dag(d) for d in DAGS])
        self.fake.scheduler_running = False  # Airflow advances only when a rule says so
        self.store_path = self.root / "state.db"  # outside the repository: commits take the specs only
        shutil.copyfile(template_store(), self.store_path)
        self.calls = 0
        self._pending_after = False
        self.in_pass = False
        self.faulted = False
        self.requests: list[tuple[str, str]] = []
        self.bench = Bench(
            self.root / "repo",
            fake=self.fake,
            store_url=f"sqlite:///{self.store_path}",
            open_store=lambda url: CrashStore(url, world=self),
            clock=self.clock,
            wire=self.wire,
            git=True,
            actor="machine",
        )
        self.bench.max_concurrency = 1  # one request at a time: a crash point is the Nth call, in one order

    @property
    def store(self) -> Store:
        return self.bench.store

    # --- git ----------------------------------------------------------------------------------------

    def write_spec(self, spec: SpecModel) -> None:
        self.specs[spec.name] = spec
        if spec.present:
            conf = f"{{spec: {spec.name}}}"  # each spec tags its backfills' conf
            self.bench.spec(
                spec.name, spec.dag, spec.start, spec.end, spec.reprocess, spec.mar, dag_run_conf=conf, state=spec.state
            )
        else:
            (self.bench.specs / f"{spec.name}.yaml").unlink(missing_ok=True)
        self.bench.commit(f"{spec.name}: {spec.state if spec.present else 'deleted'}")

    def set_drift(self, mode: str) -> None:
        self.drift = mode
        self.bench.policy(f"version: 1\ndrift: {mode}\n")
        self.bench.commit(f"policy: drift {mode}")

    # --- Airflow's other users and its scheduler ---------------------------------------------------

    def hand_backfill(self, dag: str) -> int | None:
        """Someone creates a backfill by hand (in the UI); Airflow refuses while one is active."""
        if any(b["dag_id"] == dag and b["completed_at"] is None for b in self.fake.backfills.values()):
            return None
        body = {"dag_id": dag, "from_date": FOREIGN_WINDOW[0], "to_date": FOREIGN_WINDOW[1], "max_active_runs": 1}
        backfill_id = int(self.fake._create(body)["id"])
        self.foreign.add(backfill_id)
        return backfill_id

    def drain(self, fail_first: bool) -> bool:
        """Airflow runs every startable run to its end (the first one fails if asked) and marks
        backfills complete. True if anything moved."""
        moved, failed = False, not fail_first
        for backfill_id in sorted(self.fake.backfills):
            while True:
                started = self.fake.start_runs(backfill_id)
                finished = self.fake.finish_run(backfill_id, "success" if failed else "failed")
                failed = failed or finished
                moved = moved or bool(started) or finished
                if not started and not finished:
                    break
        return bool(self.fake.mark_complete()) or moved

    # --- the store ----------------------------------------------------------------------------------

    def lose_store(self) -> None:
        """The store file is gone (a new runner without the volume): a fresh, empty, migrated store."""
        self.store.close()
        shutil.copyfile(template_store(), self.store_path)
        self.bench.store = self.bench.open_store(self.bench.store_url)

    def events(self) -> list[AuditRecord]:
        return self.bench.events()

    # --- crash placement ----------------------------------------------------------------------------

    def call(self, kind: str) -> None:
        """Before a call (HTTP request or store write) of a pass: crash here if this is the chosen one."""
        if not self.in_pass:
            return
        index, self.calls = self.calls, self.calls + 1
        self._pending_after = False
        if self.crash is not None and self.crash[0] == index:
            after = self.crash[1]
            self.crash = None
            self.faulted = True
            self.note(f"crash {'after' if after else 'before'} a {kind} call")
            if not after:
                raise Crash(f"crash before call #{index}")
            self._pending_after = True

    def call_done(self) -> None:
        if self._pending_after:
            self._pending_after = False
            raise Crash("crash after a call took effect")

    # --- the wire -----------------------------------------------------------------------------------

    def wire(self, request: httpx.Request) -> httpx.Response:
        self.call("http")
        method, path = request.method, request.url.path
        self.requests.append((method, path))
        if (method, path) == CREATE or (method == "PUT" and _PUT.match(path)):
            self.check_mutation(request)
        fault = next((f for f in self.faults if f[1](request)), None)
        response: httpx.Response | None = None
        if fault is not None:
            self.faults.remove(fault)
            self.faulted = True
            outcome = fault[2](request)
            if isinstance(outcome, BaseException):
                raise outcome
            response = outcome
        if response is None:
            response = self.fake.handle(request)
        self.call_done()
        return response

    def check_mutation(self, request: httpx.Request) -> None:
        """At send time: the store holds this call's intent, and owns the backfill a PUT targets."""
        events = self.events()
        last = events[-1].entry if events else None
        method, path = request.method, request.url.path
        where = f"pass {len(self.passes) + 1}: {method} {path}"
        if last is None or last.phase != "intent" or dict(last.request or {}).get("path") != path:
            self.violations.append(f"{where} sent without its intent as the last audit record (last: {last})")
            return
        if method == "POST":
            body = json.loads(request.content)
            tag = (body.get("dag_run_conf") or {}).get("spec")
            if last.action != "create" or last.spec_name != tag or dict(last.request or {}).get("body") != body:
                self.violations.append(f"{where} body {body} does not match its intent {last}")
            return
        match = _PUT.match(path)
        assert match is not None
        backfill_id, action = int(match.group(1)), match.group(2)
        owned = {b.backfill_id: name for name, b in self.store.bindings().items()}
        if backfill_id in self.foreign:
            self.violations.append(f"{where}: backfill #{backfill_id} was made by hand (unmanaged)")
        if backfill_id not in owned:
            self.violations.append(f"{where}: backfill #{backfill_id} is not owned by the store ({owned})")
        if last.action != action or last.backfill_id != backfill_id:
            self.violations.append(f"{where}: the last intent is {last.action} #{last.backfill_id}")

    # --- terminal phases vs the fake's ground truth ----------------------------------------------------

    def check_terminal(self, spec_name: str, phase: Phase, backfill_id: int | None) -> None:
        if phase not in TERMINAL or backfill_id is None:
            return
        runs = self.fake.outcome(backfill_id)
        states = sorted(runs.values())
        where = f"pass {len(self.passes) + 1}: {spec_name} recorded {phase} for backfill #{backfill_id}"
        unfinished = [s for s in states if s in ("queued", "running")]
        if unfinished:
            self.violations.append(f"{where} while its runs are {states}")
        elif phase in (Phase.SUCCEEDED, Phase.COMPLETED_WITH_FAILURES) and not states:
            self.violations.append(f"{where} but the backfill has no runs at all (the spec wanted some)")
        elif phase == Phase.SUCCEEDED and any(s != "success" for s in states):
            self.violations.append(f"{where} but its runs are {states}")
        elif phase == Phase.COMPLETED_WITH_FAILURES and "failed" not in states:
            self.violations.append(f"{where} but none of its runs failed: {states}")
        elif phase == Phase.CANCELLED and not self.fake.backfills[backfill_id]["is_paused"]:
            self.violations.append(f"{where} but the backfill was neither cancelled nor paused")

    # --- a pass -------------------------------------------------------------------------------------

    def reconcile(self) -> PassRecord:
        first_request, seq_before = len(self.requests), (self.events() or [None])[-1]
        start_seq = seq_before.seq if seq_before else 0
        self.calls, self.faulted, self.in_pass = 0, False, True
        client = self.bench.client(sleep=lambda _s: None, rng=lambda: 0.0)
        result: PassResult | None = None
        try:
            result = self.bench.reconciler(client=client).run_once()
            status = "ok"
        except Crash:
            status = "crash"
        except AirflowError as exc:  # exit 1: an API failure the pass could not absorb
            status = f"error:{type(exc).__name__}"
        finally:
            self.in_pass, self._pending_after = False, False
            self.crash = None  # a crash point belongs to one pass
            client.close()
        if status == "crash":
            self.bench.reopen_store()
        record = PassRecord(
            len(self.passes) + 1,
            status,
            result,
            self.requests[first_request:],
            [e for e in self.events() if e.seq > start_seq],
            self.faulted,
        )
        self.passes.append(record)
        return record
