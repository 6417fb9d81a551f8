"""Issue 44 against the real Apache Airflow 3.3.2 (the harness's): several teams, one Airflow. Two specs repositories
with disjoint scopes and their own logins (`operator` for team A, `admin` for team B: scripts/airflow-local) and their
own stores reconcile side by side; a spec outside its repository's scope is refused at validate and at reconcile; a
lost store adopts only its own team's backfills while the other login's identical backfill is owned elsewhere and
blocks the queue with its creator named; a reconciler whose scope overlaps another login's in the same store is
refused (exit 2)."""

from __future__ import annotations

import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, timedelta
from pathlib import Path

import pytest

from controller.adapters.airflow import AirflowClient
from controller.adapters.store import Store
from controller.commands.reconcile.reconciler import Reconciler
from controller.core.model.airflow import BackfillRequest
from controller.core.model.secret import Secret
from controller.core.model.spec import parse_date
from tests.commands.reconcile.harness import Bench

# days of their own on every run (a kept Airflow has run others on these DAGs)
FIRST = date(2013, 1, 1) + timedelta(days=8 * secrets.randbelow(400))
SCOPE_A = 'version: 1\nrequire_reviewed_merge: false\nscope: {dags: ["demo_daily", "demo_slow"]}\n'
SCOPE_B = 'version: 1\nrequire_reviewed_merge: false\nscope: {dags: ["demo_hourly"]}\n'


class Team:
    """A team: its specs repository (a bench folder), its own store and its own Airflow login."""

    def __init__(self, root: Path, url: str, login: str, policy: str) -> None:
        self.bench = Bench(root, url=url)
        self.bench.policy(policy)
        self.login = login
        self.client = self.connect()

    def connect(self) -> AirflowClient:
        client = AirflowClient(self.bench.url, username=self.login, password=Secret(self.login))
        client.preflight()  # as the CLI does: the token (and its `sub`, the login) is known before the first pass
        self.bench.clients.append(client)
        return client

    def reconciler(self, store: Store | None = None) -> Reconciler:
        return Reconciler(self.bench.settings(), store or self.bench.store, self.client, sleep=lambda _s: None)

    def cli(self, *args: str, store_url: str | None = None) -> subprocess.CompletedProcess[str]:
        env = self.bench.cli_env(
            BACKFILLCTL_SPECS_DIR="specs",
            BACKFILLCTL_AIRFLOW_USERNAME=self.login,
            BACKFILLCTL_AIRFLOW_PASSWORD=self.login,
            BACKFILLCTL_STORE_URL=store_url or self.bench.store_url,
            BACKFILLCTL_ALLOW_ADMIN_IDENTITY="1",
        )
        return subprocess.run([sys.executable, "-m", "controller", *args], cwd=self.bench.root, env=env,
                              capture_output=True, text=True, check=False, timeout=180)  # fmt: skip


@contextmanager
def teams(tmp_path: Path, url: str) -> Iterator[tuple[Team, Team]]:
    a = Team(tmp_path / "team-a", url, "operator", SCOPE_A)
    b = Team(tmp_path / "team-b", url, "admin", SCOPE_B)
    try:
        yield a, b
    finally:  # never leave a backfill of this test running
        for dag in ("demo_daily", "demo_slow", "demo_hourly"):
            for made in b.client.list_backfills(dag):
                if made.active and made.from_date.date() >= FIRST:
                    b.client.cancel(made.id)
        a.bench.close()
        b.bench.close()


def day(n: int) -> str:
    return str(FIRST + timedelta(days=n))


