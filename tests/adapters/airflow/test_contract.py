"""Contract tests of the Airflow client, run against a real Apache Airflow 3.3.2 (PostgreSQL,
LocalExecutor) AND against the stateful fake in tests/fakes/airflow.py: the fake may only be used for
fault injection because it passes exactly these tests. They also run on 3.1.8 and 3.2.2 (`every_line`,
BACKFILLCTL_TEST_AIRFLOW_VERSION); where a line answers differently, `since` names the release of each answer.

Each test uses its own DAG or date range, so they share one real server without interfering: Airflow
allows one active backfill per DAG, and reprocess behaviour depends on runs left by earlier backfills.
"""

from __future__ import annotations

import logging
import secrets
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, TypeVar

import pytest
from packaging.version import Version

from controller.adapters.airflow import AirflowClient
from controller.adapters.airflow.runs import FINISHED_AFTER_START, _range_params
from controller.core.model.airflow import Backfill, BackfillRequest, Schedule, TriggeredRun
from controller.core.model.secret import Secret
from controller.core.rules.schedules import unbackfillable
from controller.errors import (
    AirflowAuthError,
    AirflowConflict,
    AirflowError,
    AirflowInvalid,
    AirflowNotFound,
    AirflowVersionError,
)
from tests.fakes.airflow import FakeAirflow
from tests.fakes.calls import record_calls

MakeClient = Callable[..., AirflowClient]
pytestmark = pytest.mark.every_line
T = TypeVar("T")


def since(client: AirflowClient, answers: dict[str, T]) -> T:
    """The answer of the newest release in `answers` that the client's server is at or after."""
    version = Version(Version(client.capabilities.version).base_version)
    return max(((Version(k), v) for k, v in answers.items() if Version(k) <= version), key=lambda kv: kv[0])[1]


