"""Failure paths against the real Apache Airflow 3.3.2: lost answers, wrong credentials.

Dates in 2021 on demo_flaky (odd days fail) so these tests share the session's Airflow with the others.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from controller.adapters.airflow import AirflowClient
from controller.commands.reconcile.reconciler import Reconciler
from controller.core.model.airflow import BackfillRequest, summarise
from controller.core.model.secret import Secret
from tests.commands.reconcile.harness import Bench
from tests.commands.reconcile.proxy import LosingProxy
from tests.fakes.calls import record_calls

pytestmark = pytest.mark.airflow
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def bench(tmp_path: Path, airflow_url: str) -> Iterator[Bench]:
    b = Bench(tmp_path, url=airflow_url)
    yield b
    with b.client() as client:
        for backfill in client.list_backfills("demo_flaky"):
            if backfill.active:
                client.cancel(backfill.id)
    b.close()


def test_lost_create_answer_is_adopted_and_its_outcome_comes_from_the_runs(bench: Bench, airflow_url: str) -> None:
    """The create reaches Airflow, its answer is lost until the backfill has completed (2 of 4 runs failed).

    Before: adopted as `Succeeded`, 0 runs, never observed again. Now: adopted, then its phase comes from its runs.
    """
    bench.spec("lost-answer", dag="demo_flaky", start="2021-06-01", end="2021-06-04", mar=4)
    watcher = bench.client()

    def completed(created: dict[str, Any]) -> bool:
        return watcher.get_backfill(int(created["id"])).completed_at is not None

    with LosingProxy(airflow_url, ("POST", "/api/v2/backfills"), completed) as proxy:
        client = AirflowClient(proxy.url, username="admin", password=Secret("admin"), timeout=240)
        settings = bench.settings()
        reconciler = Reconciler(settings, bench.store, client, sleep=lambda _s: None)
        result = reconciler.run_once()
        client.close()
    (lost,) = proxy.lost
    assert [(i.spec, o) for i, o in result.applied] == [("lost-answer", "recovered-after-ambiguous")]
    assert proxy.seen.count(("POST", "/api/v2/backfills")) == 1  # observed before any second create
    assert bench.phases(result) == {"lost-answer": "CompletedWithFailures"}
    (item,) = result.current.items
    assert item.backfill_id == lost["id"]
    assert item.reason == "failed: 2021-06-01, 2021-06-03"
    assert item.facts["runs"]["counts"] == {"failed": 2, "success": 2}
    assert bench.trail("lost-answer") == [
        ("create", "intent", None),
        ("create", "outcome", "recovered-after-ambiguous"),
        ("observe", "observation", "CompletedWithFailures"),
    ]
    assert bench.store.verify().ok


def test_wrong_token_is_one_error_with_the_credentials_hint(tmp_path: Path, airflow_url: str) -> None:
    canary = "bad-token-" + "x" * 24
    (tmp_path / "specs").mkdir()
    env = {
        **os.environ,
        "BACKFILLCTL_AIRFLOW_URL": airflow_url,
        "BACKFILLCTL_AIRFLOW_TOKEN": canary,
        "BACKFILLCTL_SPECS_DIR": str(tmp_path / "specs"),
        "BACKFILLCTL_STORE_URL": f"sqlite:///{tmp_path}/state.db",
    }
    env.pop("BACKFILLCTL_AIRFLOW_USERNAME", None)
    env.pop("BACKFILLCTL_AIRFLOW_PASSWORD", None)
    done = subprocess.run(
        [sys.executable, "-m", "controller", "plan", "--no-store"],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
        timeout=60,
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout == ""
    assert done.stderr == (
        f"error: Airflow at {airflow_url} refused the credentials (GET /api/v2/dags -> 403): "
        "check BACKFILLCTL_AIRFLOW_TOKEN\n"
        "  hint: Airflow said: Invalid JWT token; a token expires: with BACKFILLCTL_AIRFLOW_USERNAME/PASSWORD "
        "backfillctl gets a new one\n"
    )
    assert canary not in done.stderr


def cli(bench: Bench, airflow_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("BACKFILLCTL_")}
    env |= {
        "BACKFILLCTL_AIRFLOW_URL": airflow_url,
        "BACKFILLCTL_AIRFLOW_USERNAME": "admin",
        "BACKFILLCTL_AIRFLOW_PASSWORD": "admin",
        "BACKFILLCTL_SPECS_DIR": str(bench.specs),
        "BACKFILLCTL_STORE_URL": bench.store_url,
        "BACKFILLCTL_ACTOR": "ci-bot",
    }
    return subprocess.run(
        [sys.executable, "-m", "controller", "reconcile", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=bench.root,
        check=False,
        timeout=300,
    )


def test_until_complete_can_fail_the_job_on_failed_runs(bench: Bench, airflow_url: str) -> None:
    bench.spec("red", dag="demo_flaky", start="2021-08-01", end="2021-08-03", mar=3)
    plain = cli(bench, airflow_url, "--until-complete", "--interval", "2", "--fail-on-failures")
    assert plain.returncode == 1, plain.stderr
    assert plain.stderr.splitlines()[-1] == "failed: red ended CompletedWithFailures: failed: 2021-08-01, 2021-08-03"


def test_until_complete_gives_up_at_its_timeout_and_says_what_is_still_going(bench: Bench, airflow_url: str) -> None:
    bench.spec("slow", dag="demo_flaky", start="2021-09-01", end="2021-09-20", mar=1)
    done = cli(bench, airflow_url, "--until-complete", "--interval", "1", "--timeout", "2")
    assert done.returncode == 1, done.stderr
    assert done.stderr.splitlines()[-2:] == [
        "error: --timeout 2s reached before every spec settled; still going: slow",
        "  hint: nothing was stopped; run `backfillctl status` to follow them, or reconcile again",
    ]


def test_a_large_backfill_is_summarised_in_five_calls_and_two_pages_in_two_with_the_same_counts(
    airflow_url: str,
) -> None:
    """217 hourly runs (more than two pages): counts by state from total_entries, not by listing every run; its
    first 121 (two pages): both pages read. Each agrees with listing the runs."""
    start, end, part = (datetime(2025, 5, day, tzinfo=UTC) for day in (1, 10, 6))
    with AirflowClient(airflow_url, username="admin", password=Secret("admin")) as client:
        backfill = client.create(BackfillRequest("demo_hourly", start, end, max_active_runs=1))
        client.pause(backfill.id)  # nothing new starts: the counts hold still while both ways are compared
        try:
            deadline = time.monotonic() + 90
            while any(r.state == "running" for r in client.dag_runs("demo_hourly", start, end)):
                assert time.monotonic() < deadline, "the running run did not finish"
                time.sleep(1)
            listed, listed_part = (summarise(client.dag_runs("demo_hourly", start, to)) for to in (end, part))
            calls_seen = record_calls(client)
            counted = client.run_summary("demo_hourly", start, end)
            calls = list(calls_seen)
            paged = client.run_summary("demo_hourly", start, part, expected=121)
            paged_calls = calls_seen[len(calls) :]
        finally:
            client.cancel(backfill.id)
    assert (listed.total, listed_part.total) == (217, 121)
    assert (counted, paged) == (listed, listed_part)
    assert calls == [("GET", "/api/v2/dags/demo_hourly/dagRuns")] * 5
    assert paged_calls == [("GET", "/api/v2/dags/demo_hourly/dagRuns")] * 2
