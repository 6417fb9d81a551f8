"""Least privilege (issue 26) against the real Apache Airflow 3.3.2: the preflight warns when backfillctl's identity
is an admin (SimpleAuthManager's role, from the token it issues), and a `user`-role identity (the harness's
`operator`, scripts/airflow-local) can do all that reconcile does: dry run, create, pause, unpause, cancel, list
backfills and runs (docs/least-privilege.md). Where the token carries no role (other auth managers), one read of
connections tells whether the identity may do more than it needs (tested on a fake: the harness runs
SimpleAuthManager only)."""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path

import httpx
import pytest

from controller.adapters.airflow import AirflowClient
from controller.commands.reconcile.reconciler import Reconciler
from controller.core.model.secret import Secret
from tests.commands.reconcile.harness import real_bench
from tests.support.logcheck import untimed

ADMIN_WARNING = (  # a log line (its time taken away by `untimed`)
    "warning: least privilege: Airflow identity 'admin' has SimpleAuthManager's role 'admin' (its token says so); "
    "backfillctl needs only 'user' (read DAGs and runs; create, pause, unpause and cancel backfills), and 'admin' "
    "also manages connections, pools, variables, assets, the configuration and every other resource: give "
    "backfillctl its own login with the role 'user' (docs/least-privilege.md)\n"
)
# days of its own on every run (a kept Airflow has run others on demo_slow)
FIRST = date(2012, 1, 1) + timedelta(days=4 * secrets.randbelow(500))


