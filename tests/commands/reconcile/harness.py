"""The whole-controller test bench: a specs folder, a SQLite store and a client on the fake (or real) Airflow.

The one harness of the reconcile tests: the R18 state machine's `World` (reconcile_world.py) is a Bench too, opened
with the seams it needs (a git repository, a store class counting writes, a wire in front of the fake, one clock).
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from controller.adapters.airflow import AirflowClient
from controller.adapters.store import Store
from controller.commands.reconcile.reconciler import PassResult, Reconciler
from controller.commands.runtime import session
from controller.commands.runtime.settings import Settings
from controller.core.audit.chain import AuditRecord
from controller.core.model.capabilities import newest
from controller.core.model.secret import Secret
from controller.core.rules.retrying import Backoff
from tests.fakes.airflow import FakeAirflow

SPEC = """\
version: 1
name: {name}
dag_id: {dag}
from_date: "{start}"
to_date: "{end}"
reprocess_behavior: {reprocess}
max_active_runs: {mar}
ticket: CHG-1
reason: A test backfill for reconcile.
requested_by: alice
approvers: [bob]
"""
# reconcile's first line on a bench's folder, a warning (its time taken away by `tests.support.logcheck.untimed`): it
# is no git repository, so nothing is committed to apply instead
NOT_GIT = "warning: not in a git repository: the spec files are applied as they are on disk, unreviewed\n"
EPOCH = datetime(2026, 1, 1, tzinfo=UTC)  # a git bench's first commit; each later one a second after the last


class Bench:
    def __init__(
        self,
        root: Path,
        *,
        url: str = "http://fake-airflow",
        fake: FakeAirflow | None = None,
        store_url: str = "",
        open_store: Callable[[str], Store] | None = None,
        clock: Callable[[], datetime] | None = None,
        wire: Callable[[httpx.Request], httpx.Response] | None = None,
        git: bool = False,
        actor: str = "ci-bot",
    ) -> None:
        """`open_store` opens the store from its URL (default: the real one, on `clock`); `clock` is also the
        reconciler's; `wire` takes every request of `client()` instead of the fake (faults, crash points); `git`
        makes `root` a repository that `commit()` records the folder in."""
        self.root, self.url = root, url
        self.fake = fake
        self.specs = root / "specs"
        self.specs.mkdir(parents=True, exist_ok=True)
        self.store_url = store_url or f"sqlite:///{root}/state.db"
        self.clock, self.wire, self.actor = clock, wire, actor
        self.open_store: Callable[[str], Store] = open_store or (partial(Store, clock=clock) if clock else Store)
        self.store = self.open_store(self.store_url)
        self.commits = 0
        if git:
            self.git("init", "-q", "-b", "main")
        self.clients: list[AirflowClient] = []
        self.sent: list[httpx.Request] = []  # every request any of its clients sent (what each release is asked)
        self.environ: dict[str, str] = {}  # the variables other environments' Airflows are named by (the policy)
        self.other_fakes: dict[str, FakeAirflow] = {}  # URL → another environment's fake Airflow
        self.max_concurrency = Settings().airflow_max_concurrency  # requests in flight, as the CLI's clients

    def close(self) -> None:
        for client in self.clients:
            client.close()
        self.store.close()

    def reopen_store(self) -> None:
        """A restarted process opens the store again."""
        self.store.close()
        self.store = self.open_store(self.store_url)

    def git(self, *args: str) -> None:
        """`git ARGS` in the bench's folder, as alice, dated by the commits so far (the same history every run)."""
        moment = (EPOCH + timedelta(seconds=self.commits)).isoformat()
        env = {
            **os.environ,
            "GIT_AUTHOR_NAME": "alice",
            "GIT_AUTHOR_EMAIL": "alice@example.com",
            "GIT_COMMITTER_NAME": "alice",
            "GIT_COMMITTER_EMAIL": "alice@example.com",
            "GIT_AUTHOR_DATE": moment,
            "GIT_COMMITTER_DATE": moment,
            "GIT_CONFIG_GLOBAL": os.devnull,
            "GIT_CONFIG_NOSYSTEM": "1",
        }
        subprocess.run(["git", *args], cwd=self.root, env=env, check=True, capture_output=True)

    def commit(self, message: str) -> None:
        """Everything in the folder, committed (an empty commit if nothing changed)."""
        self.commits += 1
        self.git("add", "-A", ".")
        self.git("commit", "-q", "--allow-empty", "-m", message)

    def spec(
        self,
        name: str,
        dag: str = "demo_daily",
        start: str = "2025-01-01",
        end: str = "2025-01-07",
        reprocess: str = "none",
        mar: int = 3,
        **extra: Any,
    ) -> Path:
        text = SPEC.format(name=name, dag=dag, start=start, end=end, reprocess=reprocess, mar=mar)
        text += "".join(f"{k}: {v}\n" for k, v in extra.items())
        path = self.specs / f"{name}.yaml"
        path.write_text(text)
        return path

    def policy(self, text: str) -> None:
        (self.specs / "policy.yaml").write_text(textwrap.dedent(text))

    def client(self, **connection: Any) -> AirflowClient:
        """A client on the bench's Airflow; `connection` overrides its options (`sleep`, `rng`, ...)."""
        transport: httpx.BaseTransport | None = self.fake.transport() if self.fake else None
        if self.wire is not None:
            transport = httpx.MockTransport(self.wire)
        # the CLI's preflight reads the version before a pass; the fake is 3.3.2 (a real server is asked)
        caps = newest() if self.fake else None
        options: dict[str, Any] = {"transport": transport, "max_concurrency": self.max_concurrency}
        client = AirflowClient(
            self.url, username="admin", password=Secret("admin"), capabilities=caps, **(options | connection)
        )
        client.transport.http.event_hooks["request"].append(self.sent.append)
        self.clients.append(client)
        return client

    def cli_env(self, **more: str) -> dict[str, str]:
        """The environment of a `backfillctl` subprocess on this bench's Airflow, store and specs."""
        return {
            **os.environ,
            "BACKFILLCTL_AIRFLOW_URL": self.url,
            "BACKFILLCTL_AIRFLOW_USERNAME": "admin",
            "BACKFILLCTL_AIRFLOW_PASSWORD": "admin",
            "BACKFILLCTL_STORE_URL": self.store_url,
            "BACKFILLCTL_SPECS_DIR": str(self.specs),
            "BACKFILLCTL_ACTOR": self.actor,
            **self.environ,
            **more,
        }

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """`backfillctl ARGS` in a subprocess, in the bench's folder (specs/ relative, as in a repository)."""
        return subprocess.run(
            [sys.executable, "-m", "controller", *args],
            cwd=self.root,
            env=self.cli_env(BACKFILLCTL_SPECS_DIR="specs"),
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )

    def settings(self) -> Settings:
        return Settings(
            specs_dir=self.specs, store_url=self.store_url, airflow_url=self.url, actor=self.actor, environ=self.environ
        )

    def connect(self, settings: Settings) -> AirflowClient:
        """Another environment's client, as the CLI's session opens it (its URL and login from `environ`)."""
        url = settings.airflow_address()
        other = self.other_fakes.get(url)
        client = AirflowClient(
            url,
            username=settings.airflow_username,
            password=settings.airflow_password,
            transport=other.transport() if other else None,
            capabilities=newest() if other else None,
            max_concurrency=settings.airflow_max_concurrency,
        )
        client.transport.http.event_hooks["request"].append(self.sent.append)
        self.clients.append(client)
        return client

    def reconciler(self, store: Store | None = None, *, client: AirflowClient | None = None) -> Reconciler:
        clocked = {"clock": self.clock} if self.clock else {}
        return Reconciler(
            self.settings(),
            store or self.store,
            client or self.client(),
            sleep=lambda _s: None,
            connect=self.connect,
            **clocked,
        )

    def run(self, **kwargs: Any) -> PassResult:
        return self.reconciler().run_once(**kwargs)

    def until_terminal(self, passes: int = 20, wait: Any = None) -> PassResult:
        for _ in range(passes):
            result = self.run()
            if result.settled:
                return result
            if wait:
                wait()
        raise AssertionError(f"not terminal after {passes} passes: {[(i.spec, i.phase) for i in result.plan.items]}")

    def events(self, spec: str | None = None) -> list[AuditRecord]:
        return [e for e in self.store.events() if spec is None or e.entry.spec_name == spec]

    def trail(self, spec: str) -> list[tuple[str, str, str | None]]:
        return [(e.entry.action, e.entry.phase, e.entry.outcome) for e in self.events(spec)]

    def phases(self, result: PassResult) -> dict[str, str]:
        return {i.spec: i.phase.value for i in result.current.items}


