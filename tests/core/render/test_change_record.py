"""The change record's parts that the golden records do not pin (pure): the approval, the follow-ups, a half-known
partition span, a chunk whose runs are not known, and which code the runs ran on."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from controller.core.audit.chain import AuditEntry, AuditRecord, seal
from controller.core.model.airflow import DagRun, DagVersion, RunSummary
from controller.core.model.binding import Approval, ApprovedReview, Binding, CreateFacts, Phase
from controller.core.model.chunks import Chunk, Progress
from controller.core.render.change_record import PartitionSpan, RanOn, VersionRuns, change_record, ran_on
from tests.core.plan.test_plan import JAN1, spec

DAY = timedelta(days=1)
APPROVAL = Approval(7, "c0ffee", (ApprovedReview("b", 11, "abc123", "2026-11-01T09:00:00Z"),))


def sealed(*entries: AuditEntry) -> list[AuditRecord]:
    out: list[AuditRecord] = []
    prev = "0" * 64
    for seq, entry in enumerate(entries, start=1):
        out.append(seal(seq, f"2026-11-01T10:0{seq}:00Z", entry, prev))
        prev = out[-1].hash
    return out


def test_the_record_keeps_the_approval_reconcile_counted() -> None:
    binding = Binding("r", "d", 5, Phase.RUNNING, approval=APPROVAL)
    document = change_record(spec("r"), binding, []).as_json()
    assert document["approval"] == {
        "pr_number": 7,
        "merged_commit": "c0ffee",
        "reviews": [{"login": "b", "review_id": 11, "commit_id": "abc123", "submitted_at": "2026-11-01T09:00:00Z"}],
    }
    assert document["approved_by"] == "b in #7 (review 11, 2026-11-01T09:00Z)"


def test_the_follow_ups_that_retry_its_failures() -> None:
    retries = [spec("r-retry-1"), spec("r-retry-2")]
    assert change_record(spec("r"), None, [], retries).as_json()["retried_by"] == [
        {"spec": "r-retry-1", "path": "specs/r-retry-1.yaml"},
        {"spec": "r-retry-2", "path": "specs/r-retry-2.yaml"},
    ]


def test_a_partition_span_needs_both_ends() -> None:
    def partitions(created: CreateFacts) -> Any:
        return change_record(spec("r"), Binding("r", "d", 5, Phase.RUNNING, created=created), []).as_json()[
            "partitions"
        ]

    assert partitions(CreateFacts(first_partition="2025-01", last_partition="2025-03")) == {
        "first": "2025-01",
        "last": "2025-03",
    }
    assert partitions(CreateFacts(first_partition="2025-01")) is None
    assert partitions(CreateFacts(last_partition="2025-03")) is None
    assert PartitionSpan("2025-01", "2025-03").as_json() == {"first": "2025-01", "last": "2025-03"}


def test_only_the_active_chunk_borrows_the_bindings_runs() -> None:
    unread = Chunk(1, JAN1, JAN1 + 3 * DAY, 4, 2)  # finished in an earlier pass whose runs were lost
    active = Chunk(2, JAN1 + 4 * DAY, JAN1 + 7 * DAY, 4, 2)
    progress = Progress(8, (unread, active))
    binding = Binding("r", "d", 2, Phase.RUNNING, runs=RunSummary({"success": 3, "failed": 1}), progress=progress)
    rows = change_record(spec("r"), binding, []).as_json()["chunks"]
    assert [(c["backfill_id"], c["finished"], c["succeeded"], c["failed"]) for c in rows] == [
        (1, False, None, None),
        (2, False, 3, 1),
    ]


def test_ran_on_reads_only_the_create_intents() -> None:
    events = sealed(
        AuditEntry("create", "outcome", "ci", "0.1", request={"airflow": "9.9.9"}, spec_name="r"),
        AuditEntry("pause", "intent", "ci", "0.1", request={"airflow": "8.8.8"}, spec_name="r"),
        AuditEntry("create", "intent", "ci", "0.1", request={"body": {"run_on_latest_version": False}}, spec_name="r"),
        AuditEntry("create", "intent", "ci", "0.1", spec_name="r"),  # no request recorded
        AuditEntry(
            "create", "intent", "ci", "0.1", request={"airflow": "3.3.2", "body": {"run_on_latest_version": True}}
        ),
        AuditEntry("create", "intent", "ci", "0.1", request={"airflow": "3.3.2", "body": "not a mapping"}),
        AuditEntry("create", "intent", "ci", "0.1", request={"airflow": "3.2.0", "body": {"dag_id": "d"}}),
    )
    newer, other = DagVersion(3, "bbb"), DagVersion(3, "aaa")
    runs = [
        DagRun(f"r{k}", JAN1 + k * DAY, "success", None, None, dag_versions=(v,)) for k, v in enumerate([newer, other])
    ]
    assert ran_on(events, runs) == RanOn(
        ("3.3.2", "3.2.0"), (False, True, None), (VersionRuns(other, 1), VersionRuns(newer, 1))
    )


def test_ran_on_as_text_when_nothing_was_recorded_and_when_several_were() -> None:
    assert RanOn((), (), ()).text() == (
        "created on Airflow release not recorded, run_on_latest_version ?; runs ran on no run read"
    )
    several = RanOn(("3.2.0", "3.3.2"), (None, True), (VersionRuns(DagVersion(2), 3), VersionRuns(None, 1)))
    assert several.text() == (
        "created on Airflow 3.2.0, 3.3.2, run_on_latest_version not sent, true; runs ran on DAG version 2: 3 runs; "
        "no DAG version (never started): 1 run"
    )


def test_a_running_specs_record_counts_the_runs_read_now_so_far() -> None:
    """The counts and the calendar come from the same observation while runs are live; an outcome stays."""
    from controller.core.render.change_record import so_far  # noqa: PLC0415
    from controller.core.render.report_markdown import report_markdown  # noqa: PLC0415

    states = ["success", "failed", "running", "queued", "queued"]
    runs = [DagRun(f"r{k}", JAN1 + k * DAY, state, JAN1 + k * DAY, None) for k, state in enumerate(states)]
    stored = Binding("s", "d", 7, Phase.RUNNING, created=CreateFacts(5, 5), runs=RunSummary({"queued": 5}))
    record = so_far(change_record(spec(), stored, []), runs)
    i = record.intervals
    assert (i.complete, i.failed, i.unfinished, i.failed_dates, i.in_range) == (1, 1, 3, (JAN1 + DAY,), 5)
    assert (
        "- **Intervals so far**: 1 complete, 1 failed (2025-01-02), 3 queued or running, 0 skipped of 5 in range"
        in report_markdown(record)
    )
    assert record.as_json()["intervals"]["unfinished"] == 3
    done = change_record(spec(), Binding("s", "d", 7, Phase.SUCCEEDED, runs=RunSummary({"success": 5})), [])
    assert so_far(done, runs) is done  # its outcome came from its runs, and stays
