"""Rehearse in staging, verify, then production — against two real Apache Airflow 3.3.2 instances.

The session's Airflow is production; `staging_airflow_url` is a second instance the harness starts. Both load
`examples/dags`: `demo_chunked` (hourly, an EmptyOperator: the backfill), `demo_orders_verify` (schedule=None,
its task `result` returns `{passed, metrics}`; `conf.expect: fail` makes it report `passed: false`) and
`demo_orders_publish`. Each test backfills six hours of its own random day in 2018, so the tests share the
session's instances with the others.

Time: Airflow marks a backfill complete at a 30 s scheduler tick, so each slice and each production backfill
costs about one tick; a verification run a few seconds.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from controller.adapters.airflow import AirflowClient
from controller.commands.reconcile.reconciler import PassResult
from controller.core.model.secret import Secret
from controller.core.model.stages import Stage, run_id
from tests.commands.reconcile.harness import Bench

pytestmark = pytest.mark.airflow
DAG, VERIFY, PUBLISH = "demo_chunked", "demo_orders_verify", "demo_orders_publish"
HOUR = timedelta(hours=1)
CHECKED = "timeout_minutes: 10, result_task: result"
POLICY = f"""\
version: 1
environments:
  staging:
    airflow_url_env: BACKFILLCTL_STAGING_AIRFLOW_URL
    username_env: BACKFILLCTL_STAGING_AIRFLOW_USERNAME
    password_env: BACKFILLCTL_STAGING_AIRFLOW_PASSWORD
  production: {{rehearse_in: staging}}
verification:
  allowed_dags: [{VERIFY}, {PUBLISH}]
"""


@pytest.fixture
def bench(tmp_path: Path, airflow_url: str, staging_airflow_url: str) -> Iterator[Bench]:
    b = Bench(tmp_path, url=airflow_url)
    b.environ = {
        "BACKFILLCTL_STAGING_AIRFLOW_URL": staging_airflow_url,
        "BACKFILLCTL_STAGING_AIRFLOW_USERNAME": "admin",
        "BACKFILLCTL_STAGING_AIRFLOW_PASSWORD": "admin",
    }
    yield b
    for url in (airflow_url, staging_airflow_url):
        with client_of(url) as client:
            for backfill in client.list_backfills(DAG):
                if backfill.active:
                    client.cancel(backfill.id)
    b.close()


def client_of(url: str, bench: Bench | None = None) -> AirflowClient:
    """A client of `url`; with `bench`, closed with it."""
    client = AirflowClient(url, username="admin", password=Secret("admin"))
    if bench is not None:
        bench.clients.append(client)
    return client


def day() -> datetime:
    rng = random.Random(uuid.uuid4().int)
    return datetime(2018, 1, 1, tzinfo=UTC) + timedelta(days=rng.randrange(365))


def iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def staged_spec(
    bench: Bench, name: str, start: datetime, *, expect: str = "pass", attempt: int = 1, **more: str
) -> None:
    slices = f'[{{from_date: "{iso(start)}", to_date: "{iso(start + HOUR)}"}}, ' + (
        f'{{from_date: "{iso(start + 4 * HOUR)}", to_date: "{iso(start + 5 * HOUR)}"}}]'
    )
    bench.spec(
        name,
        dag=DAG,
        start=iso(start),
        end=iso(start + 5 * HOUR),
        reprocess="completed",
        mar=3,
        rehearsal=f"{{slices: {slices}, attempt: {attempt}}}",
        verify=f"{{dag_id: {VERIFY}, conf: {{table: orders, expect: {expect}}}, {CHECKED}}}",
        publish=f"{{dag_id: {PUBLISH}}}",
        writes="[warehouse.orders]",
        rollback='"restore from snapshot orders; see runbook R-12"',
        **more,
    )


def ours(client: AirflowClient, start: datetime) -> list[tuple[datetime, datetime]]:
    """The backfills on DAG inside this test's day, as (from, to)."""
    return sorted(
        (b.from_date, b.to_date) for b in client.list_backfills(DAG) if start <= b.from_date <= start + 5 * HOUR
    )


def passes(bench: Bench, *, limit: int = 60, each: Any = None) -> PassResult:
    """Passes until every spec settled (3 s apart), checking `each(result)` after every pass."""
    for _ in range(limit):
        result = bench.run()
        if each is not None:
            each(result)
        if result.settled:
            return result
        time.sleep(3)
    raise AssertionError(
        f"not settled after {limit} passes: {[(i.spec, i.phase, i.reason) for i in result.current.items]}"
    )


