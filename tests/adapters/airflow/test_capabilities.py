"""Airflow 3.1, 3.2 and 3.3 from one client: capabilities from the reported version, the preflight's
verdict, and the queries and bodies each release is sent (the fake speaks 3.3.2's API whatever version it
reports, so anything a 3.1 server would ignore is caught here by the request log, not by the answers)."""

from __future__ import annotations

import json
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import fields
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs

import httpx
import pytest
from packaging.version import Version

from controller.adapters.airflow import AirflowClient
from controller.adapters.airflow.decode import dag_info_from_json
from controller.commands.reconcile.reconciler import Reconciler
from controller.core.model.airflow import BackfillRequest, periodic_from_summary
from controller.core.model.capabilities import (
    RUN_FILTERS,
    Capabilities,
    Support,
    capabilities_of,
    judge,
    newest,
    rerun_code,
)
from controller.core.model.secret import Secret
from controller.core.render.plan import plan_text
from controller.core.rules.schedules import unbackfillable
from controller.errors import AirflowVersionError
from tests.cli.test_cli_safety import run as run_cli
from tests.commands.reconcile.harness import Bench
from tests.fakes.airflow import FakeAirflow
from tests.fakes.calls import record_calls
from tests.fakes.http import write_json

REPO = Path(__file__).resolve().parents[3]
DAY = datetime(2025, 1, 1, tzinfo=UTC)


def caps(version: str) -> Capabilities:
    verdict = judge(version)
    assert verdict.capabilities is not None, verdict.message
    return verdict.capabilities


# --- the table -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "expected"),
    [
        ("3.1.0", set()),
        ("3.1.5", set()),
        ("3.1.6", {"run_on_latest_version", "rerun_on_latest_by_default"}),
        (
            "3.2.0",
            {"run_on_latest_version", "rerun_on_latest_by_default", "duration_filter", "conf_contains_filter"}
            | {"partition_key_filter", "partitioned_dags", "allowed_run_types", "empty_range_orphan"},
        ),
        ("3.3.0", {f for f in RUN_FILTERS.values() if f != "partition_date_filter"}),
        ("3.3.2", set(RUN_FILTERS.values())),
    ],
)
def test_each_release_has_the_facts_that_landed_by_it(version: str, expected: set[str]) -> None:
    found = capabilities_of(Version(version))
    have = {f.name for f in fields(found) if getattr(found, f.name) is True}
    assert expected <= have
    if version in ("3.1.0", "3.1.5"):
        assert have == set()
    if version == "3.3.2":
        assert "empty_range_orphan" not in have  # fixed in 3.3.1
    if version == "3.2.0":
        assert {"cursor_pagination", "null_dag_run_conf", "init_cutoff"}.isdisjoint(have)


def test_a_vendor_build_or_a_release_candidate_has_what_its_release_has() -> None:
    assert caps("3.1.8+astro.1") == capabilities_of(Version("3.1.8"), "3.1.8+astro.1")
    assert caps("3.2.2rc1") == capabilities_of(Version("3.2.2"), "3.2.2rc1")
    assert not caps("3.1.5+composer").run_on_latest_version


@pytest.mark.parametrize(
    ("version", "support", "message"),
    [
        ("3.1.8", Support.SUPPORTED, ""),
        ("3.3.2", Support.SUPPORTED, ""),
        (
            "3.0.6",
            Support.REFUSED,
            "Airflow 3.0.6 is not supported: backfillctl needs Airflow 3.1, 3.2 or 3.3, because 3.0.x cannot be "
            "backfilled safely: its reprocessing rewrote other DAGs' runs at the same dates (3.0.0-3.0.1), "
            "asset-triggered DAGs get an empty backfill, and its API has no run_on_latest_version, no duration or "
            "conf filters and no triggering user",
        ),
        ("2.10.5", Support.REFUSED, "Airflow 2.10.5 is not supported: backfillctl needs Airflow 3.1, 3.2 or 3.3"),
        ("banana", Support.REFUSED, "the server reports version 'banana', which is not a PEP 440 version"),
        (
            "3.4.0b2",
            Support.PREVIEW,
            "Airflow 3.4.0b2: the 3.4 line is a preview in backfillctl (tested on 3.4.0b2; supported: 3.1, 3.2 or 3.3)",
        ),
        (
            "3.4.1",
            Support.PREVIEW,
            "Airflow 3.4.1: the 3.4 line is a preview in backfillctl (tested on 3.4.0b2; supported: 3.1, 3.2 or 3.3)",
        ),
        (
            "3.5.0",
            Support.UNTESTED,
            "Airflow 3.5.0 is newer than the releases backfillctl is tested on (3.1, 3.2 or 3.3; 3.4.0b2 as a preview)",
        ),
    ],
)
def test_the_verdict_on_each_line(version: str, support: Support, message: str) -> None:
    verdict = judge(version)
    assert (verdict.support, verdict.message) == (support, message)


