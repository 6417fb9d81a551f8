"""Which code re-runs history: the DAG's own `rerun_with_latest_version` when the spec does not say (Airflow 3.3+),
the plan's code line, the PR comment's call-out of specs whose re-runs keep older code, and the change record's
DAG versions the runs ran on."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from packaging.version import Version

from controller.adapters.airflow.decode import dag_info_from_json, dag_run_from_json
from controller.core.model.airflow import DagRun, DagVersion
from controller.core.model.binding import Binding, Phase
from controller.core.model.capabilities import Capabilities, capabilities_of, rerun_code, run_on_latest
from controller.core.model.policy import Policy
from controller.core.model.spec import BackfillSpec, ReprocessBehavior
from controller.core.plan.queue import make_plan
from controller.core.plan.values import Kind, Plan
from controller.core.render.change_record import change_record, ran_on
from controller.core.render.pr_comment import pr_comment
from controller.core.render.report_markdown import report_markdown
from tests.core.plan.test_plan import JAN1, OK, dates, spec, world
from tests.core.render.report_records import trail


def caps(version: str) -> Capabilities:
    return capabilities_of(Version(version))


@pytest.mark.parametrize(
    ("version", "asked", "dag", "sent"),
    [
        ("3.3.2", None, False, False),  # the DAG's own choice, as Airflow 3.3 itself falls back to it
        ("3.3.2", None, True, True),
        ("3.3.2", None, None, True),  # neither says: true, explicit
        ("3.3.2", True, False, True),  # the spec decides over the DAG
        ("3.2.2", None, False, True),  # before 3.3.0 Airflow has no DAG-level fallback: the DAG's field is not used
        ("3.1.5", None, False, None),  # no run_on_latest_version at all
    ],
)
def test_run_on_latest_version_sent(version: str, asked: bool | None, dag: bool | None, sent: bool | None) -> None:
    assert run_on_latest(caps(version), asked, dag) is sent


def test_the_code_line_says_when_the_dag_decided() -> None:
    assert rerun_code(caps("3.3.2"), None, False) == (
        "new runs: the latest DAG version; re-runs: the DAG version each run first ran with "
        "(the DAG's rerun_with_latest_version: false)"
    )
    assert rerun_code(caps("3.3.2"), None, True) == (
        "every run: the latest DAG version (run_on_latest_version: true, the DAG's rerun_with_latest_version)"
    )
    assert rerun_code(caps("3.3.2"), False, True) == (
        "new runs: the latest DAG version; re-runs: the DAG version each run first ran with"
    )


def test_the_dag_details_carry_rerun_with_latest_version_from_3_3() -> None:
    details = {"is_paused": False, "timetable_summary": "@daily", "timetable_periodic": True, "is_backfillable": True}
    with_field = {**details, "rerun_with_latest_version": False}
    assert dag_info_from_json("d", with_field, caps("3.3.2")).rerun_with_latest_version is False
    assert dag_info_from_json("d", details, caps("3.3.2")).rerun_with_latest_version is None
    assert dag_info_from_json("d", with_field, caps("3.2.2")).rerun_with_latest_version is None


def rerun_plan(dag_default: bool | None, version: str = "3.3.2", **extra: Any) -> tuple[BackfillSpec, Plan]:
    s = spec("fix", reprocess_behavior=ReprocessBehavior.FAILED, **extra)
    info = replace(OK, latest_version=DagVersion(4, "abc1234"), rerun_with_latest_version=dag_default)
    return s, make_plan([s], Policy(), replace(world(dry={"fix": dates(7)}, info=info), airflow=caps(version)))


def test_a_create_sends_and_shows_the_dags_own_choice() -> None:
    _s, plan = rerun_plan(False)
    (item,) = plan.items
    assert item.kind is Kind.CREATE
    assert item.request is not None
    assert item.request.body()["run_on_latest_version"] is False
    assert item.code == (
        "Airflow 3.3.2, DAG version 4 (bundle abc1234): new runs: the latest DAG version; re-runs: the DAG version "
        "each run first ran with (the DAG's rerun_with_latest_version: false)"
    )
    _s, unset = rerun_plan(None)
    request = unset.items[0].request
    assert request is not None
    assert "run_on_latest_version" not in request.body()  # the spec and the DAG say nothing: the client sends true


OLDER = (
    "**Re-runs on older code: these specs re-run history on the DAG version each run first ran with, not the latest** "
    "(new runs use the latest):\n"
    "\n"
    "- `fix`: reprocess failed re-runs existing runs; {why}. Code: {code}\n"
    "\n"
    "If history needs the current code, set `run_on_latest_version: true` in the spec.\n"
    "\n"
    "**Specs this pull request adds or changes (1)**\n"
)


def test_the_pr_comment_calls_out_re_runs_on_older_code() -> None:
    _s, plan = rerun_plan(False)
    body = pr_comment(plan, ["specs/fix.yaml"], {}, airflow=caps("3.3.2"))
    code = (
        "Airflow 3.3.2, DAG version 4 \\(bundle abc1234\\): new runs: the latest DAG version; re-runs: the DAG version "
        "each run first ran with \\(the DAG's rerun\\_with\\_latest\\_version: false\\)"
    )
    why = "the DAG sets rerun\\_with\\_latest\\_version: false, and the spec does not say"
    assert body.startswith("<!-- backfillctl-plan -->\n### backfillctl plan\n\n" + OLDER.format(why=why, code=code))
    _s, by_spec = rerun_plan(None, run_on_latest_version=False)
    assert "- `fix`: reprocess failed re-runs existing runs; the spec sets run\\_on\\_latest\\_version: false. " in (
        pr_comment(by_spec, ["specs/fix.yaml"], {}, airflow=caps("3.3.2"))
    )
    _s, old_line = rerun_plan(None, version="3.1.5")
    assert "; Airflow 3.1.5 has no run\\_on\\_latest\\_version \\(3.1.6 or newer\\). Code: " in pr_comment(
        old_line, ["specs/fix.yaml"], {}, airflow=caps("3.1.5")
    )


def test_no_call_out_when_the_runs_use_the_latest_code() -> None:
    _s, latest = rerun_plan(None)
    assert "older code" not in pr_comment(latest, ["specs/fix.yaml"], {}, airflow=caps("3.3.2"))
    s = spec("new", run_on_latest_version=False)  # reprocess none: every run is new, on the latest version
    plan = make_plan([s], Policy(), replace(world(dry={"new": dates(7)}), airflow=caps("3.3.2")))
    assert "older code" not in pr_comment(plan, ["specs/new.yaml"], {}, airflow=caps("3.3.2"))
    _s, unread = rerun_plan(False)
    assert "older code" not in pr_comment(unread, ["specs/fix.yaml"], {})  # no release read: nothing to say


def test_runs_decode_their_dag_versions() -> None:
    run = dag_run_from_json(
        {
            "dag_run_id": "backfill__2025-01-01T00:00:00+00:00",
            "logical_date": "2025-01-01T00:00:00Z",
            "state": "success",
            "dag_versions": [
                {"version_number": 1, "bundle_version": None, "dag_id": "d"},
                {"version_number": 2, "bundle_version": "abc1234", "dag_id": "d"},
            ],
            "bundle_version": "abc1234",
        }
    )
    assert run.dag_versions == (DagVersion(1), DagVersion(2, "abc1234"))
    assert dag_run_from_json({"dag_run_id": "r", "state": "queued"}).dag_versions == ()


def test_the_change_record_says_which_code_the_runs_ran_on() -> None:
    events = list(trail("fix", 5, "Succeeded"))
    request = {"method": "POST", "body": {"dag_id": "d", "run_on_latest_version": False}, "airflow": "3.3.2"}
    events[0] = replace(events[0], entry=replace(events[0].entry, request=request))
    v1, v2 = DagVersion(1), DagVersion(2, "abc1234")

    def run(day: int, *versions: DagVersion) -> DagRun:
        return DagRun(f"r{day}", JAN1 + timedelta(days=day), "success", None, None, dag_versions=versions)

    runs = [run(0, v1), run(1, v1, v2), run(2, v2), run(3)]
    record = replace(
        change_record(spec("fix"), Binding("fix", "d", 5, Phase.SUCCEEDED), events), ran_on=ran_on(events, runs)
    )
    assert "- **Code**: created on Airflow 3.3.2, run\\_on\\_latest\\_version false; runs ran on DAG version 2 " in (
        report_markdown(record)
    )
    assert record.ran_on is not None
    assert record.ran_on.text() == (
        "created on Airflow 3.3.2, run_on_latest_version false; runs ran on DAG version 2 (bundle abc1234): 2 runs; "
        "DAG version 1: 1 run; no DAG version (never started): 1 run"
    )
    assert json.dumps(record.as_json()["ran_on"]) == json.dumps(
        {
            "airflow": ["3.3.2"],
            "run_on_latest_version": [False],
            "dag_versions": [
                {"version_number": 2, "bundle_version": "abc1234", "runs": 2},
                {"version_number": 1, "bundle_version": None, "runs": 1},
                {"version_number": None, "bundle_version": None, "runs": 1},
            ],
        }
    )
    assert "ran_on" not in change_record(spec("fix"), None, events).as_json()  # offline: the document as it was
