"""Rehearsals, verifications and publish on two fake Airflows (production and staging): the faults a real server
cannot be made to produce on demand — a lost answer to a trigger, a conf Airflow rejects, a verification DAG that
never starts, a staging without the history, a staging that cannot be reached. The whole path runs against two
real Airflows in test_stages_real.py."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from controller.adapters.airflow import AirflowClient
from controller.commands.reconcile.reconciler import PassResult, Reconciler
from controller.commands.runtime.settings import Settings
from controller.core.model.airflow import BackfillRequest
from controller.core.model.capabilities import newest
from controller.core.model.policy import parse_policy
from controller.core.model.secret import Secret
from controller.core.model.stages import Stage, StageState, run_id
from controller.errors import ConfigError
from tests.commands.reconcile.harness import Bench, count_calls, fake, mutating
from tests.fakes.airflow import FakeAirflow

STAGING = "http://staging-airflow"
POLICY = """\
version: 1
environments:
  staging:
    airflow_url_env: BACKFILLCTL_STAGING_AIRFLOW_URL
    username_env: BACKFILLCTL_STAGING_AIRFLOW_USERNAME
    password_env: BACKFILLCTL_STAGING_AIRFLOW_PASSWORD
  production: {rehearse_in: staging}
verification:
  allowed_dags: [demo_orders_verify, demo_orders_publish]
