"""Partitioned DAGs end to end against the real Apache Airflow 3.3.2 (examples/dags/demo_partitioned.py:
a CronPartitionTimetable DAG whose partitions of odd days fail).

Airflow 3.3.2 reprocesses a partition by creating a new run beside the old one, so after the second spec
the range holds 6 runs for 4 partitions; each spec counts the runs its own backfill created.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from controller.commands.reconcile import dryrun
from tests.adapters.airflow.test_contract import day
from tests.commands.reconcile.harness import Bench, mutating
from tests.commands.reconcile.test_scenarios_real import pause, run_cli
from tests.conftest import AIRFLOW_VERSION
from tests.fakes.calls import record_calls

pytestmark = pytest.mark.airflow
DAG = "demo_partitioned"
KEYS = [f"2023-03-0{d}T00:00:00" for d in (1, 2, 3, 4)]


@pytest.fixture
def bench(tmp_path: Path, airflow_url: str) -> Iterator[Bench]:
    b = Bench(tmp_path, url=airflow_url)
    yield b
    with b.client() as client:
        for backfill in client.list_backfills(DAG):
            if backfill.active:
                client.cancel(backfill.id)
    b.close()


def test_partitioned_failures_reprocess_queue_report_and_idempotence(bench: Bench) -> None:
    bench.spec("parts-a", dag=DAG, start="2023-03-01", end="2023-03-04", mar=2, reprocess="none", expected_runs=4)
    bench.spec("parts-b-retry", dag=DAG, start="2023-03-01", end="2023-03-04", mar=2, reprocess="failed")
    planned = run_cli(bench, "plan", "--detailed-exitcode")
    assert planned.returncode == 4, planned.stderr
    assert planned.stdout.splitlines()[:4] == [
        "+ create    parts-a        demo_partitioned  2023-03-01 → 2023-03-04  reprocess none  max_active_runs 2  "
        "forward  runs 4 of 4 in range, partitions 2023-03-01T00:00:00 … 2023-03-04T00:00:00  up to 32 tasks at once  "
        f"Airflow {AIRFLOW_VERSION}, DAG version 1: every run: the latest DAG version (run_on_latest_version: true)  "
        "approvers bob  ticket CHG-1  [Pending]",
        "    pools: default_pool 128 slots (1 task)",
        "    metadata database: adds up to 4 DAG runs and 4 task instances (4 runs × 1 task)",
        "… queued    parts-b-retry  demo_partitioned  2023-03-01 → 2023-03-04  reprocess failed  max_active_runs 2  "
        "forward  up to 32 tasks at once  approvers bob  ticket CHG-1  — queued behind parts-a  [Queued]",
    ]

    first = bench.run()
    assert [(i.spec, o) for i, o in first.applied] == [("parts-a", "created")]
    done = bench.until_terminal(passes=80, wait=pause)
    assert bench.phases(done) == {"parts-a": "CompletedWithFailures", "parts-b-retry": "CompletedWithFailures"}
    failed = "failed partitions: 2023-03-01T00:00:00, 2023-03-03T00:00:00"
    assert {i.spec: i.reason for i in done.current.items} == {"parts-a": failed, "parts-b-retry": failed}

    a, b = (bench.store.binding(n) for n in ("parts-a", "parts-b-retry"))
    assert a is not None
    assert b is not None
    assert a.runs is not None
    assert b.runs is not None
    assert b.created is not None
    assert (a.runs.counts, a.runs.total) == ({"failed": 2, "success": 2}, 4)
    assert (b.runs.counts, b.runs.total) == ({"failed": 2}, 2)  # only the runs it created
    assert b.runs.failed_partitions == (KEYS[0], KEYS[2])
    assert (b.created.runs_to_create, b.created.runs_in_range) == (2, 4)
    assert (b.created.first_partition, b.created.last_partition) == (KEYS[0], KEYS[2])
    with bench.client() as client:
        runs = client.dag_runs(DAG, day("2023-03-01"), day("2023-03-04"), partitioned=True)
        # the reprocess created new runs beside the failed ones: 6 runs for 4 partitions
        assert sorted((r.partition_key, r.state) for r in runs) == [
            (KEYS[0], "failed"),
            (KEYS[0], "failed"),
            (KEYS[1], "success"),
            (KEYS[2], "failed"),
            (KEYS[2], "failed"),
            (KEYS[3], "success"),
        ]
        assert all(r.logical_date is None for r in runs)
        ours = [x for x in client.list_backfills(DAG) if x.from_date == day("2023-03-01")]
        assert [(x.id, x.reprocess_behavior) for x in ours] == [
            (a.backfill_id, "none"),
            (b.backfill_id, "failed"),
        ]

    reconciler = bench.reconciler()  # an idempotent second pass: nothing changes, nothing is called
    calls = record_calls(reconciler.client)
    again = reconciler.run_once()
    assert again.applied == []
    assert mutating(calls) == []
    assert calls == []

    for command in (["plan", "--detailed-exitcode"], ["status"], ["report", "parts-b-retry"], ["audit", "verify"]):
        assert run_cli(bench, *command).returncode == 0, command
    status = json.loads(run_cli(bench, "status", "--format", "json").stdout)
    assert [(s["spec"], s["phase"], s["runs"]) for s in status["specs"]] == [
        ("parts-a", "CompletedWithFailures", {"success": 2, "failed": 2, "running": 0, "queued": 0, "total": 4}),
        ("parts-b-retry", "CompletedWithFailures", {"success": 0, "failed": 2, "running": 0, "queued": 0, "total": 2}),
    ]
    # each as it ended: parts-a's coverage is measured before the pass creates parts-b-retry on its queue
    covered = re.escape(f"{failed} · version coverage: 2 of 4 intervals on DAG version ") + r"\d+ \(2 failed\)"
    assert [bool(re.fullmatch(covered, s["note"])) for s in status["specs"]] == [True, True], status["specs"]
    report = run_cli(bench, "report", "parts-b-retry").stdout
    assert (
        "- **DAG**: `demo_partitioned`, 2023-03-01T00:00:00Z → 2023-03-04T00:00:00Z, reprocess `failed`, "
        "max_active_runs 2, forward, partitions 2023-03-01T00:00:00 … 2023-03-03T00:00:00\n"
    ) in report
    assert (
        "- **Intervals**: 0 complete, 2 failed (2023-03-01T00:00:00, 2023-03-03T00:00:00), 2 skipped of 4 in range\n"
        in report
    )
    assert f"outcome=CompletedWithFailures spec=parts-b-retry dag=demo_partitioned backfill={b.backfill_id}" in report
    audit = run_cli(bench, "audit", "show", "--spec", "parts-a").stdout
    assert f"— {failed}\n" in audit
    assert bench.store.verify().ok


def test_future_partition_range_is_refused_by_validate_plan_and_reconcile(bench: Bench) -> None:
    today = datetime.now(UTC).date()
    start, end = (today - timedelta(days=2)).isoformat(), (today + timedelta(days=3)).isoformat()
    bench.spec("future-parts", dag=DAG, start=start, end=end)
    bench.spec("manual", dag="demo_manual", start="2023-03-01", end="2023-03-02")
    bench.spec("asset", dag="demo_asset", start="2023-03-01", end="2023-03-02")
    validated = run_cli(bench, "validate")
    assert validated.returncode == 1
    lines = validated.stdout.splitlines()
    assert lines[:2] == [
        f"{bench.specs}/asset.yaml:3:9: $.dag_id: DAG demo_asset is triggered by assets, not by a time schedule: "
        "there are no dates to backfill; backfill the DAG that updates the assets instead; Airflow cannot backfill it",
        "  hint: only DAGs with a periodic schedule can be backfilled",
    ]
    lines = lines[2:]
    assert lines[0].startswith(
        f"{bench.specs}/future-parts.yaml:5:10: $.to_date: to_date {end}T00:00:00Z is after now ("
    )
    assert lines[0].endswith(
        ") and demo_partitioned is a partitioned DAG: "
        "Airflow would create runs for partitions that have not happened yet"
    )
    assert lines[1:] == [
        "  hint: end the range at or before now, or set `allow_future_partitions: true` in the policy if runs for "
        "partitions that have not happened yet are intended",
        f"{bench.specs}/manual.yaml:3:9: $.dag_id: DAG demo_manual has no schedule (schedule=None): it runs only when "
        "triggered, so there are no dates to backfill; Airflow cannot backfill it",
        "  hint: only DAGs with a periodic schedule can be backfilled",
        "3 errors, 0 warnings in 3 files.",
    ]
    planned = run_cli(bench, "plan")
    assert planned.returncode == 1, planned.stderr
    assert "Plan: 0 to create, 0 to pause, 0 to cancel, 0 queued, 3 blocked." in planned.stdout
    reconciled = run_cli(bench, "reconcile", "--once")
    assert reconciled.returncode == 1
    assert "error: future-parts: to_date " in reconciled.stderr
    assert "error: manual: DAG demo_manual has no schedule (schedule=None)" in reconciled.stderr
    assert "error: asset: DAG demo_asset is triggered by assets" in reconciled.stderr
    assert "Traceback" not in planned.stderr + reconciled.stderr
    with bench.client() as client:
        assert [x for x in client.list_backfills(DAG) if x.to_date.date() > today] == []
    bench.policy("version: 1\nallow_future_partitions: true\n")
    allowed = run_cli(bench, "plan", "--format", "json")
    (item,) = [i for i in json.loads(allowed.stdout)["items"] if i["spec"] == "future-parts"]
    assert (item["action"], item["runs_to_create"]) == ("create", 6)  # Airflow would run the 3 future partitions


def test_a_partitioned_dags_cron_makes_twenty_days_one_dry_run(bench: Bench) -> None:
    """demo_partitioned's "0 0 * * *" is one partition a day at most: 20 days are one dry run (and `none` one
    more with `completed` for the runs in range), not 14 days and then the rest."""
    bench.spec("parts-whole", dag=DAG, start="2021-07-01", end="2021-07-20", mar=2, reprocess="none")
    plan = bench.reconciler().plan().plan
    (item,) = plan.items
    assert (item.kind.value, item.runs_to_create, item.runs_in_range) == ("create", 20, 20)
    asked = [
        (body["reprocess_behavior"], body["from_date"], body["to_date"])
        for request in bench.sent
        if (request.method, request.url.path) == ("POST", "/api/v2/backfills/dry_run")
        for body in [json.loads(request.content)]
    ]
    whole = ("2021-07-01T00:00:00Z", "2021-07-20T00:00:00Z")
    assert asked == [("none", *whole), ("completed", *whole)]


def test_a_partitioned_dry_run_over_more_than_one_sub_range_is_asked_in_parts_and_merged(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """20 daily partitions of a timetable whose rate is not known (a custom one's summary; demo_partitioned's cron
    would make them one dry run): the first dry run covers 14 days, the second the rest (aimed at 2,000 runs);
    `none` asks both again with `completed` for the runs in range. Only dry runs: nothing is created (no date of
    2021 ever ran on demo_partitioned)."""
    monkeypatch.setattr(dryrun, "runs_a_day", lambda _observation: None)
    bench.spec("parts-split", dag=DAG, start="2021-06-01", end="2021-06-20", mar=2, reprocess="none")
    plan = bench.reconciler().plan().plan
    (item,) = plan.items
    assert (item.kind.value, item.runs_to_create, item.runs_in_range) == ("create", 20, 20)
    assert item.partitions == ("2021-06-01T00:00:00", "2021-06-20T00:00:00")
    asked = [
        (body["reprocess_behavior"], body["from_date"], body["to_date"])
        for request in bench.sent
        if (request.method, request.url.path) == ("POST", "/api/v2/backfills/dry_run")
        for body in [json.loads(request.content)]
    ]
    bounds = [
        ("2021-06-01T00:00:00Z", "2021-06-14T23:59:59.999999Z"),
        ("2021-06-15T00:00:00Z", "2021-06-20T00:00:00Z"),
    ]
    assert asked == [("none", *b) for b in bounds] + [("completed", *b) for b in bounds]
