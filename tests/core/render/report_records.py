"""Representative change records (spec, stored binding, audit trail, follow-up specs) for the report's tests.

`tests/core/render/golden/records/*.json` is `report --format json` of each, captured from the code before the change
record became a typed value (the `report_json` dict of main at 2ad8938): the JSON must stay byte-identical.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from controller.core.audit.chain import AuditEntry, AuditRecord, seal
from controller.core.model.airflow import Rerun, RunSummary
from controller.core.model.binding import Approval, ApprovedReview, Binding, CreateFacts, Phase
from controller.core.model.chunks import Chunk, Progress
from controller.core.model.ranges import compact
from controller.core.model.spec import BackfillSpec, DesiredState, ReprocessBehavior
from tests.core.plan.test_plan import JAN1, spec

DAY = timedelta(days=1)
T = datetime(2026, 11, 1, 10, tzinfo=UTC)

Inputs = tuple[BackfillSpec, Binding | None, list[AuditRecord], list[BackfillSpec]]


def trail(name: str, backfill_id: int | None, *outcomes: str) -> list[AuditRecord]:
    """A create (intent, outcome) and one observation per outcome, a minute apart."""
    entries = [
        AuditEntry("create", "intent", "ci", "0.1", spec_name=name),
        AuditEntry("create", "outcome", "ci", "0.1", outcome="created", spec_name=name, backfill_id=backfill_id),
        *[
            AuditEntry("observe", "observation", "ci", "0.1", outcome=o, spec_name=name, backfill_id=backfill_id)
            for o in outcomes
        ],
    ]
    out: list[AuditRecord] = []
    prev = "0" * 64
    for seq, entry in enumerate(entries, start=1):
        out.append(seal(seq, (T + seq * timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%S.%fZ"), entry, prev))
        prev = out[-1].hash
    return out


def succeeded() -> Inputs:
    s = spec("ok", dag_run_conf={"full_refresh": True}, expected_runs=7)
    runs = RunSummary({"success": 7}, mean_duration=12.5)
    created = CreateFacts(7, 7, JAN1, JAN1 + 6 * DAY, dates=compact([JAN1 + k * DAY for k in range(7)]))
    binding = Binding(
        "ok",
        "d",
        3,
        Phase.SUCCEEDED,
        DesiredState.ACTIVE,
        "sha256:ok",
        "all runs succeeded",
        runs,
        created,
        (3,),
        "c0ffee",
    )
    return s, binding, trail("ok", 3, "Running", "Succeeded"), []


def completed_with_failures() -> Inputs:
    s = spec("mixed", reprocess_behavior=ReprocessBehavior.FAILED, run_backwards=True)
    failed = (JAN1 + DAY, JAN1 + 3 * DAY)
    runs = RunSummary({"success": 4, "failed": 2}, failed, 0, 30.0)
    created = CreateFacts(6, 7, JAN1, JAN1 + 6 * DAY, dates=compact([JAN1 + k * DAY for k in range(1, 7)]))
    binding = Binding(
        "mixed",
        "d",
        4,
        Phase.COMPLETED_WITH_FAILURES,
        runs=runs,
        created=created,
        backfills=(4,),
        git_commit="abc123",
        spec_digest="sha256:mixed",
        reason="failed: 2025-01-02, 2025-01-04",
    )
    retry = spec("mixed-retry", retry_of="mixed", reprocess_behavior=ReprocessBehavior.FAILED)
    return s, binding, trail("mixed", 4, "Running", "CompletedWithFailures"), [retry]


def cancelled() -> Inputs:
    s = spec("stop", state=DesiredState.CANCELLED)
    runs = RunSummary({"success": 2, "failed": 5}, (JAN1 + 2 * DAY, JAN1 + 3 * DAY), 3)
    binding = Binding(
        "stop", "d", 5, Phase.CANCELLED, DesiredState.CANCELLED, runs=runs, created=CreateFacts(7, 7), backfills=(5,)
    )
    return s, binding, trail("stop", 5, "Running", "Cancelled"), []


def chunked() -> Inputs:
    s = spec("big", to_date=JAN1 + 9 * DAY)
    first = Chunk(6, JAN1, JAN1 + 3 * DAY, 4, 2, RunSummary({"success": 4}))
    second = Chunk(7, JAN1 + 4 * DAY, JAN1 + 7 * DAY, 4, 3)
    runs = RunSummary({"success": 1, "failed": 1, "running": 2}, (JAN1 + 5 * DAY,))
    binding = Binding(
        "big",
        "d",
        7,
        Phase.RUNNING,
        runs=runs,
        created=CreateFacts(4, 4),
        backfills=(6, 7),
        progress=Progress(10, (first, second)),
    )
    return s, binding, trail("big", 6, "Running"), []


def with_reruns() -> Inputs:
    s = spec("again", reprocess_behavior=ReprocessBehavior.COMPLETED)
    reruns = (
        Rerun(JAN1 + 2 * DAY, "spec later-fix (#12)", "success"),
        Rerun(JAN1 + 4 * DAY, "hand", "failed", "success"),
    )
    runs = RunSummary({"success": 5}, reruns=reruns)
    created = CreateFacts(7, 7, dates=compact([JAN1 + k * DAY for k in range(7)]))
    binding = Binding("again", "d", 8, Phase.SUCCEEDED, runs=runs, created=created, backfills=(8,))
    return s, binding, trail("again", 8, "Succeeded"), []


def with_approval() -> Inputs:
    s = spec("approved", approvers=("bob", "carol"), downstream=("warehouse",))
    reviews = (
        ApprovedReview("bob", 9001, "f00dcafe", "2026-10-31T09:15:42Z"),
        ApprovedReview("carol", None, "f00dcafe", "2026-10-31T10:00:00Z"),
    )
    approval = Approval(41, "deadbeef", reviews)
    binding = Binding(
        "approved",
        "d",
        9,
        Phase.RUNNING,
        runs=RunSummary({"running": 2, "queued": 5}),
        created=CreateFacts(7, 7),
        backfills=(9,),
        approval=approval,
    )
    return s, binding, trail("approved", 9, "Running"), []


def partitioned() -> Inputs:
    s = spec("parts", dag="p")
    runs = RunSummary({"success": 2, "failed": 1}, failed_partitions=("eu|2025-01-02",), superseded=1)
    created = CreateFacts(3, 3, first_partition="eu|2025-01-01", last_partition="eu|2025-01-03")
    binding = Binding("parts", "p", 10, Phase.COMPLETED_WITH_FAILURES, runs=runs, created=created, backfills=(10,))
    return s, binding, trail("parts", 10, "CompletedWithFailures"), []


def pending() -> Inputs:
    return spec("fresh"), None, [], []


RECORDS: dict[str, Callable[[], Inputs]] = {
    "succeeded": succeeded,
    "completed-with-failures": completed_with_failures,
    "cancelled": cancelled,
    "chunked": chunked,
    "with-reruns": with_reruns,
    "with-approval": with_approval,
    "partitioned": partitioned,
    "pending": pending,
}


def names() -> Sequence[str]:
    return sorted(RECORDS)
