"""The change record's parts a golden record does not show (pure): an edit in place, a file gone, an
acknowledgement, the link, the stops that held it, the reviewed changes it carried, the counts so far, and the
order of the code versions its runs ran on."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from controller.core.audit.chain import AuditEntry
from controller.core.model.airflow import DagRun, DagVersion, RunSummary, Skipped
from controller.core.model.binding import Approval, ApprovedReview, Binding, Phase
from controller.core.model.stops import EmergencyStop, EmergencyStopKind, StopHistory, StopSource
from controller.core.render.change_record import approvals_of, approved_change_text, change_record, ran_on, so_far
from tests.core.plan.test_plan import JAN1, spec
from tests.core.render.test_change_record import sealed

T = datetime(2026, 11, 1, 10, tzinfo=UTC)
REVIEW = ApprovedReview("bob", 9001, "abcdef0123456789", "2026-11-01T09:00:00Z")
EVIDENCE = Approval(41, "c" * 40, (REVIEW,), "https://github.example/o/r/pull/41", "a" * 40, "b" * 40, "")
FLAGS = Approval(40, None, (ApprovedReview("carol", None, "", ""),))


def intent(action: str, request: object, phase: str = "intent") -> AuditEntry:
    return AuditEntry(action, phase, "ci", "0.1", spec_name="s", request=request)  # type: ignore[arg-type]


def test_the_approvals_an_applied_create_and_resume_carried_once_each_oldest_first() -> None:
    events = sealed(
        intent("create", {"approval": EVIDENCE.as_json()}),
        intent("create", {"approval": EVIDENCE.as_json()}, phase="outcome"),  # an outcome repeats, never counted
        intent("create", {"approval": {"pr_number": "not a number"}}),  # outside text: never trusted to parse
        intent("create", "not a mapping"),
        intent("unpause", {"approval": "not a mapping"}),
        intent("unpause", {"approval": FLAGS.as_json()}),
        intent("create", {"approval": EVIDENCE.as_json()}),  # the same change again: once
    )
    assert approvals_of(events) == (EVIDENCE, FLAGS)
    record = change_record(spec("s"), None, events)
    assert record.approvals == (EVIDENCE, FLAGS)
    assert record.approved_changes == (EVIDENCE,)  # the flags' record names no change
    assert record.as_json()["approved_changes"] == [EVIDENCE.as_json()]
    assert "approved_changes" not in change_record(spec("s"), None, sealed(intent("unpause", {}))).as_json()


def test_the_text_of_a_reviewed_change_names_each_review_that_counted() -> None:
    assert approved_change_text(EVIDENCE) == (
        "#41 https://github.example/o/r/pull/41: base aaaaaaaaaaaa, head bbbbbbbbbbbb, merged as cccccccccccc; "
        "policy none (the default); reviews that counted: bob (review 9001, commit abcdef012345)"
    )
    assert approved_change_text(FLAGS) == (
        "#40: commits not recorded; reviews that counted: carol (review id unknown, commit ?)"
    )
    assert approved_change_text(replace(FLAGS, reviews=())) == "#40: commits not recorded; reviews that counted: none"


STOP = EmergencyStop(3, EmergencyStopKind.DOWNSTREAM, "warehouse", "load alarm", "ann", StopSource.CLI, T)


def test_a_record_says_what_held_and_changed_it() -> None:
    lifted = StopHistory(replace(STOP, id=4, source=StopSource.WORKFLOW), T.replace(hour=11), "bob", "alarm cleared")
    record = change_record(
        spec("s", acknowledged="3 failures are known (INC-7)"),
        Binding("s", "d", 9, Phase.COMPLETED_WITH_FAILURES),
        [],
        edited="to_date 2025-01-07 → 2025-01-09",
        file_gone="specs/s.yaml at commit abc",
        stops=[StopHistory(STOP), lifted],
        acknowledged_by="dave in commit 1234",
    )
    document = record.as_json()
    assert (document["edited_in_place"], document["file_gone"]) == (
        "to_date 2025-01-07 → 2025-01-09",
        "specs/s.yaml at commit abc",
    )
    assert document["acknowledged"] == "3 failures are known (INC-7) (dave in commit 1234)"
    assert document["stops"] == [
        {
            "id": 3,
            "kind": "downstream",
            "target": "warehouse",
            "actor": "ann",
            "source": "cli",
            "reason": "load alarm",
            "created_at": "2026-11-01T10:00:00Z",
            "lifted_at": None,
            "lifted_by": None,
            "lift_reason": None,
        },
        {
            "id": 4,
            "kind": "downstream",
            "target": "warehouse",
            "actor": "ann",
            "source": "workflow",
            "reason": "load alarm",
            "created_at": "2026-11-01T10:00:00Z",
            "lifted_at": "2026-11-01T11:00:00Z",
            "lifted_by": "bob",
            "lift_reason": "alarm cleared",
        },
    ]
    linked = replace(record, link="https://a.example/dags/d/backfills/9").as_json()
    assert linked["link"] == "https://a.example/dags/d/backfills/9"
    unknown = change_record(spec("s", acknowledged="known"), None, []).as_json()
    assert unknown["acknowledged"] == "known (who: not known)"
    plain = change_record(spec("s"), None, []).as_json()
    absent = ("edited_in_place", "file_gone", "acknowledged", "link", "stops", "approved_changes")
    assert [key for key in absent if key in plain] == []


def test_a_running_record_counts_so_far_from_the_runs_read_now() -> None:
    skipped = (Skipped("2025-01-02", "already exists"),)
    binding = Binding("s", "d", 9, Phase.RUNNING, runs=RunSummary({"success": 1}, skipped=skipped))
    record = change_record(spec("s"), binding, [])
    assert record.intervals.skipped_slots == skipped
    runs = [
        DagRun("r1", JAN1, "failed", None, None),
        DagRun("r2", None, "failed", T, T, partition_key="eu", partition_date=JAN1),
        DagRun("r3", JAN1, "queued", None, None),
        DagRun("r5", JAN1.replace(day=3), "failed", T, T),
        DagRun("r4", JAN1, "success", T, T),
    ]
    now = so_far(record, runs).intervals
    counted = (now.complete, now.failed, now.never_started, now.unfinished)
    assert counted == (1, 3, 1, 1)  # one failure never started
    assert now.failed_partitions == ("eu",)
    assert now.failed_dates == (JAN1.replace(day=3),)  # the failures that started
    done = replace(record, outcome=Phase.SUCCEEDED)
    assert so_far(done, runs) is done


def test_the_code_versions_newest_first_and_the_unknown_last() -> None:
    v3, v4, v4b = DagVersion(3), DagVersion(4, "sha-b"), DagVersion(4, "sha-a")
    runs = [
        DagRun("a", JAN1, "success", None, None),
        DagRun("b", JAN1, "success", None, None, dag_versions=(v3,)),
        DagRun("c", JAN1, "success", None, None, dag_versions=(v3, v4)),
        DagRun("d", JAN1, "success", None, None, dag_versions=(v4b,)),
        DagRun("e", JAN1, "success", None, None, dag_versions=(v4b,)),
    ]
    shown = [(r.version, r.runs) for r in ran_on([], runs).versions]
    assert shown == [(v4b, 2), (v4, 1), (v3, 1), (None, 1)]
    assert [(r.version, r.runs) for r in ran_on([], runs[1:]).versions] == [(v4b, 2), (v4, 1), (v3, 1)]
