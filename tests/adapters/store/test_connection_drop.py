"""A dropped store connection (PostgreSQL restarted, a connection killed) ends the pass cleanly; `--watch` retries.

Real PostgreSQL, with its connections killed mid-transaction (`tests.adapters.store.dropping`); the reconcile loop runs
on the fake Airflow, in-process as the reconcile tests' bench does, or as a `backfillctl` subprocess. Whatever
drops, the final state has one backfill per spec and an audit chain that verifies; a create whose outcome
could not be written is adopted by the next pass, never made again.
"""

from __future__ import annotations

import logging
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from controller.adapters.store import Store
from controller.cli import main
from controller.commands.loop.run import STORE_LOST_HINT, LoopOptions, Repeat, reconcile_loop
from controller.commands.reconcile.reconciler import PassResult, Reconciler
from controller.commands.runtime.session import Shutdown
from controller.errors import StoreUnavailable
from tests.adapters.store.conftest import throwaway_database
from tests.adapters.store.dropping import create_outcome, first, kill_connections, killing
from tests.commands.reconcile.harness import NOT_GIT, Bench, count_calls, fake, in_process
from tests.fakes.airflow import FakeAirflow
from tests.support.logcheck import TEXT_LINE, json_objects, untimed
from tests.support.receivers import SwitchableProxy

ROOT = Path(__file__).resolve().parents[3]
CANARY = "CANARY-pg-5ecret"  # the store URL's password (trust authentication ignores it): never shown
TOKEN = "fake.token-of-the-watch"
KILLED = "AdminShutdown: terminating connection due to administrator command"


class _Passes(Shutdown):
    """Stopped by the test; installs no signal handlers (pytest's own stay)."""

    def install(self) -> None:
        pass


@pytest.fixture(params=["postgresql"])  # in the test ids, as the store tests' other PostgreSQL ones
def pg_bench(tmp_path: Path, postgres_admin: str) -> Iterator[Bench]:
    """A bench on a throw-away PostgreSQL store whose URL carries a password."""
    with throwaway_database(postgres_admin) as url:
        bench = Bench(tmp_path, fake=FakeAirflow(), store_url=url.replace("postgres@", f"postgres:{CANARY}@"))
        try:
            bench.spec("first")
            bench.spec("second", dag="demo_hourly", end="2025-01-01")
            fake(bench).scheduler_running = False  # both stay running: every pass has them to observe
            yield bench
        finally:
            bench.close()


def shown(bench: Bench) -> str:
    return bench.store.safe_url


def one_backfill_per_spec(bench: Bench) -> None:
    """What any drop leaves: each spec's one backfill, one POST each, and a chain that verifies."""
    assert Counter(b["dag_id"] for b in fake(bench).backfills.values()) == {"demo_daily": 1, "demo_hourly": 1}
    assert count_calls(fake(bench).requests)["POST /api/v2/backfills"] == 2
    assert bench.trail("first")[:3] == [
        ("create", "intent", None),
        ("create", "outcome", "recovered-after-ambiguous"),  # the lost answer's outcome, then its adoption
        ("adopt", "observation", "adopted"),
    ]
    assert bench.trail("second")[:2] == [("create", "intent", None), ("create", "outcome", "created")]
    assert bench.store.verify().ok
    assert CANARY not in str([e.entry for e in bench.events()])


@pytest.fixture
def restart(postgres_admin: str, pg_bench: Bench) -> Iterator[Callable[[], None]]:
    """Call it to kill the store database's connections and make it refuse new ones for 2 s (as while PostgreSQL
    restarts); it returns once they are killed."""
    database = pg_bench.store_url.rsplit("/", 1)[1]
    reopened: list[threading.Timer] = []

    def allow(value: bool) -> None:
        with psycopg.connect(postgres_admin, autocommit=True) as conn:
            conn.execute(f"ALTER DATABASE {database} ALLOW_CONNECTIONS {str(value).lower()}")

    def down() -> None:
        allow(False)
        kill_connections(postgres_admin, pg_bench.store_url)
        reopened.append(threading.Timer(2.0, allow, (True,)))  # the first retry (after 1 s) finds it closed
        reopened[-1].start()

    yield down
    for timer in reopened:
        timer.join(30)