def test_a_rehearsed_and_verified_spec_runs_in_production_after_staging_and_publishes_once(
    bench: Bench, airflow_url: str, staging_airflow_url: str
) -> None:
    bench.policy(POLICY)
    start = day()
    staged_spec(bench, "staged-orders", start)
    production, staging = client_of(airflow_url, bench), client_of(staging_airflow_url, bench)

    def production_waits(result: PassResult) -> None:
        rehearsal = bench.store.stages_of("staged-orders")
        passed = any(r.stage is Stage.REHEARSAL and r.state.value == "passed" for r in rehearsal)
        if not passed:  # not created in production before staging finished
            assert ours(production, start) == []
            assert result.current.items[0].phase.value == "AwaitingRehearsal"

    result = passes(bench, each=production_waits)
    (item,) = result.current.items
    assert (item.phase.value, item.backfill_id is not None) == ("Succeeded", True)
    final = run_id("staged-orders", "production", Stage.FINAL, f"b{item.backfill_id}")
    assert item.reason == f"6 run(s) succeeded; verified (run {final})"

    # staging ran exactly the slices, then the verification with the spec in its conf
    assert ours(staging, start) == [(start, start + HOUR), (start + 4 * HOUR, start + 5 * HOUR)]
    stages = {r.stage: r for r in bench.store.stages_of("staged-orders")}
    rehearsal = stages[Stage.REHEARSAL]
    assert (rehearsal.environment, rehearsal.state.value, rehearsal.runs) == ("staging", "passed", {"success": 4})
    verified = staging.get_run(VERIFY, run_id("staged-orders", "staging", Stage.REHEARSAL, rehearsal.key))
    assert verified is not None
    told = verified.conf["backfillctl"]
    assert (verified.state, verified.conf["table"], told["spec"], told["environment"], told["stage"]) == (
        "success",
        "orders",
        "staged-orders",
        "staging",
        "rehearsal",
    )
    assert told["backfill_ids"] == list(rehearsal.backfill_ids)

    # production ran the whole range once, verified it, and published once
    assert ours(production, start) == [(start, start + 5 * HOUR)]
    assert staging.get_run(VERIFY, final) is None
    checked = production.get_run(VERIFY, final)
    assert checked is not None
    assert checked.state == "success"
    published = production.get_run(
        PUBLISH, run_id("staged-orders", "production", Stage.PUBLISH, f"b{item.backfill_id}")
    )
    assert published is not None
    assert stages[Stage.PUBLISH].run_id == published.run_id
    again = bench.run()  # settled: nothing is triggered again
    assert again.applied == []
    assert len(bench.store.stages_of("staged-orders")) == 3

    trail = [(a, p, o) for a, p, o in bench.trail("staged-orders") if a in ("rehearse", "verify", "publish")]
    assert trail == [
        ("rehearse", "intent", None),
        ("rehearse", "outcome", "created"),
        ("rehearse", "intent", None),
        ("rehearse", "outcome", "created"),
        ("verify", "intent", None),
        ("verify", "outcome", "triggered"),
        ("verify", "observation", "passed"),
        ("rehearse", "observation", "passed"),
        ("verify", "intent", None),
        ("verify", "outcome", "triggered"),
        ("verify", "observation", "passed"),
        ("publish", "intent", None),
        ("publish", "outcome", "triggered"),
    ]

    # the change record holds both stages
    shown = bench.cli("report", "staged-orders")
    assert shown.returncode == 0, shown.stderr
    assert "## Stages" in shown.stdout
    assert "- **Rollback**: restore from snapshot orders; see runbook R-12" in shown.stdout
    assert f"- **rehearsal in staging** ({iso(rehearsal.started_at)}): passed; slices " in shown.stdout
    assert "- **final in production**" in shown.stdout
    assert "- **publish in production**" in shown.stdout


def test_a_failing_verification_keeps_the_spec_out_of_production_until_a_new_attempt_passes(
    bench: Bench, airflow_url: str, staging_airflow_url: str
) -> None:
    bench.policy(POLICY)
    start = day()
    staged_spec(bench, "staged-failing", start, expect="fail")
    production, staging = client_of(airflow_url, bench), client_of(staging_airflow_url, bench)
    result = passes(bench)
    (item,) = result.current.items
    failed_run = run_id("staged-failing", "staging", Stage.REHEARSAL, bench.store.stages_of("staged-failing")[0].key)
    assert (item.phase.value, item.reason) == (
        "AwaitingRehearsal",
        f"rehearsal in staging failed: run {failed_run}: result reported passed: false; fix the DAG or the spec, "
        "then set rehearsal.attempt: 2",
    )
    assert ours(production, start) == []
    status = bench.cli("status", "--format", "json")
    assert status.returncode == 0, status.stderr
    assert "rehearsal in staging failed" in status.stdout
    strict = bench.cli("reconcile", "--until-complete", "--fail-on-failures", "--timeout", "60")
    assert strict.returncode == 1, strict.stderr
    assert "failed: staged-failing ended AwaitingRehearsal: rehearsal in staging failed" in strict.stderr

    # the DAG is "fixed" (the verification now passes) and the attempt raised: the rehearsal runs again
    staged_spec(bench, "staged-failing", start, expect="pass", attempt=2)
    result = passes(bench)
    assert result.current.items[0].phase.value == "Succeeded"
    rehearsals = [r for r in bench.store.stages_of("staged-failing") if r.stage is Stage.REHEARSAL]
    assert [r.state.value for r in rehearsals] == ["failed", "passed"]
    assert len(ours(staging, start)) == 4  # both attempts ran both slices
    assert ours(production, start) == [(start, start + 5 * HOUR)]


