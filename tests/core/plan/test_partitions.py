"""Partitioned DAGs and unbackfillable schedules in the pure core: counting, refusals, plan and rendering.

The run and dry-run JSON below is what Airflow 3.3.2 answered for a CronPartitionTimetable DAG (FACTS §11).
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from controller.adapters.airflow.decode import dag_run_from_json, planned_run_from_json, schedule_from_json
from controller.commands.reconcile.specfiles import validate_paths
from controller.commands.verbs.validate import check_dags
from controller.core.model.airflow import Backfill, DagInfo, DagRun, PlannedRun, Schedule, summarise
from controller.core.model.binding import Binding, CreateFacts, Phase
from controller.core.model.capabilities import newest
from controller.core.model.policy import Policy
from controller.core.model.spec import BackfillSpec, ReprocessBehavior
from controller.core.plan.queue import make_plan
from controller.core.plan.values import Kind
from controller.core.plan.world import DagObservation, DryRun, World
from controller.core.render.change_record import change_record
from controller.core.render.plan import plan_markdown, plan_text
from controller.core.render.report_markdown import report_markdown
from controller.core.rules.schedules import (
    failed_partitions_text,
    future_partitions,
    partition_range,
    runs_of,
    unbackfillable,
)
from controller.errors import AirflowBadAnswer, AirflowNotFound, AirflowUnavailable

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def t(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def key(day: int) -> str:
    return f"2024-03-0{day}T00:00:00"


def run(day: int, state: str, queued: str, started: bool = True) -> DagRun:
    return DagRun(
        f"backfill__2024-03-0{day}T00:00:00+00:00__{key(day)}__{queued[-2:]}",
        None,
        state,
        t(queued) if started else None,
        t(queued) if started and state in ("success", "failed") else None,
        partition_key=key(day),
        partition_date=t(f"{key(day)}Z"),
        queued_at=t(queued),
    )


FIRST = "2026-11-30T00:43:07Z"  # the reprocess-none backfill's runs
SECOND = "2026-11-30T00:43:18Z"  # the reprocess-failed backfill's runs, beside the old ones
RANGE = [
    run(1, "failed", FIRST),
    run(2, "success", FIRST),
    run(3, "failed", FIRST),
    run(4, "success", FIRST),
    run(1, "failed", SECOND),
    run(3, "success", SECOND),
]


def partitioned(dag: str = "demo_partitioned") -> DagInfo:
    return DagInfo(dag, False, False, False, True, False, partitioned=True, schedule=Schedule(summary="0 0 * * *"))


def spec(name: str = "parts", reprocess: str = "none", to_date: str = "2024-03-04T00:00:00Z") -> BackfillSpec:
    return BackfillSpec(
        name=name,
        dag_id="demo_partitioned",
        from_date=t("2024-03-01T00:00:00Z"),
        to_date=t(to_date),
        reprocess_behavior=ReprocessBehavior(reprocess),
        max_active_runs=2,
        ticket="CHG-1",
        reason="partition test",
        requested_by="alice",
        approvers=("bob",),
        path=f"specs/{name}.yaml",
        digest=f"d-{name}",
    )


# --- counting ---------------------------------------------------------------------------------------------


def test_latest_run_per_partition_decides_and_superseded_runs_are_not_counted() -> None:
    summary = summarise(RANGE)
    assert dict(summary.counts) == {"failed": 1, "success": 3}
    assert summary.total == 4
    assert summary.failed_partitions == (key(1),)
    assert summary.failed_dates == ()
    assert summary.superseded == 2
    assert summary.as_json()["failed_partitions"] == ["2024-03-01T00:00:00"]


def test_latest_run_is_by_queue_time_not_list_order() -> None:
    summary = summarise(list(reversed(RANGE)))
    assert dict(summary.counts) == {"failed": 1, "success": 3}
    assert summary.failed_partitions == (key(1),)


def test_runs_without_partition_key_are_counted_as_before() -> None:
    plain = [
        DagRun("backfill__2025-01-01", t("2025-01-01T00:00:00Z"), "failed", NOW, NOW),
        DagRun("backfill__2025-01-02", t("2025-01-02T00:00:00Z"), "success", NOW, NOW),
        DagRun("backfill__2025-01-03", t("2025-01-03T00:00:00Z"), "failed", None, None),
    ]
    summary = summarise(plain)
    assert (dict(summary.counts), summary.failed_dates, summary.never_started, summary.superseded) == (
        {"failed": 2, "success": 1},
        (t("2025-01-01T00:00:00Z"),),
        1,
        0,
    )


def backfill(id_: int, created: str, completed: str | None, reprocess: str = "none") -> Backfill:
    return Backfill(
        id_,
        "demo_partitioned",
        t("2024-03-01T00:00:00Z"),
        t("2024-03-04T00:00:00Z"),
        reprocess,
        2,
        False,
        None,
        t(created),
        None if completed is None else t(completed),
    )


def test_a_backfill_counts_only_the_runs_it_created() -> None:
    first = backfill(3, "2026-11-30T00:43:06Z", "2026-11-30T00:43:17Z")
    second = backfill(4, "2026-11-30T00:43:18Z", None, "failed")
    assert [r.queued_at for r in runs_of(first, RANGE)] == [t(FIRST)] * 4
    mine = summarise(runs_of(second, RANGE))
    assert (dict(mine.counts), mine.total, mine.failed_partitions) == ({"failed": 1, "success": 1}, 2, (key(1),))
    old = summarise(runs_of(first, RANGE))
    assert (dict(old.counts), old.failed_partitions) == ({"failed": 2, "success": 2}, (key(1), key(3)))


# --- refusals -----------------------------------------------------------------------------------------------


def test_future_partition_range_is_refused_with_now_as_a_parameter() -> None:
    future = spec(to_date="2026-12-05T00:00:00Z")
    assert future_partitions(future, partitioned(), Policy(), NOW) == (
        "to_date 2026-12-05T00:00:00Z is after now (2026-11-30T12:00:00Z) and demo_partitioned is a partitioned "
        "DAG: Airflow would create runs for partitions that have not happened yet"
    )
    assert future_partitions(future, partitioned(), Policy(allow_future_partitions=True), NOW) is None
    assert (
        future_partitions(future, DagInfo("demo_partitioned", False, False, False, True, False), Policy(), NOW) is None
    )
    assert future_partitions(future, None, Policy(), NOW) is None
    assert future_partitions(spec(to_date="2026-11-30T12:00:00Z"), partitioned(), Policy(), NOW) is None


def info(schedule: Schedule, backfillable: bool = False) -> DagInfo:
    return DagInfo("d", False, False, False, backfillable, None, schedule=schedule)


@pytest.mark.parametrize(
    ("schedule", "message"),
    [
        (
            Schedule(periodic=False, summary=None, description="Never, external triggers only"),
            "DAG d has no schedule (schedule=None): it runs only when triggered, so there are no dates to backfill; "
            "Airflow cannot backfill it",
        ),
        (
            Schedule(periodic=False, summary="@once", description="Once, as soon as possible"),
            "DAG d runs once (schedule='@once'): there is no series of dates to backfill; Airflow cannot backfill it",
        ),
        (
            Schedule(periodic=False, summary="@continuous", description="As frequently as possible"),
            "DAG d runs continuously (schedule='@continuous'): its runs have no dates to backfill; "
            "Airflow cannot backfill it",
        ),
        (
            Schedule(periodic=False, summary="Asset", description="Triggered by assets", asset_triggered=True),
            "DAG d is triggered by assets, not by a time schedule: there are no dates to backfill; backfill the DAG "
            "that updates the assets instead; Airflow cannot backfill it",
        ),
        (
            Schedule(periodic=False, summary="Partitioned Asset", description="Triggered by assets"),
            "DAG d is triggered by assets, not by a time schedule: there are no dates to backfill; backfill the DAG "
            "that updates the assets instead; Airflow cannot backfill it",
        ),
        (
            Schedule(
                periodic=False, summary="PartitionedAtRuntime", description="Never, partition key(s) set at runtime"
            ),
            "DAG d gets its partition keys at runtime: there are no partitions to backfill; Airflow cannot backfill it",
        ),
        (
            Schedule(periodic=True, summary="0 0 * * *", allowed_run_types=("manual", "scheduled")),
            "DAG d does not allow backfill runs (allowed_run_types: manual, scheduled)",
        ),
        (
            Schedule(periodic=False, summary="MyTimetable", description="Custom"),
            "DAG d has a schedule that is not periodic (MyTimetable: Custom), so there are no dates to backfill; "
            "Airflow cannot backfill it",
        ),
    ],
    ids=["none", "once", "continuous", "asset", "partitioned-asset", "runtime-partitions", "run-types", "other"],
)
def test_unbackfillable_schedules_say_why(schedule: Schedule, message: str) -> None:
    assert unbackfillable(info(schedule)) == message


def test_backfillable_schedules_pass() -> None:
    assert unbackfillable(partitioned()) is None
    assert unbackfillable(info(Schedule(), backfillable=True)) is None
    assert unbackfillable(DagInfo("d", False, False, False, False, None)) == (
        "DAG d has no periodic schedule, so it cannot be backfilled"
    )


def test_schedule_from_details_json() -> None:
    manual = {
        "timetable_partitioned": False,
        "timetable_periodic": False,
        "is_backfillable": False,
        "timetable_summary": None,
        "timetable_description": "Never, external triggers only",
        "allowed_run_types": None,
        "asset_expression": None,
    }
    assert schedule_from_json(manual, newest()) == Schedule(False, None, "Never, external triggers only", None, False)
    asset = {**manual, "timetable_summary": "Asset", "asset_expression": {"any": []}, "allowed_run_types": ["manual"]}
    expected = Schedule(False, "Asset", "Never, external triggers only", ("manual",), True)
    assert schedule_from_json(asset, newest()) == expected


# --- parsing (the JSON measured on Airflow 3.3.2) -----------------------------------------------------------


def test_partition_run_and_dry_run_json() -> None:
    parsed = dag_run_from_json(
        {
            "dag_run_id": "backfill__2024-03-01T00:00:00+00:00__2024-03-01T00:00:00__BJh8apjr",
            "logical_date": None,
            "data_interval_start": None,
            "data_interval_end": None,
            "run_after": "2024-03-01T00:00:00Z",
            "queued_at": "2026-11-30T00:43:07.015956Z",
            "start_date": "2026-11-30T00:43:07.103476Z",
            "end_date": None,
            "state": "running",
            "run_type": "backfill",
            "partition_key": "2024-03-01T00:00:00",
            "partition_date": "2024-03-01T00:00:00Z",
        }
    )
    assert (parsed.logical_date, parsed.partition_key, parsed.partition_date, parsed.queued_at) == (
        None,
        "2024-03-01T00:00:00",
        t("2024-03-01T00:00:00Z"),
        t("2026-11-30T00:43:07.015956Z"),
    )
    entry = planned_run_from_json(
        {"logical_date": None, "partition_key": "2024-03-01T00:00:00", "partition_date": "2024-03-01T00:00:00Z"}
    )
    assert (entry.date, entry.partition_key) == (t("2024-03-01T00:00:00Z"), "2024-03-01T00:00:00")
    plain = planned_run_from_json(
        {"logical_date": "2025-01-01T00:00:00Z", "partition_key": None, "partition_date": None}
    )
    assert (plain.date, plain.partition_key) == (t("2025-01-01T00:00:00Z"), None)
    with pytest.raises(AirflowBadAnswer) as caught:  # the client adds the call and the entry's place
        planned_run_from_json({"logical_date": None, "partition_key": "x", "partition_date": None})
    assert caught.value.message == "no logical_date and no partition_date"


def test_partition_range_is_by_partition_date_whatever_the_direction() -> None:
    backwards = [PlannedRun(None, key(d), t(f"{key(d)}Z")) for d in (4, 3, 2, 1)]
    assert partition_range(backwards) == (key(1), key(4))
    assert partition_range([PlannedRun(t("2025-01-01T00:00:00Z"))]) is None


# --- plan and rendering -------------------------------------------------------------------------------------


def dry(*days: int) -> DryRun:
    planned = [PlannedRun(None, key(d), t(f"{key(d)}Z")) for d in days]
    return DryRun(tuple(p.date for p in planned), 4, partitions=partition_range(planned))


def test_plan_shows_partition_keys_and_queues_the_reprocess_behind() -> None:
    specs = [spec("parts"), spec("retry", reprocess="failed")]
    world = World(
        {"demo_partitioned": DagObservation("demo_partitioned", partitioned())},
        {},
        {"parts": dry(1, 2, 3, 4)},
        {},
        now=NOW,
    )
    plan = make_plan(specs, Policy(), world)
    assert [(i.spec, i.kind, i.runs_to_create, i.runs_in_range) for i in plan.items] == [
        ("parts", Kind.CREATE, 4, 4),
        ("retry", Kind.WAIT, None, None),
    ]
    assert plan_text(plan).splitlines()[0] == (
        "+ create    parts  demo_partitioned  2024-03-01 → 2024-03-04  reprocess none  max_active_runs 2  forward  "
        "runs 4 of 4 in range, partitions 2024-03-01T00:00:00 … 2024-03-04T00:00:00  approvers bob  ticket CHG-1  "
        "[Pending]"
    )
    assert "- partitions to run: 2024-03-01T00:00:00 … 2024-03-04T00:00:00" in plan_markdown(plan)
    assert plan.as_json()["items"][0]["facts"]["first_partition"] == "2024-03-01T00:00:00"


def test_plan_refuses_a_future_partition_range_before_any_dry_run() -> None:
    future = spec("future", to_date="2026-12-05T00:00:00Z")
    world = World({"demo_partitioned": DagObservation("demo_partitioned", partitioned())}, {}, {}, {}, now=NOW)
    (item,) = make_plan([future], Policy(), world).items
    assert (item.kind, item.phase.value, item.error) == (Kind.BLOCKED, "Blocked", True)
    assert item.reason == (
        "to_date 2026-12-05T00:00:00Z is after now (2026-11-30T12:00:00Z) and demo_partitioned is a partitioned DAG: "
        "Airflow would create runs for partitions that have not happened yet; end the range at or before now, or set "
        "`allow_future_partitions: true` in the policy if runs for partitions that have not happened yet are intended"
    )
    allowed = make_plan([future], Policy(allow_future_partitions=True), world).items[0]
    assert (allowed.kind, allowed.reason) == (Kind.WAIT, "awaiting dry run")


def test_finished_partitioned_backfill_names_the_failed_partitions() -> None:
    done = backfill(3, "2026-11-30T00:43:06Z", "2026-11-30T00:43:17Z")
    runs = summarise(runs_of(done, RANGE))
    world = World(
        {"demo_partitioned": DagObservation("demo_partitioned", partitioned(), (done,), {3: runs})},
        {"parts": Binding("parts", "demo_partitioned", 3, Phase.RUNNING)},
        {},
        {},
        now=NOW,
    )
    (item,) = make_plan([spec("parts")], Policy(), world).items
    assert (item.phase.value, item.reason) == (
        "CompletedWithFailures",
        "failed partitions: 2024-03-01T00:00:00, 2024-03-03T00:00:00",
    )


def test_report_shows_partitions_and_failed_keys() -> None:
    stored = Binding(
        "retry",
        "demo_partitioned",
        4,
        Phase.COMPLETED_WITH_FAILURES,
        runs=summarise(RANGE[4:]),
        created=CreateFacts(runs_in_range=4, runs_to_create=2, first_partition=key(1), last_partition=key(3)),
    )
    record = change_record(spec("retry", reprocess="failed"), stored, [])
    document = record.as_json()
    assert document["partitions"] == {"first": key(1), "last": key(3)}
    assert document["intervals"] == {
        "complete": 1,
        "failed": 1,
        "failed_dates": [],
        "failed_partitions": [key(1)],
        "never_started": 0,
        "skipped": 2,
        "in_range": 4,
        "reruns": [],
    }
    text = report_markdown(record)
    assert (
        "- **DAG**: `demo_partitioned`, 2024-03-01T00:00:00Z → 2024-03-04T00:00:00Z, reprocess `failed`, "
        "max_active_runs 2, forward, partitions 2024-03-01T00:00:00 … 2024-03-03T00:00:00\n"
    ) in text
    assert "- **Intervals**: 1 complete, 1 failed (2024-03-01T00:00:00), 2 skipped of 4 in range\n" in text


# --- validate with Airflow configured -------------------------------------------------------------------------


SPEC = """version: 1
name: {name}
dag_id: {dag}
from_date: "2026-11-20"
to_date: "{to}"
reprocess_behavior: none
max_active_runs: 2
ticket: CHG-1
reason: A partitioned range for validate.
requested_by: alice
approvers: [bob]
"""


def test_validate_with_airflow_refuses_future_partitions_and_unbackfillable_dags(tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "future.yaml").write_text(SPEC.format(name="future", dag="demo_partitioned", to="2026-12-05"))
    (specs / "manual.yaml").write_text(SPEC.format(name="manual", dag="demo_manual", to="2026-11-21"))
    (specs / "typo.yaml").write_text(SPEC.format(name="typo", dag="demo_nope", to="2026-11-21"))
    dags = {
        "demo_partitioned": partitioned(),
        "demo_manual": DagInfo(
            "demo_manual", False, False, False, False, None, schedule=Schedule(periodic=False, summary=None)
        ),
    }

    def lookup(dag_id: str) -> DagInfo:
        if dag_id not in dags:
            raise AirflowNotFound(f"GET /api/v2/dags/{dag_id}/details -> 404", status=404)
        return dags[dag_id]

    offline = validate_paths([], specs, NOW)
    assert [d.text() for d in offline.diagnostics] == [
        f"{specs}/future.yaml:5:10: $.to_date: warning: to_date 2026-12-05T00:00:00Z is in the future; Airflow only "
        "creates runs whose interval has already ended"
    ]
    checked = check_dags(offline, lookup, NOW)
    assert [(d.text(), d.hint) for d in checked.diagnostics] == [
        (
            f"{specs}/future.yaml:5:10: $.to_date: to_date 2026-12-05T00:00:00Z is after now (2026-11-30T12:00:00Z) "
            "and demo_partitioned is a partitioned DAG: Airflow would create runs for partitions that have not "
            "happened yet",
            "end the range at or before now, or set `allow_future_partitions: true` in the policy if runs for "
            "partitions that have not happened yet are intended",
        ),
        (
            f"{specs}/manual.yaml:3:9: $.dag_id: DAG demo_manual has no schedule (schedule=None): it runs only when "
            "triggered, so there are no dates to backfill; Airflow cannot backfill it",
            "only DAGs with a periodic schedule can be backfilled",
        ),
        (
            f"{specs}/typo.yaml:3:9: $.dag_id: DAG 'demo_nope' does not exist in Airflow",
            "check the dag_id (Airflow's UI or `GET /api/v2/dags` lists the DAGs)",
        ),
    ]
    policy = "version: 1\nrequire_reviewed_merge: false\nscope: {dags: ['*']}\nallow_future_partitions: true\n"
    (specs / "policy.yaml").write_text(policy)
    allowed = check_dags(validate_paths([specs / "future.yaml"], specs, NOW), lookup, NOW)
    assert [d.text() for d in allowed.diagnostics] == [
        f"{specs}/future.yaml:5:10: $.to_date: warning: to_date 2026-12-05T00:00:00Z is in the future and "
        "demo_partitioned is a partitioned DAG: Airflow will create runs for partitions that have not happened yet "
        "(the policy allows it)"
    ]
    assert allowed.ok


def test_validate_with_unreachable_airflow_only_warns(tmp_path: Path) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "past.yaml").write_text(SPEC.format(name="past", dag="demo_partitioned", to="2026-11-21"))

    def down(dag_id: str) -> DagInfo:
        raise AirflowUnavailable(f"GET /api/v2/dags/{dag_id}/details failed: ConnectError")

    checked = check_dags(validate_paths([], specs, NOW), down, NOW)
    assert checked.ok
    assert [d.text() for d in checked.diagnostics] == [
        f"{specs}/past.yaml:3:9: $.dag_id: warning: could not check DAG 'demo_partitioned' in Airflow: "
        "GET /api/v2/dags/demo_partitioned/details failed: ConnectError"
    ]


def test_failed_partitions_text_names_ten_keys_then_counts() -> None:
    keys = [f"2024-03-{d:02d}T00:00:00" for d in range(1, 13)]
    assert failed_partitions_text(keys[:2]) == "failed partitions: 2024-03-01T00:00:00, 2024-03-02T00:00:00"
    assert failed_partitions_text(keys) == "failed partitions: " + ", ".join(keys[:10]) + " and 2 more"


def test_a_future_partition_range_queued_behind_another_spec_is_refused_at_once() -> None:
    specs = [spec("parts"), spec("later", to_date="2026-12-05T00:00:00Z")]
    world = World(
        {"demo_partitioned": DagObservation("demo_partitioned", partitioned())},
        {},
        {"parts": dry(1, 2, 3, 4)},
        {},
        now=NOW,
    )
    plan = make_plan(specs, Policy(), world)
    assert [(i.spec, i.kind, i.error) for i in plan.items] == [
        ("parts", Kind.CREATE, False),
        ("later", Kind.BLOCKED, True),
    ]
    assert plan.items[1].reason.startswith("to_date 2026-12-05T00:00:00Z is after now (2026-11-30T12:00:00Z)")