def test_a_watch_goes_on_when_the_store_drops_between_a_creates_intent_and_outcome_and_while_it_restarts(
    pg_bench: Bench,
    postgres_admin: str,
    restart: Callable[[], None],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    in_process(pg_bench, monkeypatch)
    stop, passes = _Passes(), list[PassResult]()

    def on_pass(result: PassResult) -> None:
        passes.append(result)
        stop.requested = len(passes) == 3

    def restarting(statement: str, _parameters: Any) -> bool:  # the third pass's first read: the database goes away
        return len(passes) == 2 and "FROM bindings" in statement

    caplog.set_level(logging.WARNING, logger="controller.commands.loop.run")
    drop = first(create_outcome)  # the first pass: between the create's intent and its outcome
    with (
        killing(postgres_admin, pg_bench.store_url, drop),
        killing(postgres_admin, pg_bench.store_url, first(restarting), then=restart),
    ):
        end = reconcile_loop(pg_bench.settings(), LoopOptions(Repeat.WATCH, interval=1.5), on_pass, stop)
    retries = [r.getMessage() for r in caplog.records if r.name == "controller.commands.loop.run"]
    store = shown(pg_bench)
    assert retries[:2] == [
        f"attempt #1 failed; will retry in 1.0s: store {store}: writing the audit event create/outcome "
        f"failed: {KILLED}",
        f"attempt #1 failed; will retry in 1.0s: store {store}: reading bindings failed: {KILLED}",
    ]
    refused = rf"attempt #2 failed; will retry in 1\.5s: store {re.escape(store)}: .* failed: OperationalError: .*" + (
        "is not currently accepting connections"
    )
    assert [re.fullmatch(refused, line) is not None for line in retries[2:]] == [True]
    assert [len(p.applied) for p in passes] == [2, 0, 0]  # the adoption and the second create, in one pass
    assert end.last is passes[-1]
    assert [i.phase.value for i in end.last.current.items] == ["Running", "Running"]
    one_backfill_per_spec(pg_bench)


def test_once_exits_1_naming_the_store_and_the_next_pass_adopts_what_the_dropped_one_created(
    pg_bench: Bench, postgres_admin: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    in_process(pg_bench, monkeypatch)
    with killing(postgres_admin, pg_bench.store_url, first(create_outcome)):
        assert main(["reconcile", "--once"]) == 1
    out, err = capsys.readouterr()
    assert untimed(err) == (
        f"{NOT_GIT}error: store {shown(pg_bench)}: writing the audit event create/outcome failed: {KILLED}\n"
        f"  hint: {STORE_LOST_HINT}\n"
    )
    assert "postgres:***@127.0.0.1" in err
    assert CANARY not in out + err
    assert pg_bench.trail("first") == [("create", "intent", None)]  # the outcome was never written
    assert main(["reconcile", "--once"]) == 0
    one_backfill_per_spec(pg_bench)
    capsys.readouterr()
    assert main(["audit", "verify"]) == 0
    assert capsys.readouterr().out.startswith("OK: ")


def test_an_unreachable_postgresql_is_store_unavailable_with_the_message_it_had() -> None:
    with pytest.raises(StoreUnavailable) as raised:
        Store(f"postgresql://ops:{CANARY}@127.0.0.1:9/store")
    assert raised.value.message.startswith(
        "store postgresql+psycopg://ops:***@127.0.0.1:9/store: reading the schema revision failed: OperationalError: "
        "connection failed:"
    )
    assert raised.value.hint == "check BACKFILLCTL_STORE_URL and that the database is reachable"


def test_a_pooled_connection_killed_while_idle_is_replaced_unseen(pg_bench: Bench, postgres_admin: str) -> None:
    pg_bench.store.bindings()
    assert kill_connections(postgres_admin, pg_bench.store_url) >= 1
    assert pg_bench.store.bindings() == {}  # the engine pings a connection before lending it


# --- a backfillctl subprocess: every stderr line a JSON object, or a text line with its time -------------------


def watch_in_a_subprocess(bench: Bench, admin: str, log_format: str) -> tuple[str, int]:
    """`backfillctl [--log-format F] reconcile --watch --interval 1`, its store dropped at the first create's
    outcome and killed again from outside later; stopped with SIGTERM once both specs are recorded and a pass
    ran after the second kill. Returns its stderr and exit code."""
    proxy = SwitchableProxy("http://fake-airflow", transport=bench.fake.transport() if bench.fake else None)
    err = bench.root / "stderr.log"
    login = ("BACKFILLCTL_AIRFLOW_USERNAME", "BACKFILLCTL_AIRFLOW_PASSWORD")  # "admin" would be redacted from
    env = {k: v for k, v in bench.cli_env().items() if k not in login}  # "administrator command": a token instead
    fake(bench).tokens.add(TOKEN)
    env |= {"BACKFILLCTL_AIRFLOW_URL": proxy.url, "BACKFILLCTL_AIRFLOW_TOKEN": TOKEN, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-m", "tests.adapters.store.dropping", admin, bench.store_url, "create-outcome"]
    formats = ["--log-format", log_format] if log_format == "json" else []
    try:
        with err.open("w") as sink:
            watcher = subprocess.Popen(
                [*command, *formats, "reconcile", "--watch", "--interval", "1"], env=env, cwd=bench.root, stderr=sink
            )
            try:
                _until(lambda: ("adopt", "observation", "adopted") in bench.trail("first"))
                kill_connections(admin, bench.store_url)  # idle: the next pass gets fresh connections
                seen = len(bench.events())
                bench.spec("third", dag="demo_flaky", end="2025-01-02")
                _until(lambda: len(bench.events()) > seen)  # a pass after the kill made the third spec's create
                watcher.send_signal(signal.SIGTERM)
                code = watcher.wait(timeout=60)
            finally:
                if watcher.poll() is None:
                    watcher.kill()
                    watcher.wait(timeout=30)  # reaped here, never a ResourceWarning in a later test
    finally:
        proxy.close()
    return err.read_text(), code


# the kill from outside lands between passes on an idle machine (the pool replaces a dead idle connection unseen);
# on a busy one it may hit a pass mid-read: that pass fails and is retried, said the same way
LATER_KILL = re.compile(r"attempt #1 failed; will retry in 1\.0s: store \S+: .+")  # whatever the pass was doing


def _until(done: Any, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not _asked(done):
        assert time.monotonic() < deadline, "the watch did not get there in time"
        time.sleep(0.2)


def _asked(done: Any) -> bool:
    """The test's own reads go through a store connection the same kills end (mid-read on a busy machine): not yet."""
    try:
        return bool(done())
    except StoreUnavailable:
        return False


def test_a_watch_subprocess_logs_the_retry_as_one_json_object_per_line(pg_bench: Bench, postgres_admin: str) -> None:
    stderr, code = watch_in_a_subprocess(pg_bench, postgres_admin, "json")
    assert code == 0, stderr
    logged = json_objects(stderr)  # every line
    retries = [o for o in logged if o["event"].startswith("attempt #")]
    assert [(o["level"], o["logger"], o["event"]) for o in retries[:1]] == [
        (
            "warning",
            "controller.commands.loop.run",
            f"attempt #1 failed; will retry in 1.0s: store {shown(pg_bench)}: writing the audit event create/outcome "
            f"failed: {KILLED}",
        )
    ]
    assert all(LATER_KILL.fullmatch(o["event"]) for o in retries[1:]), retries  # the outside kill hit a busy pass
    assert [o["event"] for o in logged if o["event"].startswith("adopt ")] == ["adopt first: adopted"]
    assert all(re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", o["time"]) for o in logged)
    assert CANARY not in stderr
    assert TOKEN not in stderr
    assert Counter(b["dag_id"] for b in fake(pg_bench).backfills.values()) == {
        "demo_daily": 1,
        "demo_hourly": 1,
        "demo_flaky": 1,
    }
    assert pg_bench.store.verify().ok


def test_a_watch_subprocess_logs_the_retry_as_a_text_line_with_its_time(pg_bench: Bench, postgres_admin: str) -> None:
    stderr, code = watch_in_a_subprocess(pg_bench, postgres_admin, "text")
    assert code == 0, stderr
    lines = stderr.splitlines()
    assert all(TEXT_LINE.fullmatch(line) for line in lines), stderr
    said = untimed(stderr).splitlines()
    assert said[:2] == [
        NOT_GIT.rstrip("\n"),
        f"warning: attempt #1 failed; will retry in 1.0s: store {shown(pg_bench)}: writing the audit event "
        f"create/outcome failed: {KILLED}",
    ]
    assert all(LATER_KILL.fullmatch(line.removeprefix("warning: ")) for line in said[2:]), said
    assert Counter(b["dag_id"] for b in fake(pg_bench).backfills.values())["demo_daily"] == 1


# --- the retry schedule (the fake Airflow, SQLite: the store is lost on purpose) ---------------------------------

LOST = "store sqlite:///x: reading bindings failed: OperationalError: unable to open database file"


class _Waits(_Passes):
    """Records each wait of the loop instead of sleeping (and stops during the `stop_at`-th, if given)."""

    def __init__(self, stop_at: int | None = None) -> None:
        super().__init__()
        self.waits: list[float] = []
        self.stop_at = stop_at

    def wait(self, seconds: float, sleep: Any = None) -> None:
        self.waits.append(seconds)
        self.requested = self.requested or len(self.waits) == self.stop_at


@pytest.fixture
def losing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Bench, list[bool]]]:
    """A bench whose passes lose the store as the list says (True: lost, False: a real pass), in order."""
    bench = Bench(tmp_path, fake=FakeAirflow())
    bench.spec("fine")
    in_process(bench, monkeypatch)
    script: list[bool] = []
    real = Reconciler.run_once

    def run_once(self: Reconciler, **kwargs: Any) -> PassResult:
        if script.pop(0):
            raise StoreUnavailable(LOST, hint="the adapter's own hint")
        return real(self, **kwargs)

    monkeypatch.setattr(Reconciler, "run_once", run_once)
    yield bench, script
    bench.close()


def test_the_retries_wait_1_2_4_s_up_to_the_interval_and_start_over_after_a_pass(
    losing: tuple[Bench, list[bool]], caplog: pytest.LogCaptureFixture
) -> None:
    bench, script = losing
    script += [True] * 5 + [False] + [True] + [False]
    stop, passes = _Waits(), list[PassResult]()

    def on_pass(result: PassResult) -> None:
        passes.append(result)
        stop.requested = len(passes) == 2

    caplog.set_level(logging.WARNING, logger="controller.commands.loop.run")
    reconcile_loop(bench.settings(), LoopOptions(Repeat.WATCH, interval=5.0), on_pass, stop)
    assert stop.waits == [1.0, 2.0, 4.0, 5.0, 5.0, 5.0, 1.0]  # the sixth: the interval after the first pass
    assert [r.getMessage() for r in caplog.records if r.name == "controller.commands.loop.run"] == [
        f"attempt #{n} failed; will retry in {delay:.1f}s: {LOST}"
        for n, delay in [(1, 1), (2, 2), (3, 4), (4, 5), (5, 5), (1, 1)]
    ]
    assert len(passes) == 2


@pytest.mark.parametrize(
    ("options", "stop_at"),
    [
        (LoopOptions(Repeat.ONCE), None),
        (LoopOptions(Repeat.WATCH, dry_run=True), None),
        (LoopOptions(Repeat.UNTIL_COMPLETE, interval=30.0, timeout=0.5), None),  # the next attempt is past the deadline
        (LoopOptions(Repeat.WATCH, interval=30.0), 1),  # SIGTERM while waiting for the store
    ],
    ids=["once", "dry-run", "until-complete-deadline", "stopped-while-waiting"],
)
def test_without_a_next_attempt_the_pass_ends_with_the_store_named_and_nothing_half_applied(
    losing: tuple[Bench, list[bool]], options: LoopOptions, stop_at: int | None
) -> None:
    bench, script = losing
    script += [True, True]
    stop = _Waits(stop_at)
    with pytest.raises(StoreUnavailable) as raised:
        reconcile_loop(bench.settings(), options, lambda _r: None, stop)
    assert (raised.value.message, raised.value.hint) == (LOST, STORE_LOST_HINT)
    assert stop.waits == ([1.0] if stop_at else [])