"""
SLICES = (
    '{slices: [{from_date: "2025-01-01", to_date: "2025-01-02"}, {from_date: "2025-01-06", to_date: "2025-01-07"}]}'
)


@pytest.fixture
def staging() -> FakeAirflow:
    return FakeAirflow()


@pytest.fixture
def bench(tmp_path: Path, staging: FakeAirflow) -> Iterator[Bench]:
    b = Bench(tmp_path, fake=FakeAirflow())
    b.other_fakes[STAGING] = staging
    b.environ = {
        "BACKFILLCTL_STAGING_AIRFLOW_URL": STAGING,
        "BACKFILLCTL_STAGING_AIRFLOW_USERNAME": "admin",
        "BACKFILLCTL_STAGING_AIRFLOW_PASSWORD": "admin",
    }
    b.policy(POLICY)
    yield b
    b.close()


def staged(
    bench: Bench, name: str = "orders", verify: str = "{table: orders}", rehearsal: str = SLICES, **more: str
) -> None:
    bench.spec(
        name,
        reprocess="completed",
        rehearsal=rehearsal,
        verify=f"{{dag_id: demo_orders_verify, conf: {verify}, timeout_minutes: 10, result_task: result}}",
        **more,
    )


def settle(bench: Bench, passes: int = 30, reconciler: Reconciler | None = None) -> PassResult:
    for _ in range(passes):
        result = (reconciler or bench.reconciler()).run_once()
        if result.settled:
            return result
    raise AssertionError(f"not settled: {[(i.spec, i.phase, i.reason) for i in result.current.items]}")


def ranges(airflow: FakeAirflow) -> list[tuple[str, str]]:
    return [(b["from_date"], b["to_date"]) for b in airflow.backfills.values()]


def test_staging_runs_the_slices_then_production_the_range_then_publish_once(
    bench: Bench, staging: FakeAirflow
) -> None:
    staged(bench, publish="{dag_id: demo_orders_publish}")
    first = bench.run()
    assert [(i.phase.value, i.reason) for i in first.current.items] == [
        ("AwaitingRehearsal", "waiting for its rehearsal in staging")
    ]
    assert fake(bench).backfills == {}
    result = settle(bench)
    (item,) = result.current.items
    final = run_id("orders", "production", Stage.FINAL, f"b{item.backfill_id}")
    assert (item.phase.value, item.reason) == ("Succeeded", f"7 run(s) succeeded; verified (run {final})")
    assert ranges(staging) == [
        ("2025-01-01T00:00:00Z", "2025-01-02T00:00:00Z"),
        ("2025-01-06T00:00:00Z", "2025-01-07T00:00:00Z"),
    ]
    assert ranges(fake(bench)) == [("2025-01-01T00:00:00Z", "2025-01-07T00:00:00Z")]
    rehearsal, final_record, publish = bench.store.stages_of("orders")
    told = staging.triggered[("demo_orders_verify", rehearsal.run_id)]["conf"]
    assert told["table"] == "orders"
    assert {k: told["backfillctl"][k] for k in ("spec", "environment", "stage", "backfill_ids", "ticket")} == {
        "spec": "orders",
        "environment": "staging",
        "stage": "rehearsal",
        "backfill_ids": list(rehearsal.backfill_ids),
        "ticket": "CHG-1",
    }
    assert (rehearsal.state, rehearsal.runs, rehearsal.metrics) == (
        StageState.PASSED,
        {"success": 4},
        {"days": 7, "rows": 700},
    )
    assert (final_record.stage, final_record.state, final_record.run_id) == (Stage.FINAL, StageState.PASSED, final)
    assert list(fake(bench).triggered) == [("demo_orders_verify", final), ("demo_orders_publish", publish.run_id)]
    assert publish.run_id == run_id("orders", "production", Stage.PUBLISH, f"b{item.backfill_id}")
    bench.run()
    assert len(fake(bench).triggered) == 2  # settled: nothing is triggered again
    assert bench.trail("orders") == [
        ("observe", "observation", "AwaitingRehearsal"),
        ("rehearse", "intent", None),
        ("rehearse", "outcome", "created"),
        ("rehearse", "intent", None),
        ("rehearse", "outcome", "created"),
        ("verify", "intent", None),
        ("verify", "outcome", "triggered"),
        ("verify", "observation", "passed"),
        ("rehearse", "observation", "passed"),
        ("create", "intent", None),  # production only once the rehearsal passed
        ("create", "outcome", "created"),
        ("verify", "intent", None),
        ("verify", "outcome", "triggered"),
        ("verify", "observation", "passed"),
        ("observe", "observation", "Succeeded"),
        ("publish", "intent", None),
        ("publish", "outcome", "triggered"),
    ]


def test_a_failed_verification_in_staging_keeps_production_waiting_and_a_new_attempt_reruns(
    bench: Bench, staging: FakeAirflow
) -> None:
    staged(bench, verify="{table: orders, expect: fail}")
    result = settle(bench)
    (record,) = bench.store.stages_of("orders")
    assert [(i.phase.value, i.reason) for i in result.current.items] == [
        (
            "AwaitingRehearsal",
            f"rehearsal in staging failed: run {record.run_id}: result reported passed: false; fix the DAG or the "
            "spec, then set rehearsal.attempt: 2",
        )
    ]
    assert record.metrics == {"days": 7, "rows": 700}
    assert fake(bench).backfills == {}
    staged(bench, rehearsal=SLICES.replace("}]}", "}], attempt: 2}"))  # the DAG was fixed: conf says pass
    assert settle(bench).current.items[0].phase.value == "Succeeded"
    assert [(r.stage, r.state) for r in bench.store.stages_of("orders")] == [
        (Stage.REHEARSAL, StageState.FAILED),
        (Stage.REHEARSAL, StageState.PASSED),
        (Stage.FINAL, StageState.PASSED),
    ]
    assert len(staging.backfills) == 4


def test_a_staging_without_the_history_fails_the_rehearsal(bench: Bench, staging: FakeAirflow) -> None:
    with AirflowClient(
        STAGING, username="admin", password=Secret("admin"), transport=staging.transport(), capabilities=newest()
    ) as client:
        start = datetime(2025, 1, 1, tzinfo=UTC)
        client.create(BackfillRequest("demo_daily", start, start + timedelta(days=6), "none", 7))
        staging.tick()
    bench.spec("orders", rehearsal=SLICES)  # reprocess none: staging has run these dates already
    result = settle(bench)
    assert [(i.phase.value, i.reason) for i in result.current.items] == [
        (
            "AwaitingRehearsal",
            "rehearsal in staging failed: slice 2025-01-01..2025-01-02: the dry run lists no runs in staging; a "
            "rehearsal where that history is missing proves nothing: load it into staging, or pick slices it has; "
            "fix the DAG or the spec, then set rehearsal.attempt: 2",
        )
    ]


def test_a_conf_airflow_rejects_fails_the_verification_with_airflows_message(bench: Bench) -> None:
    staged(bench, verify="{table: orders, expect: maybe}")
    result = settle(bench)
    reason = result.current.items[0].reason
    assert reason.startswith(
        "rehearsal in staging failed: the verification run could not be triggered in staging: "
        "POST /api/v2/dags/demo_orders_verify/dagRuns -> 400: Invalid input for param expect: 'maybe' is not one of"
    )
    assert [(a, p, o) for a, p, o in bench.trail("orders") if a == "verify"] == [
        ("verify", "intent", None),
        ("verify", "outcome", "failed"),
    ]


def test_a_verification_that_never_starts_fails_after_its_timeout(bench: Bench, staging: FakeAirflow) -> None:
    paused = replace(staging.dags["demo_orders_verify"], is_paused=True)  # a copy: the fake's DAGs are shared
    staging.dags["demo_orders_verify"] = paused
    staged(bench)
    for _ in range(12):
        bench.run()
    (record,) = bench.store.stages_of("orders")
    assert (record.state, record.run_id is not None) == (StageState.VERIFYING, True)
    late = datetime.now(UTC) + timedelta(minutes=11)
    later = Reconciler(bench.settings(), bench.store, bench.client(), clock=lambda: late, connect=bench.connect)
    result = later.run_once()
    assert result.current.items[0].reason == (
        f"rehearsal in staging: its slices succeeded; verifying (run {record.run_id})"
    )
    result = later.run_once()
    assert result.current.items[0].reason == (
        f"rehearsal in staging failed: verification run {record.run_id} did not start within 10 min (is the DAG "
        "paused, or its pool full?); fix the DAG or the spec, then set rehearsal.attempt: 2"
    )


def test_a_lost_answer_to_the_trigger_is_adopted_not_triggered_again(bench: Bench, staging: FakeAirflow) -> None:
    staging.fault(
        "POST", "/api/v2/dags/demo_orders_verify/dagRuns", lambda r: httpx.ReadTimeout("slow", request=r), after=True
    )
    staged(bench)
    settle(bench)
    (record, _final) = bench.store.stages_of("orders")
    assert list(staging.triggered) == [("demo_orders_verify", record.run_id)]
    trail = [(a, p, o) for a, p, o in bench.trail("orders") if a == "verify"][:4]
    assert trail == [
        ("verify", "intent", None),  # the answer was lost: no outcome
        ("verify", "intent", None),
        ("verify", "outcome", "adopted-run"),
        ("verify", "observation", "passed"),
    ]


def test_an_unreachable_staging_holds_production_and_says_why(bench: Bench, caplog: pytest.LogCaptureFixture) -> None:
    bench.environ = {}
    staged(bench)
    with caplog.at_level(logging.WARNING):
        result = bench.run()
    assert [(i.phase.value, i.reason) for i in result.current.items] == [
        ("AwaitingRehearsal", "waiting for its rehearsal in staging")
    ]
    assert (
        "rehearsal of orders: DAG demo_daily in staging not read: BACKFILLCTL_STAGING_AIRFLOW_URL is not set"
        in caplog.text
    )
    assert fake(bench).backfills == {}


def _refused(bench: Bench, staging: FakeAirflow, caplog: pytest.LogCaptureFixture) -> list[str]:
    """Two passes of a staged spec whose staging is production: what they logged of it; nothing is created in
    either Airflow, and production keeps waiting for its rehearsal."""
    staged(bench)
    with caplog.at_level(logging.WARNING):
        for _ in range(2):
            result = bench.run()
    assert [(i.phase.value, i.reason) for i in result.current.items] == [
        ("AwaitingRehearsal", "waiting for its rehearsal in staging")
    ]
    assert (fake(bench).backfills, staging.backfills) == ({}, {})
    assert mutating(fake(bench).requests) == mutating(staging.requests) == []
    assert bench.store.stages_of("orders") == ()
    return [r.getMessage() for r in caplog.records if r.getMessage().startswith("rehearsal of orders")]


@pytest.mark.parametrize(
    "url", ["http://fake-airflow/", "HTTP://Fake-Airflow", "http://fake-airflow:80", "http://FAKE-AIRFLOW:80//"]
)
def test_a_staging_at_productions_url_is_refused_before_anything_is_sent_to_it(
    bench: Bench, staging: FakeAirflow, caplog: pytest.LogCaptureFixture, url: str
) -> None:
    bench.environ["BACKFILLCTL_STAGING_AIRFLOW_URL"] = url
    bench.other_fakes[url.rstrip("/")] = fake(bench)  # the URL reaches production's api-server
    opened: list[str] = []
    connect = bench.connect

    def recording(settings: Settings) -> AirflowClient:
        opened.append(settings.airflow_address())
        return connect(settings)

    bench.connect = recording  # type: ignore[method-assign]
    assert _refused(bench, staging, caplog) == 2 * [
        "rehearsal of orders: DAG demo_daily in staging not read: environment 'staging' is production: its Airflow "
        "URL is production's (http://fake-airflow); nothing is created in either"
    ]
    assert opened == []  # never connected: production never saw staging's login


def test_a_staging_that_is_production_under_another_name_is_refused_by_its_dag_versions(
    bench: Bench, staging: FakeAirflow, caplog: pytest.LogCaptureFixture
) -> None:
    bench.other_fakes[STAGING] = fake(bench)  # another name (a DNS alias, an address) for production's api-server
    (shared,) = {v["id"] for v in fake(bench)._dags("demo_daily", "dagVersions", {})[1]["dag_versions"]}
    assert _refused(bench, staging, caplog) == 2 * [
        "rehearsal of orders: DAG demo_daily in staging not read: environment 'staging' is production under another "
        f"name: DAG demo_daily has the same version ids in both (e.g. {shared}), and each metadata database makes "
        "its own; nothing is created in either"
    ]
    assert count_calls(fake(bench).requests)["GET /api/v2/dags/demo_daily/dagVersions"] == 4  # both sides, twice


def test_a_distinct_staging_is_proven_once_per_command(bench: Bench, staging: FakeAirflow) -> None:
    staged(bench)
    reconciler = bench.reconciler()
    for _ in range(3):
        reconciler.run_once()
    assert len(staging.backfills) == 2  # both slices
    assert count_calls(staging.requests)["GET /api/v2/dags/demo_daily/dagVersions"] == 1


def test_staging_naming_productions_token_is_refused_at_run_time_too(
    bench: Bench, staging: FakeAirflow, caplog: pytest.LogCaptureFixture
) -> None:
    """A policy written before the rule (or read back from the store) still cannot send production's token."""
    reconciler = bench.reconciler()
    reconciler._policy = parse_policy(
        {
            "environments": {
                "staging": {
                    "airflow_url_env": "BACKFILLCTL_STAGING_AIRFLOW_URL",
                    "token_env": "BACKFILLCTL_AIRFLOW_TOKEN",
                }
            }
        },
        "specs/policy.yaml",
    )
    with pytest.raises(ConfigError) as refused:
        reconciler.client_for("staging", "demo_daily")
    assert refused.value.message == (
        "environment 'staging' reads its token from BACKFILLCTL_AIRFLOW_TOKEN, as production does: production's "
        "token would be sent to staging's Airflow"
    )
    assert staging.requests == []


def test_a_publish_run_airflow_refuses_is_recorded_failed_and_not_retried(bench: Bench) -> None:
    del fake(bench).dags["demo_orders_publish"]  # this instance's own mapping
    staged(bench, publish="{dag_id: demo_orders_publish}")
    settle(bench)
    bench.run()
    publish = bench.store.stages_of("orders")[-1]
    assert (publish.stage, publish.state) == (Stage.PUBLISH, StageState.FAILED)
    assert publish.reason is not None
    assert publish.reason.startswith("the publish run could not be triggered: cannot trigger run ")
    assert [(a, p, o) for a, p, o in bench.trail("orders") if a == "publish"] == [
        ("publish", "intent", None),
        ("publish", "outcome", "failed"),
    ]