@pytest.mark.airflow
def test_the_preflight_warns_an_admin_identity_and_not_a_user_one(
    tmp_path: Path, airflow_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("BACKFILLCTL_ALLOW_ADMIN_IDENTITY")  # tests/conftest.py silences it for the other tests
    with real_bench(tmp_path, airflow_url) as bench:
        bench.spec("fine", dag="demo_daily")
        # admin's token, not its password: the harness's password `admin` is a secret, redacted from every log line
        # wherever it appears, and the warning names the identity `admin`
        answer = httpx.post(f"{airflow_url}/auth/token", json={"username": "admin", "password": "admin"}, timeout=30)
        login = ("BACKFILLCTL_AIRFLOW_USERNAME", "BACKFILLCTL_AIRFLOW_PASSWORD")
        token = {k: v for k, v in bench.cli_env(BACKFILLCTL_SPECS_DIR="specs").items() if k not in login}
        token["BACKFILLCTL_AIRFLOW_TOKEN"] = answer.json()["access_token"]
        admin = subprocess.run([sys.executable, "-m", "controller", "validate"], cwd=bench.root, env=token,
                               capture_output=True, text=True, check=False)  # fmt: skip
        assert (admin.returncode, admin.stdout, untimed(admin.stderr)) == (
            0,
            "OK: 1 spec valid (1 file, 0 warnings).\n",
            ADMIN_WARNING,
        )
        login = {"BACKFILLCTL_AIRFLOW_USERNAME": "operator", "BACKFILLCTL_AIRFLOW_PASSWORD": "operator"}
        user = bench.cli_env(BACKFILLCTL_SPECS_DIR="specs", **login)
        done = subprocess.run(
            [sys.executable, "-m", "controller", "validate"],
            cwd=bench.root,
            env=user,
            capture_output=True,
            text=True,
            check=False,
        )
        assert (done.returncode, done.stdout, done.stderr) == (0, "OK: 1 spec valid (1 file, 0 warnings).\n", "")
        known = bench.cli_env(BACKFILLCTL_SPECS_DIR="specs", BACKFILLCTL_ALLOW_ADMIN_IDENTITY="1")
        quiet = subprocess.run([sys.executable, "-m", "controller", "validate"], cwd=bench.root, env=known,
                               capture_output=True, text=True, check=False)  # fmt: skip
        assert (quiet.returncode, quiet.stderr) == (0, "")  # the admin is known: not said again


@pytest.mark.airflow
def test_a_user_role_identity_reconciles_create_pause_unpause_cancel(tmp_path: Path, airflow_url: str) -> None:
    """Every mutating call reconcile makes, as SimpleAuthManager's `user`, each with its audited outcome and its
    effect in Airflow; the reads (backfills, runs) too."""
    with real_bench(tmp_path, airflow_url, "demo_slow") as bench:
        client = AirflowClient(airflow_url, username="operator", password=Secret("operator"))
        bench.clients.append(client)
        client.preflight()
        assert dict(client.token_claims() or {})["role"] == "user"
        reconciler = Reconciler(bench.settings(), bench.store, client, sleep=lambda _s: None)
        last = FIRST + timedelta(days=3)

        def state(value: str) -> list[tuple[str, str]]:
            bench.spec("as-user", dag="demo_slow", start=str(FIRST), end=str(last), mar=1, reprocess="completed",
                       state=value, expected_runs=4)  # fmt: skip
            result = reconciler.run_once()
            assert (result.errors, result.refused) == ([], [])
            return [(item.kind.value, outcome) for item, outcome in result.applied]

        try:
            assert state("active") == [("create", "created")]
            (binding,) = bench.store.bindings().values()
            assert binding.backfill_id is not None
            backfill = client.get_backfill(binding.backfill_id)
            assert (backfill.dag_id, backfill.is_paused, backfill.active) == ("demo_slow", False, True)
            assert [b.id for b in client.list_backfills("demo_slow") if b.active] == [binding.backfill_id]
            assert state("paused") == [("pause", "done")]
            assert client.get_backfill(binding.backfill_id).is_paused
            assert state("active") == [("unpause", "done")]
            assert not client.get_backfill(binding.backfill_id).is_paused
            assert state("cancelled") == [("cancel", "done")]
            assert not client.get_backfill(binding.backfill_id).active
            assert len(client.dag_runs("demo_slow", *_range(FIRST, last))) == 4  # the outcome's read of the runs
        finally:  # real_bench cancels after a passing test only: never leave this one running on a failure
            for made in client.list_backfills("demo_slow"):
                if made.active and made.id in {b.backfill_id for b in bench.store.bindings().values()}:
                    client.cancel(made.id)
        trail = bench.trail("as-user")
        assert trail[:8] == [
            ("create", "intent", None),
            ("create", "outcome", "created"),
            ("pause", "intent", None),
            ("pause", "outcome", "done"),
            ("unpause", "intent", None),
            ("unpause", "outcome", "done"),
            ("cancel", "intent", None),
            ("cancel", "outcome", "done"),
        ]
        # then what the cancel's pass saw: Cancelled, or the `still-running` finding of a run that started before
        # the pause (cancel fails only queued runs)
        assert [(a, p) for a, p, _ in trail[8:]] in ([("observe", "observation")], [("finding", "observation")])


def _range(first: date, last: date) -> tuple[datetime, datetime]:
    return datetime.combine(first, time(), UTC), datetime.combine(last, time(), UTC)


@pytest.mark.airflow
def test_a_viewer_login_is_enough_for_status_even_of_a_spec_refused_ahead(tmp_path: Path, airflow_url: str) -> None:
    """On-call reads `status` with SimpleAuthManager's `viewer` (the harness's `watcher`), which Airflow refuses a
    dry run (403): status says what reconcile judged of a queued spec, with its time, and makes no dry run."""
    with real_bench(tmp_path, airflow_url, "demo_slow") as bench:
        last = FIRST + timedelta(days=2)
        bench.spec("a-head", dag="demo_slow", start=str(FIRST), end=str(last), mar=1, reprocess="completed",
                   expected_runs=3)  # fmt: skip
        later = (str(last + timedelta(days=1)), str(last + timedelta(days=3)))  # its own days: none in flight
        bench.spec("b-behind", dag="demo_slow", start=later[0], end=later[1], mar=1, reprocess="completed",
                   expected_runs=1)  # fmt: skip
        done = bench.cli("reconcile", "--once")  # as admin: creates a-head, judges b-behind once (queued by name)
        assert done.returncode == 0, done.stderr
        viewer = bench.cli_env(BACKFILLCTL_SPECS_DIR="specs", BACKFILLCTL_AIRFLOW_USERNAME="watcher",
                               BACKFILLCTL_AIRFLOW_PASSWORD="watcher")  # fmt: skip
        with AirflowClient(airflow_url, username="watcher", password=Secret("watcher")) as client:
            client.preflight()
            assert dict(client.token_claims() or {})["role"] == "viewer"
        shown = subprocess.run([sys.executable, "-m", "controller", "status", "--format", "json"], cwd=bench.root,
                               env=viewer, capture_output=True, text=True, check=False)  # fmt: skip
        assert shown.returncode == 0, shown.stderr
        assert "403" not in shown.stderr
        (row,) = [r for r in json.loads(shown.stdout)["specs"] if r["spec"] == "b-behind"]
        ahead = bench.store.bindings()["b-behind"].ahead
        assert ahead is not None
        assert (row["phase"], row["refused_at_head"]) == (
            "Queued",
            f"the dry run counts 3 runs; expected_runs is 1 (dry run at {ahead.at}; the specs ahead may change the "
            "count by then)",
        )