def day(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def dry_run(client: AirflowClient, request: BackfillRequest) -> list[datetime]:
    """The dates the create would run: logical dates, or partition dates for a partitioned DAG."""
    return [planned.date for planned in client.planned_runs(request)]


@pytest.fixture(params=[pytest.param("real", marks=pytest.mark.airflow), "fake"])
def make_client(request: pytest.FixtureRequest) -> Iterator[MakeClient]:
    """AirflowClient factory for the real server (started once per session) or a fresh fake."""
    made: list[AirflowClient] = []
    if request.param == "real":
        url, transport = request.getfixturevalue("airflow_url"), None
    else:
        url, transport = "http://fake-airflow", FakeAirflow().transport()

    def make(**auth: Any) -> AirflowClient:
        made.append(AirflowClient(url, transport=transport, **auth))
        return made[-1]

    yield make
    for client in made:
        client.close()


@pytest.fixture
def client(make_client: MakeClient) -> AirflowClient:
    return make_client(username="admin", password=Secret("admin"))


def cancel_active(client: AirflowClient, dag_id: str) -> None:
    for backfill in client.list_backfills(dag_id):
        if backfill.completed_at is None:
            client.cancel(backfill.id)


def wait_completed(client: AirflowClient, backfill_id: int, timeout: float = 120) -> Backfill:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        backfill = client.get_backfill(backfill_id)
        if backfill.completed_at is not None:
            return backfill
        time.sleep(2)
    raise AssertionError(f"backfill {backfill_id} not completed after {timeout}s")


def test_version_is_the_release_under_test(client: AirflowClient, request: pytest.FixtureRequest) -> None:
    real = request.node.callspec.params["make_client"] == "real"
    assert client.version() == (request.getfixturevalue("airflow_caps").version if real else "3.3.2")


def test_dry_run_lists_the_dates_that_would_run(client: AirflowClient) -> None:
    dates = dry_run(client, BackfillRequest("demo_daily", day("2024-02-01"), day("2024-02-07")))
    assert dates == [day(f"2024-02-0{d}") for d in range(1, 8)]
    backwards = dry_run(client, BackfillRequest("demo_daily", day("2024-02-01"), day("2024-02-03"), run_backwards=True))
    assert backwards == [day("2024-02-03"), day("2024-02-02"), day("2024-02-01")]


@pytest.mark.parametrize(
    ("request_", "error", "detail"),
    [
        (
            BackfillRequest("demo_daily", day("2099-01-01"), day("2099-01-07")),
            AirflowInvalid,
            "Backfill cannot be executed for future dates.",
        ),
        (
            BackfillRequest("demo_daily", day("2024-01-07"), day("2024-01-01")),
            AirflowInvalid,
            {  # before 3.3.0 an empty dry run (backfillctl's spec validation refuses from > to itself)
                "3.1.0": None,
                "3.3.0": "from_date (2024-01-07T00:00:00+00:00) must not be after to_date (2024-01-01T00:00:00+00:00).",
            },
        ),
        (
            BackfillRequest("demo_manual", day("2024-01-01"), day("2024-01-03")),
            AirflowInvalid,
            {
                "3.1.0": "demo_manual has no schedule",
                "3.3.0": "demo_manual has a non-periodic schedule that does not support backfills",
            },
        ),
        (
            BackfillRequest("demo_depends_on_past", day("2024-01-01"), day("2024-01-03")),
            AirflowInvalid,
            {
                "3.1.0": "DAG has tasks for which depends_on_past=True. You must set reprocess behavior to reprocess "
                "completed or reprocess failed.",
                "3.2.0": "Dag has tasks for which depends_on_past=True. You must set reprocess behavior to reprocess "
                "completed or reprocess failed.",
            },
        ),
        (
            BackfillRequest(
                "demo_depends_on_past",
                day("2024-01-01"),
                day("2024-01-03"),
                reprocess_behavior="failed",
                run_backwards=True,
            ),
            AirflowInvalid,
            {
                "3.1.0": "Backfill cannot be run in reverse when the DAG has tasks where depends_on_past=True.",
                "3.2.0": "Backfill cannot be run in reverse when the Dag has tasks where depends_on_past=True.",
            },
        ),
        (
            BackfillRequest("nope_not_a_dag", day("2024-01-01"), day("2024-01-03")),
            AirflowNotFound,
            "Could not find dag nope_not_a_dag",
        ),
    ],
    ids=["future", "from-after-to", "non-periodic", "dop-none", "dop-backwards", "unknown-dag"],
)
def test_dry_run_rejections(
    client: AirflowClient, request_: BackfillRequest, error: type[AirflowError], detail: str | dict[str, str | None]
) -> None:
    if isinstance(detail, dict):
        found = since(client, detail)
        if found is None:
            assert dry_run(client, request_) == []
            return
        detail = found
    with pytest.raises(error) as caught:
        dry_run(client, request_)
    assert caught.value.detail == detail
    assert caught.value.status == (404 if error is AirflowNotFound else 422)
    assert str(caught.value) == f"POST /api/v2/backfills/dry_run -> {caught.value.status}: {detail}"


def test_conf_rejected_by_params(client: AirflowClient) -> None:
    bad = BackfillRequest("demo_params", day("2024-01-01"), day("2024-01-02"), dag_run_conf={"region": "mars"})
    if not since(client, {"3.1.0": False, "3.2.2": True}):  # Airflow checks conf against params from 3.2.2
        assert dry_run(client, bad) == [day("2024-01-01"), day("2024-01-02")]
        return
    with pytest.raises(AirflowInvalid) as caught:
        dry_run(
            client,
            BackfillRequest("demo_params", day("2024-01-01"), day("2024-01-02"), dag_run_conf={"region": "mars"}),
        )
    assert caught.value.detail.startswith("Invalid input for param region: 'mars' is not one of ['eu', 'us']")
    assert len(caught.value.detail) <= 256


def test_create_conflict_pause_unpause_cancel(client: AirflowClient) -> None:
    cancel_active(client, "demo_tz")
    request = BackfillRequest(
        "demo_tz",
        day("2024-03-01"),
        day("2024-03-20"),
        reprocess_behavior="none",
        max_active_runs=1,
        dag_run_conf={"test": "contract"},
    )
    created = client.create(request)
    assert (created.dag_id, created.max_active_runs, created.is_paused, created.completed_at) == (
        "demo_tz",
        1,
        False,
        None,
    )
    assert dict(created.dag_run_conf or {}) == {"test": "contract"}
    with pytest.raises(AirflowConflict) as conflict:
        client.create(request)
    assert conflict.value.detail == "There is already a running backfill for dag demo_tz"
    assert client.pause(created.id).is_paused is True
    assert client.pause(created.id).is_paused is True  # idempotent
    assert client.unpause(created.id).is_paused is False
    cancelled = client.cancel(created.id)
    assert cancelled.completed_at is not None
    for action in (client.cancel, client.pause, client.unpause):
        with pytest.raises(AirflowConflict) as done:
            action(created.id)
        assert done.value.detail == "Backfill is already completed."
    assert created.id in [b.id for b in client.list_backfills("demo_tz")]
    # newest first, down to the given ids: the active backfill is always the newest, so a pass whose specs are
    # bound reads one page
    assert client.list_backfills("demo_tz", newest=frozenset({created.id}))[-1].id == created.id


def test_unknown_backfill_is_not_found(client: AirflowClient) -> None:
    with pytest.raises(AirflowNotFound) as caught:
        client.get_backfill(999999)
    assert caught.value.detail == "Backfill not found"
    with pytest.raises(AirflowNotFound):
        client.cancel(999999)


def test_dag_details(client: AirflowClient) -> None:
    daily, dop, manual = client.dag("demo_daily"), client.dag("demo_depends_on_past"), client.dag("demo_manual")
    assert (daily.is_paused, daily.is_stale, daily.is_backfillable, daily.depends_on_past) == (
        False,
        False,
        True,
        False,
    )
    assert dop.depends_on_past is True
    assert manual.is_backfillable is False
    assert client.dag("demo_params").params["region"]["value"] == "eu"
    with pytest.raises(AirflowNotFound):
        client.dag("nope_not_a_dag")


def test_a_dags_version_ids_are_the_databases_own_and_the_same_under_another_name(
    client: AirflowClient, make_client: MakeClient
) -> None:
    """What tells two Airflows apart whatever their names (`commands.environments`): UUIDs, read alike twice."""
    ids = client.dag_version_ids("demo_daily")
    assert len(ids) >= 1
    assert all(str(uuid.UUID(i)) == i for i in ids)
    again = make_client(username="admin", password=Secret("admin"))
    assert again.dag_version_ids("demo_daily") == ids
    assert client.dag_version_ids("demo_daily").isdisjoint(client.dag_version_ids("demo_hourly"))
    with pytest.raises(AirflowNotFound):
        client.dag_version_ids("nope_not_a_dag")


def test_seven_day_backfill_runs_to_completion_with_failures(client: AirflowClient) -> None:
    cancel_active(client, "demo_flaky")
    request = BackfillRequest(
        "demo_flaky", day("2024-05-01"), day("2024-05-07"), reprocess_behavior="none", max_active_runs=3
    )
    created = client.create(request)
    done = wait_completed(client, created.id)
    assert done.completed_at is not None
    runs = client.dag_runs("demo_flaky", request.from_date, request.to_date)
    assert [r.logical_date.day for r in runs] == [1, 2, 3, 4, 5, 6, 7]
    assert Counter(r.state for r in runs) == {"failed": 4, "success": 3}
    assert sorted(r.logical_date.day for r in runs if r.state == "failed") == [1, 3, 5, 7]
    assert all(r.start_date is not None for r in runs)
    retry = dry_run(
        client, BackfillRequest("demo_flaky", day("2024-05-01"), day("2024-05-07"), reprocess_behavior="failed")
    )
    assert [d.day for d in retry] == [1, 3, 5, 7]
    assert dry_run(client, BackfillRequest("demo_flaky", day("2024-05-01"), day("2024-05-07"))) == []
    # "in range" without a second dry run (the plan asks one per create): runs to create + finished runs the rule keeps
    everything = dry_run(client, BackfillRequest("demo_flaky", day("2024-05-01"), day("2024-05-07"), "completed"))
    kept = {"none": ("success", "failed"), "failed": ("success",)}
    for reprocess, states in kept.items():
        planned = dry_run(client, BackfillRequest("demo_flaky", day("2024-05-01"), day("2024-05-07"), reprocess))
        counted, flying, total = client.range_runs("demo_flaky", day("2024-05-01"), day("2024-05-07"), kept=states)
        assert (len(planned) + counted, flying, total) == (len(everything), [], 0)
        assert len(everything) == 7


def test_dag_runs_paginate_past_100(client: AirflowClient) -> None:
    cancel_active(client, "demo_hourly")
    request = BackfillRequest(
        "demo_hourly",
        day("2024-06-01"),
        datetime(2024, 6, 5, 12, tzinfo=UTC),
        reprocess_behavior="none",
        max_active_runs=1,
    )
    created = client.create(request)
    try:
        client.pause(created.id)
        runs = client.dag_runs("demo_hourly", request.from_date, request.to_date)
        assert len(runs) == 109
        assert len({r.run_id for r in runs}) == 109
    finally:
        client.cancel(created.id)


def test_wrong_password_is_an_auth_error(make_client: MakeClient) -> None:
    bad = make_client(username="admin", password=Secret("wrong"))
    with pytest.raises(AirflowAuthError) as e:
        bad.list_backfills("demo_daily")
    assert str(e.value) == (
        f"Airflow at {bad.base_url} refused the credentials (POST /auth/token -> 401): "
        "check BACKFILLCTL_AIRFLOW_USERNAME/PASSWORD"
    )
    assert e.value.hint == "Airflow said: Invalid credentials"


def test_invalid_token_reauthenticates_once(make_client: MakeClient) -> None:
    c = make_client(token=Secret("garbage"), username="admin", password=Secret("admin"))
    seen: list[tuple[str, str, int | None]] = []
    c.observer = lambda method, path, status: seen.append((method, path, status))
    assert c.list_backfills("nope_not_a_dag") == []
    # refused, a new token from POST /auth/token (not observed: no call of the API), then the same call again
    assert [(m, p) for m, p, _ in seen] == [("GET", "/api/v2/backfills")] * 2
    assert (seen[0][2] in (401, 403), seen[1][2]) == (True, 200)


def test_invalid_token_without_credentials_fails_fast(
    make_client: MakeClient, caplog: pytest.LogCaptureFixture
) -> None:
    canary = "CANARY-7f3a9c-token"
    caplog.set_level(logging.DEBUG)
    c = make_client(token=Secret(canary))
    calls = record_calls(c)
    with pytest.raises(AirflowAuthError) as caught:
        c.list_backfills("demo_daily")
    assert caught.value.status == 403
    assert str(caught.value) == (
        f"Airflow at {c.base_url} refused the credentials (GET /api/v2/backfills -> 403): "
        "check BACKFILLCTL_AIRFLOW_TOKEN"
    )
    assert caught.value.detail == "Invalid JWT token"
    assert len(calls) == 1
    assert canary not in repr(c)
    assert canary not in repr(caught.value) + str(caught.value) + str(caught.value.hint)
    assert all(canary not in record.getMessage() for record in caplog.records)


@pytest.fixture
def real_client(airflow_url: str) -> Iterator[AirflowClient]:
    with AirflowClient(airflow_url, username="admin", password=Secret("admin")) as made:
        yield made


@pytest.mark.airflow
def test_partitioned_dag_details_dry_run_and_runs(real_client: AirflowClient) -> None:
    """Real Airflow only: the fake (tests/fakes/airflow.py) answers a partitioned DAG's details and dry runs, but
    has no partitioned runs (FACTS §11)."""
    client = real_client
    caps = client.capabilities
    if not caps.partitioned_dags:  # CronPartitionTimetable is Airflow 3.2.0: the DAG file is an import error
        with pytest.raises(AirflowNotFound):
            client.dag("demo_partitioned", with_tasks=False)
        return
    if not caps.partition_date_filter:  # refused with the reason, never counted approximately
        assert unbackfillable(client.dag("demo_partitioned", with_tasks=False)) == (
            f"DAG demo_partitioned is partitioned, and Airflow {caps.version} cannot filter DAG runs by partition "
            "date (partition_date_gte/lte: Airflow 3.3.1), so backfillctl cannot count its runs exactly; upgrade "
            "Airflow to 3.3.1 or newer to backfill it"
        )
        return
    cancel_active(client, "demo_partitioned")
    info = client.dag("demo_partitioned", with_tasks=False)
    assert (info.partitioned, info.is_backfillable, info.schedule) == (
        True,
        True,
        Schedule(periodic=True, summary="0 0 * * *", description="At 00:00", allowed_run_types=None),
    )
    manual = client.dag("demo_manual", with_tasks=False)
    assert (manual.partitioned, manual.schedule) == (
        False,
        Schedule(periodic=False, summary=None, description="Never, external triggers only"),
    )
    keys = [f"2024-04-0{d}T00:00:00" for d in (1, 2, 3)]
    request = BackfillRequest("demo_partitioned", day("2024-04-01"), day("2024-04-03"), max_active_runs=3)
    assert [(p.logical_date, p.partition_key, p.date) for p in client.planned_runs(request)] == [
        (None, key, day(key[:10])) for key in keys
    ]
    assert dry_run(client, request) == [day("2024-04-01"), day("2024-04-02"), day("2024-04-03")]
    created = client.create(request)
    done = wait_completed(client, created.id)
    assert done.completed_at is not None
    runs = client.dag_runs("demo_partitioned", request.from_date, request.to_date, partitioned=True)
    assert sorted((r.partition_key, r.state, r.logical_date) for r in runs) == [
        (keys[0], "failed", None),
        (keys[1], "success", None),
        (keys[2], "failed", None),
    ]
    assert all(r.queued_at is not None and created.created_at <= r.queued_at <= done.completed_at for r in runs)
    assert client.dag_runs("demo_partitioned", request.from_date, request.to_date) == []  # no logical dates
    retry = BackfillRequest("demo_partitioned", day("2024-04-01"), day("2024-04-03"), reprocess_behavior="failed")
    assert [p.partition_key for p in client.planned_runs(retry)] == [keys[0], keys[2]]


def test_cancel_fails_queued_runs_without_a_start_and_completes_at_once(client: AirflowClient) -> None:
    """What the fake's explicit scheduling (used by the reconcile state machine) relies on: cancel sets
    `completed_at` and `is_paused` at once and fails every queued run with no start_date; a run that had
    started keeps its start_date. Nothing stays queued."""
    cancel_active(client, "demo_hourly")
    start, end = datetime(2024, 7, 1, 0, tzinfo=UTC), datetime(2024, 7, 1, 5, tzinfo=UTC)
    created = client.create(BackfillRequest("demo_hourly", start, end, reprocess_behavior="none", max_active_runs=1))
    cancelled = client.cancel(created.id)
    assert cancelled.completed_at is not None
    assert cancelled.is_paused is True
    runs = client.dag_runs("demo_hourly", start, end)
    assert len(runs) == 6
    assert [r for r in runs if r.state == "queued"] == []
    never_started = [r for r in runs if r.start_date is None]
    assert never_started, "with max_active_runs=1 most runs were still queued at the cancel"
    assert {r.state for r in never_started} == {"failed"}
    assert all(r.end_date is None for r in never_started)
    # what `run_summary` counts past a hundred failures with: a duration range leaves out runs never started
    # (a start_date range would not: Airflow lets nulls through it, as "not started yet"); before 3.2.0
    # there is no duration filter, and the client refuses to send one (the server would ignore it)
    params = {**_range_params(start, end), "state": "failed", **FINISHED_AFTER_START, "limit": 1}
    if not client.capabilities.duration_filter:
        with pytest.raises(AirflowVersionError):
            client.server.json("GET", "/api/v2/dags/demo_hourly/dagRuns", params=params)
        return
    started = client.server.json("GET", "/api/v2/dags/demo_hourly/dagRuns", params=params)["total_entries"]
    assert started == len([r for r in runs if r.state == "failed"]) - len(never_started)


def test_the_dag_listing_tells_what_the_details_tell(client: AirflowClient) -> None:
    """One listing page replaces a details call per DAG (a pass's reads must not grow with the DAGs): for a
    periodic DAG it must say the same, but `params`, `catchup` and the latest DAG version (details only); a DAG that
    is not periodic or not known is left to the details."""
    names = ["demo_daily", "demo_hourly", "demo_depends_on_past", "demo_manual", "nope_not_a_dag"]
    listed = client.dag_infos(names)
    assert sorted(listed) == ["demo_daily", "demo_depends_on_past", "demo_hourly"]
    for name, info in listed.items():
        details = client.dag(name, with_tasks=False)
        assert info == replace(details, params={}, latest_version=None, catchup=None)


# --- runs triggered by id (verification, publish: issue 28) ------------------------------------------------

VERIFY, PUBLISH = "demo_orders_verify", "demo_orders_publish"
CHECKED = {"days": 4, "rows": 400}  # what demo_orders_verify's check_rows makes of 2025-01-30 … 2025-02-02


def fresh_run_id(what: str) -> str:
    """A run id no earlier session made: a reused server (BACKFILLCTL_TEST_AIRFLOW_URL) keeps every run."""
    return f"backfillctl__contract__{what}__{secrets.token_hex(4)}"


def verify_conf(**extra: Any) -> dict[str, Any]:
    run = {"spec": "orders-fix", "environment": "staging", "stage": "rehearsal", "from_date": "2025-01-30",
           "to_date": "2025-02-02", "backfill_ids": [3], "ticket": "CHG-1"}  # fmt: skip
    return {"table": "orders", **extra, "backfillctl": run}


def wait_finished(client: AirflowClient, dag_id: str, run_id: str, timeout: float = 120) -> TriggeredRun:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = client.get_run(dag_id, run_id)
        assert run is not None, f"run {run_id} of {dag_id} vanished"
        if run.finished:
            return run
        time.sleep(1)
    raise AssertionError(f"run {run_id} of {dag_id} not finished after {timeout}s")


def count_runs(client: AirflowClient, dag_id: str) -> int:
    return int(client.server.json("GET", f"/api/v2/dags/{dag_id}/dagRuns", params={"limit": 1})["total_entries"])


def test_trigger_run_creates_a_run_with_the_conf_and_its_result_task_returns_the_dict(client: AirflowClient) -> None:
    run_id, conf = fresh_run_id("verify"), verify_conf()
    run, created = client.trigger_run(VERIFY, run_id, conf)
    assert (run.dag_id, run.run_id, run.state, run.start_date, run.end_date, created) == (
        VERIFY, run_id, "queued", None, None, True
    )  # fmt: skip
    assert dict(run.conf) == conf
    assert run.queued_at is not None
    assert run.queued_at.utcoffset() is not None
    done = wait_finished(client, VERIFY, run_id)
    assert (done.state, dict(done.conf)) == ("success", conf)
    assert done.start_date is not None
    assert done.end_date is not None
    assert done.start_date <= done.end_date
    assert client.task_result(VERIFY, run_id, "result") == {"passed": True, "metrics": CHECKED}
    assert client.task_result(VERIFY, run_id, "check_rows") == CHECKED
    assert client.task_result(VERIFY, run_id, "no_such_task") is None


def test_the_verification_dag_fails_as_its_conf_says(client: AirflowClient) -> None:
    """`expect: fail`: the run succeeds and `result` says passed false; `fail_task`: that task raises, the run
    fails, and a task that did not run returned nothing."""
    failing, broken = fresh_run_id("expect-fail"), fresh_run_id("fail-task")
    client.trigger_run(VERIFY, failing, verify_conf(expect="fail"))
    client.trigger_run(VERIFY, broken, verify_conf(fail_task="check_rows"))
    assert wait_finished(client, VERIFY, failing).state == "success"
    assert client.task_result(VERIFY, failing, "result") == {"passed": False, "metrics": CHECKED}
    assert wait_finished(client, VERIFY, broken).state == "failed"
    assert (client.task_result(VERIFY, broken, "check_rows"), client.task_result(VERIFY, broken, "result")) == (
        None,
        None,
    )


def test_trigger_run_again_adopts_the_run_and_starts_no_second_one(client: AirflowClient) -> None:
    run_id = fresh_run_id("publish")
    first, created = client.trigger_run(PUBLISH, run_id, {"attempt": 1})
    runs = count_runs(client, PUBLISH)
    calls = record_calls(client)
    again, created_again = client.trigger_run(PUBLISH, run_id, {"attempt": 2})
    assert (created, created_again) == (True, False)
    assert (again.dag_id, again.run_id, dict(again.conf)) == (PUBLISH, run_id, {"attempt": 1})  # the first one's
    assert again.queued_at == first.queued_at
    assert calls == [("POST", f"/api/v2/dags/{PUBLISH}/dagRuns"), ("GET", f"/api/v2/dags/{PUBLISH}/dagRuns/{run_id}")]
    assert count_runs(client, PUBLISH) == runs


def test_get_run_and_task_result_of_an_unknown_run_are_none(client: AirflowClient) -> None:
    run_id = fresh_run_id("unknown")
    assert client.get_run(VERIFY, run_id) is None
    assert client.get_run("nope_not_a_dag", run_id) is None
    assert client.task_result(VERIFY, run_id, "result") is None


def test_a_conf_the_dag_params_reject_is_airflows_message(client: AirflowClient) -> None:
    run_id = fresh_run_id("bad-conf")
    with pytest.raises(AirflowInvalid) as caught:
        client.trigger_run(VERIFY, run_id, verify_conf(expect="maybe"))
    # jsonschema's own text; the schema in it as the DAG declares it on 3.1.8, keys sorted on 3.2.2 and 3.3.2
    schema = since(
        client,
        {
            "3.1.0": "{'type': 'string', 'enum': ['pass', 'fail']}",
            "3.2.0": "{'enum': ['pass', 'fail'], 'type': 'string'}",
        },
    )
    detail = (
        "Invalid input for param expect: 'maybe' is not one of ['pass', 'fail'] Failed validating 'enum' in "
        f"schema:     {schema} On instance:     'maybe'"
    )
    assert (caught.value.status, caught.value.detail) == (400, detail)
    assert str(caught.value) == f"POST /api/v2/dags/{VERIFY}/dagRuns -> 400: {detail}"
    assert client.get_run(VERIFY, run_id) is None


def test_trigger_run_of_an_unknown_dag_says_so(client: AirflowClient) -> None:
    run_id = fresh_run_id("no-dag")
    with pytest.raises(AirflowNotFound) as caught:
        client.trigger_run("nope_not_a_dag", run_id, {})
    detail = since(client, {"3.1.0": "DAG", "3.2.0": "Dag"}) + " with dag_id: 'nope_not_a_dag' not found"
    assert str(caught.value) == (
        f"cannot trigger run {run_id}: Airflow has no DAG nope_not_a_dag "
        f"(POST /api/v2/dags/nope_not_a_dag/dagRuns -> 404: {detail})"
    )
    assert caught.value.detail == detail