def test_a_canary_promoted_by_its_verification_continues_without_a_merge(bench: Bench, airflow_url: str) -> None:
    bench.policy(POLICY)
    start = day()
    bench.spec(
        "canary-verified",
        dag=DAG,
        start=iso(start),
        end=iso(start + 5 * HOUR),
        reprocess="completed",
        mar=2,
        execution="{chunk_runs: 3, canary_runs: 2, promotion: on_verification}",
        verify=f"{{dag_id: {VERIFY}, conf: {{table: orders}}, timeout_minutes: 10, result_task: result}}",
    )
    result = passes(bench)
    (item,) = result.current.items
    assert item.phase.value == "Succeeded"
    production = client_of(airflow_url, bench)
    assert ours(production, start) == [
        (start, start + HOUR),
        (start + 2 * HOUR, start + 4 * HOUR),
        (start + 5 * HOUR, start + 5 * HOUR),
    ]
    promoted = [e.entry.message for e in bench.events("canary-verified") if e.entry.action == "promote"]
    assert promoted == ["the canary's verification passed"]
    kinds = [r.stage for r in bench.store.stages_of("canary-verified")]
    assert kinds == [Stage.CANARY, Stage.FINAL]


KILLED_AFTER_TRIGGER = """
import os, signal, sys
from controller.adapters.airflow import AirflowClient
from controller.cli import main
real = AirflowClient.trigger_run
def trigger_run(self, *args, **kwargs):
    answer = real(self, *args, **kwargs)
    print(f"triggered {answer[0].run_id}; killed", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
AirflowClient.trigger_run = trigger_run
sys.exit(main(["reconcile", "--once"]))
"""


def test_a_reconciler_killed_between_a_verifications_intent_and_outcome_does_not_trigger_it_twice(
    bench: Bench, airflow_url: str, staging_airflow_url: str
) -> None:
    bench.policy(POLICY)
    start = day()
    staged_spec(bench, "staged-killed", start)
    staging = client_of(staging_airflow_url, bench)
    env = bench.cli_env(BACKFILLCTL_SPECS_DIR="specs")
    for _ in range(60):  # passes until the one that triggers the rehearsal's verification, killed right after it
        killed = subprocess.run(
            [sys.executable, "-c", KILLED_AFTER_TRIGGER],
            cwd=bench.root,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if killed.returncode != 0:  # (a pass of its own would race the slices' end: one could trigger it unkilled)
            break
        time.sleep(3)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    key = next(r for r in bench.store.stages_of("staged-killed") if r.stage is Stage.REHEARSAL).key
    derived = run_id("staged-killed", "staging", Stage.REHEARSAL, key)
    assert f"triggered {derived}; killed" in killed.stderr
    trail = [(a, p, o) for a, p, o in bench.trail("staged-killed") if a == "verify"]
    assert trail == [("verify", "intent", None)]  # the intent, and no outcome: the process died in between

    again = bench.cli("reconcile", "--once", "--wait-lock", "--lock-timeout", "60")
    assert again.returncode == 0, again.stderr
    trail = [(a, p, o) for a, p, o in bench.trail("staged-killed") if a == "verify"]
    assert trail[:3] == [("verify", "intent", None), ("verify", "intent", None), ("verify", "outcome", "adopted-run")]
    mine = [
        r["dag_run_id"]
        for r in staging.server.paginate(f"/api/v2/dags/{VERIFY}/dagRuns", "dag_runs", {})
        if (r.get("conf") or {}).get("backfillctl", {}).get("spec") == "staged-killed"
        and r["conf"]["backfillctl"]["from_date"] == iso(start)  # this day's (a kept Airflow holds earlier ones)
    ]
    assert mine == [derived]  # one verification run of this spec in staging: the retry adopted it