def test_an_untested_release_gets_the_capabilities_its_version_has() -> None:
    assert caps("3.5.0") == capabilities_of(Version("3.5.0"), "3.5.0")
    assert (caps("3.4.0").backfill_page, caps("3.3.2").backfill_page) == (True, False)  # Airflow 3.4's UI page


THREE_FOUR = {"backfill_slots", "drain_dag", "reserved_conf_refused", "user_display_name", "backfills_not_starved"}


@pytest.mark.parametrize("version", ["3.4.0b2", "3.4.0", "3.4.1+astro.1"])
def test_3_4_has_each_named_capability_and_3_3_none(version: str) -> None:
    have = {name for name in THREE_FOUR | {"backfill_page"} if getattr(caps(version), name)}
    assert have == THREE_FOUR | {"backfill_page"}
    assert not any(getattr(caps("3.3.2"), name) for name in THREE_FOUR)


# --- DAG fields a release lacks ------------------------------------------------------------------------

DETAILS_3_1 = {  # what 3.1.8's DAG details say of examples/dags/demo_daily.py (no timetable_periodic)
    "dag_id": "demo_daily",
    "is_paused": False,
    "is_stale": False,
    "has_import_errors": False,
    "timetable_summary": "0 0 * * *",
    "timetable_description": "At 00:00",
    "max_active_tasks": 16,
    "asset_expression": None,
}


@pytest.mark.parametrize(
    ("summary", "periodic"),
    [
        ("0 0 * * *", True),
        ("1 day, 0:00:00", True),
        ("3 events", True),
        (None, False),
        ("None", False),
        ("@once", False),
        ("@continuous", False),
        ("Asset", False),
        ("Asset or 0 0 * * *", True),
        ("Asset or @once", False),
    ],
)
def test_periodic_from_the_summary_before_3_3(summary: str | None, periodic: bool) -> None:
    assert periodic_from_summary(summary) is periodic


def test_a_daily_dag_on_3_1_is_backfillable_and_a_manual_one_is_not() -> None:
    daily = dag_info_from_json("demo_daily", DETAILS_3_1, caps("3.1.8"))
    assert (daily.is_backfillable, daily.partitioned, unbackfillable(daily)) == (True, False, None)
    manual = {**DETAILS_3_1, "timetable_summary": None, "timetable_description": "Never, external triggers only"}
    info = dag_info_from_json("demo_manual", manual, caps("3.1.8"))
    assert unbackfillable(info) == (
        "DAG demo_manual has no schedule (schedule=None): it runs only when triggered, so there are no dates to "
        "backfill; Airflow cannot backfill it"
    )


def test_fields_a_release_does_not_have_are_never_read_from_it() -> None:
    """A 3.1 server cannot have them; a stray one (a proxy, a fork) must not change the verdict."""
    stray = {**DETAILS_3_1, "timetable_periodic": False, "is_backfillable": False, "timetable_partitioned": True}
    info = dag_info_from_json("demo_daily", stray, caps("3.1.8"))
    assert (info.is_backfillable, info.partitioned) == (True, False)