@contextmanager
def real_bench(root: Path, url: str, *dags: str) -> Iterator[Bench]:
    """A bench on a real Airflow that cancels, on exit, the backfills it left active on `dags`."""
    bench = Bench(root, url=url)
    try:
        yield bench
        with bench.client() as client:
            for backfill in (b for dag in dags for b in client.list_backfills(dag)):
                if backfill.active:
                    client.cancel(backfill.id)
    finally:
        bench.close()


def fake(bench: Bench) -> FakeAirflow:
    """The bench's fake Airflow (fault-injection tests drive its scheduler and faults by hand)."""
    assert bench.fake is not None
    return bench.fake


def mutating(requests: list[tuple[str, str]]) -> list[tuple[str, str]]:
    return [
        (m, p) for m, p in requests if m in ("POST", "PUT") and p not in ("/auth/token", "/api/v2/backfills/dry_run")
    ]


def count_calls(requests: list[tuple[str, str]]) -> Counter[str]:
    return Counter(f"{m} {p}" for m, p in requests)


def iter_runs(fake: FakeAirflow, dag: str) -> Iterator[dict[str, Any]]:
    return (r for (d, _), r in sorted(fake.runs.items(), key=lambda kv: kv[0][1]) if d == dag)


def in_process(bench: Bench, monkeypatch: pytest.MonkeyPatch) -> None:
    """`controller.cli.main` on this bench: its environment, and clients on its fake Airflow (no retry waits)."""
    transport = bench.fake.transport() if bench.fake else None

    def client(settings: Settings, *, preflight: bool = True, lists_dags: bool = False) -> AirflowClient:
        backoff = Backoff(base=0.0, cap=0.0, jitter=0.0, attempts=2)
        made = AirflowClient(
            bench.url,
            username="admin",
            password=Secret("admin"),
            transport=transport,
            backoff=backoff,
            sleep=lambda _s: None,
            max_concurrency=settings.airflow_max_concurrency,
        )
        if preflight:
            made.preflight(lists_dags=lists_dags)
        return made

    monkeypatch.setattr(session, "make_client", client)
    for name, value in bench.cli_env().items():
        if name.startswith("BACKFILLCTL_"):
            monkeypatch.setenv(name, value)