@pytest.mark.airflow
def test_two_teams_reconcile_side_by_side_and_never_take_each_others_backfills(
    tmp_path: Path, airflow_url: str
) -> None:
    with teams(tmp_path, airflow_url) as (a, b):
        # side by side: each team's own spec, its own store, its own login
        a.bench.spec("a-daily", dag="demo_daily", start=day(0), end=day(1), mar=2)
        b.bench.spec("b-hourly", dag="demo_hourly", start=day(0), end=f"{day(0)}T03:00:00+00:00", mar=2)
        made_a, made_b = a.reconciler().run_once(), b.reconciler().run_once()
        assert [(i.spec, o) for i, o in made_a.applied] == [("a-daily", "created")]
        assert [(i.spec, o) for i, o in made_b.applied] == [("b-hourly", "created")]
        (bound_a,) = a.bench.store.bindings().values()
        (bound_b,) = b.bench.store.bindings().values()
        assert (bound_a.dag_id, bound_b.dag_id) == ("demo_daily", "demo_hourly")
        assert b.bench.store.recorded_scopes() == {"admin": '{"dags": ["demo_hourly"], "tags": []}'}
        assert a.bench.store.recorded_scopes() == {"operator": '{"dags": ["demo_daily", "demo_slow"], "tags": []}'}

        # a spec outside its repository's scope: refused at validate (located, naming the scope) and at reconcile
        b.bench.spec("b-strays", dag="demo_daily", start=day(2), end=day(3), mar=1)
        checked = b.cli("validate", "specs/b-strays.yaml")
        assert (checked.returncode, checked.stdout) == (
            1,
            "specs/b-strays.yaml:3:9: $.dag_id: DAG demo_daily is outside this repository's scope (dags "
            "[demo_hourly]; specs/policy.yaml)\n"
            "  hint: a spec may touch only the DAGs of its repository's scope (policy `scope`): another team's DAG is "
            "backfilled from that team's specs repository, or widen `scope` in a reviewed policy change\n"
            "1 error, 0 warnings in 2 files including the policy specs/policy.yaml.\n",
        )
        strays = b.reconciler().run_once()
        (item,) = [i for i in strays.plan.items if i.spec == "b-strays"]
        assert (item.kind.value, item.phase.value) == ("blocked", "Blocked")
        assert "DAG demo_daily is outside this repository's scope (dags [demo_hourly]; " in item.reason
        assert strays.applied == []
        audited = [e.entry for e in b.bench.events("b-strays")]
        assert audited
        assert all("outside this repository's scope" in (e.message or "") for e in audited)
        assert not [x for x in b.client.list_backfills("demo_daily") if x.from_date.date() == FIRST + timedelta(2)]
        (b.bench.specs / "b-strays.yaml").unlink()

        # team B's login makes a backfill identical to team A's next spec, and it is running (paused: still active)
        a.bench.spec("a-slow", dag="demo_slow", start=day(4), end=day(5), mar=1)
        request = BackfillRequest("demo_slow", parse_date(day(4)), parse_date(day(5)), "none", 1)
        theirs = b.client.create(request)
        b.client.pause(theirs.id)
        for _ in range(30):  # team A's own backfill finishes (two quick runs)
            if not any(x.active for x in a.client.list_backfills("demo_daily") if x.id == bound_a.backfill_id):
                break
            time.sleep(2)

        # team A loses its store: a new one adopts team A's backfill only; team B's identical one is owned elsewhere
        lost = Store(f"sqlite:///{tmp_path}/team-a-new.db")
        try:
            adopted = a.reconciler(lost).run_once()
            phases = {i.spec: (i.kind.value, i.phase.value, i.reason, i.backfill_id) for i in adopted.plan.items}
            assert phases["a-daily"][0] == "adopt"
            assert phases["a-daily"][3] == bound_a.backfill_id
            assert phases["a-slow"] == (
                "wait",
                "Queued",
                f"queued behind a backfill owned elsewhere (created by admin) (backfill #{theirs.id})",
                None,
            )
            messages = sorted(f.message for f in adopted.plan.findings if f.backfill_id == theirs.id)
            assert messages == [
                f"backfill #{theirs.id} owned elsewhere (created by admin) blocks this DAG's queue; backfillctl "
                "never touches it",
                f"backfill #{theirs.id} owned elsewhere (created by admin) has the parameters of spec a-slow: not "
                "adopted, it is another controller's (this controller adopts only the backfills its own Airflow login "
                "made)",
            ]
            assert {x.spec_name for x in lost.bindings().values() if x.backfill_id == theirs.id} == set()
            assert b.client.get_backfill(theirs.id).is_paused  # never touched
        finally:
            lost.close()

        # status names it too (the queued spec's reason, through the CLI and its own login)
        shown = a.cli("status", store_url=f"sqlite:///{tmp_path}/team-a-new.db")
        assert f"queued behind a backfill owned elsewhere (created by admin) (backfill #{theirs.id})" in shown.stdout

        # one store per team: team B's login with an overlapping scope is refused by team A's store (exit 2)
        b.bench.policy('version: 1\nrequire_reviewed_merge: false\nscope: {dags: ["demo_*"]}\n')
        refused = b.cli("reconcile", "--once", store_url=a.bench.store_url)
        assert refused.returncode == 2, refused.stderr
        assert (
            "this store already reconciles for Airflow login 'operator', whose scope overlaps this reconciler's "
            "(login 'admin', scope dags [demo_*] in specs/policy.yaml): both may touch dags demo_* and demo_daily"
        ) in refused.stderr
        assert "point BACKFILLCTL_STORE_URL at this team's own store" in refused.stderr
        assert "admin" not in a.bench.store.recorded_scopes()