def test_a_partitioned_dag_is_refused_where_its_runs_cannot_be_filtered_by_partition_date() -> None:
    partitioned = {**DETAILS_3_1, "timetable_partitioned": True, "timetable_periodic": True, "is_backfillable": True}
    assert unbackfillable(dag_info_from_json("p", partitioned, caps("3.3.1"))) is None
    refused = dag_info_from_json("p", partitioned, caps("3.2.2"))
    assert unbackfillable(refused) == (
        "DAG p is partitioned, and Airflow 3.2.2 cannot filter DAG runs by partition date (partition_date_gte/lte: "
        "Airflow 3.3.1), so backfillctl cannot count its runs exactly; upgrade Airflow to 3.3.1 or newer to "
        "backfill it"
    )


# --- bodies ----------------------------------------------------------------------------------------------


def recording_client(version: str, fake: FakeAirflow | None = None) -> tuple[AirflowClient, list[httpx.Request]]:
    fake = fake or FakeAirflow(now=lambda: datetime(2026, 11, 29, tzinfo=UTC))
    fake.version = version
    sent: list[httpx.Request] = []
    inner = fake.transport()

    def record(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return inner.handle_request(request)

    transport = httpx.MockTransport(record)
    client = AirflowClient("http://fake", transport=transport, username="admin", password=Secret("admin"))
    assert client.capabilities.version == version  # read now: the fake may report another version later
    return client, sent


def request(**fields: object) -> BackfillRequest:
    return BackfillRequest("demo_daily", DAY, DAY + timedelta(days=2), **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("version", "asked", "sent"),
    [
        ("3.1.5", None, None),
        ("3.1.5", False, None),
        ("3.1.6", None, True),
        ("3.3.2", None, True),
        ("3.3.2", False, False),
    ],
)
def test_run_on_latest_version_is_explicit_where_the_release_has_it(
    version: str, asked: bool | None, sent: bool | None
) -> None:
    client, requests = recording_client(version)
    client.planned_runs(request(run_on_latest_version=asked))
    body = json.loads(requests[-1].content)
    assert body.get("run_on_latest_version", "absent") == ("absent" if sent is None else sent)


def test_run_on_latest_version_true_is_refused_before_3_1_6_not_dropped() -> None:
    client, requests = recording_client("3.1.5")
    with pytest.raises(AirflowVersionError) as caught:
        client.planned_runs(request(run_on_latest_version=True))
    assert caught.value.message == (
        "run_on_latest_version: true needs Airflow 3.1.6 or newer; Airflow 3.1.5 re-runs each run on the DAG "
        "version it first ran with (remove the field, or upgrade Airflow)"
    )
    assert [r.url.path for r in requests] == ["/auth/token", "/api/v2/version"]  # no backfill route was called


def test_an_unset_conf_is_never_sent_as_null() -> None:
    client, requests = recording_client("3.1.8")
    client.planned_runs(request())
    assert "dag_run_conf" not in json.loads(requests[-1].content)


def test_the_plan_says_which_code_the_runs_use() -> None:
    assert rerun_code(caps("3.1.5"), None) == (
        "new runs: the latest DAG version; re-runs: the DAG version each run first ran with "
        "(Airflow 3.1.5 has no run_on_latest_version)"
    )
    assert rerun_code(caps("3.2.2"), None) == "every run: the latest DAG version (run_on_latest_version: true)"
    assert rerun_code(caps("3.3.2"), False) == (
        "new runs: the latest DAG version; re-runs: the DAG version each run first ran with"
    )


# --- queries -----------------------------------------------------------------------------------------------


def ignored_by(version: str, sent: list[httpx.Request]) -> list[str]:
    have = caps(version)
    return sorted(
        f"{r.url.path}?{name}"
        for r in sent
        for name in parse_qs(r.url.query.decode())
        if name in RUN_FILTERS and not getattr(have, RUN_FILTERS[name])
    )


def big_flaky_backfill(fake: FakeAirflow) -> dict[str, object]:
    """demo_flaky over 300 days: a failure on each odd day of a month, past a page of failed runs."""
    client, _ = recording_client("3.3.2", fake)
    created = client.create(BackfillRequest("demo_flaky", DAY, DAY + timedelta(days=299), max_active_runs=400))
    for _ in range(5):  # the tiny scheduler finishes up to max_active_runs runs per request
        client.get_backfill(created.id)
    failed = sorted(date for date, run in ((d, r) for (_, d), r in fake.runs.items()) if run["state"] == "failed")
    for (_, date), run in fake.runs.items():
        if date in failed[:3]:  # three failures cancelled while queued: they never started
            run.update(start_date=None, end_date=None)
        else:  # the tiny scheduler starts and ends a run at one instant: give each a second
            run.update(end_date=(datetime.fromisoformat(run["end_date"]) + timedelta(seconds=1)).isoformat())
    return {"id": created.id, "from": created.from_date, "to": created.to_date}


def test_a_3_1_server_is_never_sent_a_filter_it_would_ignore_and_the_counts_are_exact() -> None:
    fake = FakeAirflow(now=lambda: datetime(2026, 11, 29, tzinfo=UTC))
    made = big_flaky_backfill(fake)
    on_31, sent_31 = recording_client("3.1.8", fake)
    on_33, sent_33 = recording_client("3.3.2", fake)
    low, high = made["from"], made["to"]
    assert isinstance(low, datetime)
    assert isinstance(high, datetime)
    old, new = on_31.run_summary("demo_flaky", low, high), on_33.run_summary("demo_flaky", low, high)
    assert ignored_by("3.1.8", sent_31) == []
    assert ignored_by("3.1.8", sent_33) != []  # the 3.3 strategy would be wrong on 3.1: the test can fail
    odd = sum(1 for n in range(300) if (DAY + timedelta(days=n)).day % 2 == 1)
    assert old.counts == new.counts == {"failed": odd, "success": 300 - odd}
    assert odd == 153
    assert (old.never_started, new.never_started) == (3, 3)
    assert old.failed_dates == new.failed_dates
    assert len(old.failed_dates) == 100
    assert old.mean_duration == new.mean_duration == 1.0
    # what counting on the client costs: every failed run read (a call per 100 failures) instead of one
    # count of the started ones: the same 6 calls at 153 failures, one more per further hundred
    assert len([r for r in sent_31 if r.url.path.endswith("/dagRuns")]) == 6
    assert len([r for r in sent_33 if r.url.path.endswith("/dagRuns")]) == 6


def test_a_filter_the_server_lacks_is_refused_by_the_client() -> None:
    client, requests = recording_client("3.1.8")
    with pytest.raises(AirflowVersionError) as caught:
        client.server.json("GET", "/api/v2/dags/demo_daily/dagRuns", params={"duration_gte": "1", "limit": 1})
    assert caught.value.message == "GET /api/v2/dags/demo_daily/dagRuns: Airflow 3.1.8 has no filter duration_gte"
    assert [r.url.path for r in requests] == ["/auth/token", "/api/v2/version"]


def test_a_client_told_its_capabilities_does_not_ask_again() -> None:
    fake = FakeAirflow()
    client = AirflowClient("http://fake", transport=fake.transport(), token=Secret("t"), capabilities=newest())
    calls = record_calls(client)
    assert client.capabilities == newest()
    assert calls == []


# --- the preflight, through the CLI --------------------------------------------------------------------------


class VersionOnly(BaseHTTPRequestHandler):
    version = "3.0.6"

    def do_GET(self) -> None:
        write_json(self, 200, {"version": self.server.version} if self.path == "/api/v2/version" else {})  # type: ignore[attr-defined]

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture
def server() -> Iterator[ThreadingHTTPServer]:
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), VersionOnly)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield httpd
    httpd.shutdown()
    httpd.server_close()


def cli(tmp_path: Path, url: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return run_cli(tmp_path, *args, BACKFILLCTL_AIRFLOW_URL=url, BACKFILLCTL_AIRFLOW_TOKEN="t", **env)


def test_a_3_0_server_is_refused_at_the_preflight_with_the_reason(tmp_path: Path, server: ThreadingHTTPServer) -> None:
    server.version = "3.0.6"  # type: ignore[attr-defined]
    result = cli(tmp_path, f"http://127.0.0.1:{server.server_address[1]}", "plan", "--no-store")
    assert result.returncode == 1
    assert "Airflow 3.0.6 is not supported: backfillctl needs Airflow 3.1, 3.2 or 3.3, because 3.0.x" in result.stderr
    assert "use an Airflow 3.1, 3.2 or 3.3 api-server (upgrade this one)" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_preview_line_is_accepted_with_one_warning_line(tmp_path: Path, server: ThreadingHTTPServer) -> None:
    server.version = "3.4.0b2"  # type: ignore[attr-defined]
    result = cli(tmp_path, f"http://127.0.0.1:{server.server_address[1]}", "plan", "--no-store")
    warned = [line for line in result.stderr.splitlines() if "PREVIEW AIRFLOW LINE" in line]
    assert len(warned) == 1, result.stderr
    assert warned[0].endswith(
        "PREVIEW AIRFLOW LINE: Airflow 3.4.0b2: the 3.4 line is a preview in backfillctl (tested on 3.4.0b2; "
        "supported: 3.1, 3.2 or 3.3)"
    )
    assert "refusing to run against an untested release" not in result.stderr
    assert "BACKFILLCTL_ALLOW_UNTESTED_AIRFLOW" not in result.stderr


def test_a_release_newer_than_tested_needs_the_opt_in(tmp_path: Path, server: ThreadingHTTPServer) -> None:
    server.version = "3.5.0"  # type: ignore[attr-defined]
    url = f"http://127.0.0.1:{server.server_address[1]}"
    refused = cli(tmp_path, url, "plan", "--no-store")
    assert refused.returncode == 1
    assert "refusing to run against an untested release" in refused.stderr
    assert (
        "set BACKFILLCTL_ALLOW_UNTESTED_AIRFLOW=1 to go on with the newest known release's API, or use Airflow "
        "3.1, 3.2 or 3.3" in refused.stderr
    )
    allowed = cli(tmp_path, url, "plan", "--no-store", BACKFILLCTL_ALLOW_UNTESTED_AIRFLOW="1")
    assert (
        "UNTESTED AIRFLOW RELEASE (BACKFILLCTL_ALLOW_UNTESTED_AIRFLOW=1): Airflow 3.5.0 is newer than the releases "
        "backfillctl is tested on (3.1, 3.2 or 3.3; 3.4.0b2 as a preview); going on with the API of Airflow "
        "3.4.0b2, the newest known" in allowed.stderr
    )
    assert "refusing to run against an untested release" not in allowed.stderr


# --- the plan says which release and which code --------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "asked", "code"),
    [
        (
            "3.1.5",
            None,
            "Airflow 3.1.5: new runs: the latest DAG version; re-runs: the DAG version each run first ran with "
            "(Airflow 3.1.5 has no run_on_latest_version)",
        ),
        ("3.2.2", None, "Airflow 3.2.2: every run: the latest DAG version (run_on_latest_version: true)"),
        (
            "3.3.2",
            "false",
            "Airflow 3.3.2: new runs: the latest DAG version; re-runs: the DAG version each run first ran with",
        ),
    ],
)
def test_a_create_in_the_plan_names_the_release_and_the_code_its_runs_use(
    tmp_path: Path, version: str, asked: str | None, code: str
) -> None:
    bench = Bench(tmp_path, fake=FakeAirflow(now=lambda: datetime(2026, 11, 29, tzinfo=UTC)))
    extra = {} if asked is None else {"run_on_latest_version": asked}
    bench.spec("jan", start="2025-01-01", end="2025-01-03", mar=1, **extra)
    transport = bench.fake.transport()  # type: ignore[union-attr]
    auth = {"username": "admin", "password": Secret("admin")}
    client = AirflowClient("http://fake", transport=transport, capabilities=caps(version), **auth)
    try:
        plan = Reconciler(bench.settings(), bench.store, client).plan().plan
        (item,) = plan.items
        assert (item.kind.value, item.code, item.facts["code"]) == ("create", code, code)
        assert code in plan_text(plan)
    finally:
        client.close()
        bench.close()
