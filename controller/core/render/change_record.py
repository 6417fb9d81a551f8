"""The change record of one spec (pure): a typed value built once from the spec, its stored binding and its audit
trail, rendered to markdown (`report_markdown`), HTML (`report_html`) and JSON (`as_json`, `format_version` 1).

Who asked and why, who approved, what ran (intervals complete / failed / skipped, chunks, re-runs), the outcome,
and, when Airflow was read, which code the runs ran on.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from controller.core.audit.chain import AuditRecord
from controller.core.audit.vocabulary import Action, AuditPhase
from controller.core.model.airflow import DagRun, DagVersion, Rerun, RunSummary, Skipped, summarise
from controller.core.model.binding import Approval, Binding, CreateFacts, Phase
from controller.core.model.chunks import Progress
from controller.core.model.coverage import DISCLAIMER, Coverage, Missed
from controller.core.model.ranges import DateRange, ranges_json
from controller.core.model.spec import BackfillSpec, format_utc
from controller.core.model.stages import StageRecord
from controller.core.model.stops import StopHistory
from controller.core.plan.provenance import approved_by

REPORT_FORMAT_VERSION = 1
TERMINAL = ("Succeeded", "CompletedWithFailures", "Cancelled")  # the audit outcomes that end a spec's record


@dataclass(frozen=True, slots=True)
class Intervals:
    """The spec's own runs by outcome, as the store last recorded them."""

    complete: int
    failed: int
    failed_dates: tuple[datetime, ...]
    failed_partitions: tuple[str, ...]
    never_started: int  # failed without a start: cancelled while queued
    skipped: int | None  # in range but kept by the reprocess behaviour (None: the dry run's counts are not known)
    in_range: int | None
    reruns: tuple[Rerun, ...]  # own dates re-run by others before the outcome was read
    unfinished: int | None = None  # a live spec read now: its runs still queued or running (None: its outcome)
    skipped_slots: tuple[Skipped, ...] = ()  # slots Airflow created no run for, with its reason (3.4's slots)

    def as_json(self) -> dict[str, Any]:
        document: dict[str, Any] = {
            "complete": self.complete,
            "failed": self.failed,
            "failed_dates": [d.isoformat() for d in self.failed_dates],
            "failed_partitions": list(self.failed_partitions),
            "never_started": self.never_started,
            "skipped": self.skipped,
            "in_range": self.in_range,
            "reruns": [r.as_json() for r in self.reruns],
        }
        if self.skipped_slots:
            document["skipped_slots"] = [k.as_json() for k in self.skipped_slots]
        return document | ({"unfinished": self.unfinished} if self.unfinished is not None else {})


@dataclass(frozen=True, slots=True)
class ChunkRow:
    """One chunk's Airflow backfill: its dates, runs and concurrency (the active one's runs as last observed)."""

    backfill_id: int
    first: datetime
    last: datetime
    runs: int
    max_active_runs: int
    finished: bool
    succeeded: int | None  # None: its runs are not known
    failed: int | None

    def as_json(self) -> dict[str, Any]:
        return {
            "backfill_id": self.backfill_id,
            "from_date": format_utc(self.first),
            "to_date": format_utc(self.last),
            "runs": self.runs,
            "max_active_runs": self.max_active_runs,
            "finished": self.finished,
            "succeeded": self.succeeded,
            "failed": self.failed,
        }


@dataclass(frozen=True, slots=True)
class PartitionSpan:
    """First and last partition key the create ran (a partitioned DAG)."""

    first: str
    last: str

    def as_json(self) -> dict[str, str]:
        return {"first": self.first, "last": self.last}


@dataclass(frozen=True, slots=True)
class FollowUp:
    """A spec that re-runs this one's failed runs (`new --retry-failed-of`)."""

    spec: str
    path: str


@dataclass(frozen=True, slots=True)
class VersionRuns:
    """How many of the spec's runs ran on one DAG version."""

    version: DagVersion | None  # None: Airflow names no version for these runs (never started)
    runs: int

    def text(self) -> str:
        what = "no DAG version (never started)" if self.version is None else self.version.text()
        return f"{what}: {self.runs} run{'' if self.runs == 1 else 's'}"

    def as_json(self) -> dict[str, Any]:
        version = self.version
        return {
            "version_number": None if version is None else version.number,
            "bundle_version": None if version is None else version.bundle_version,
            "runs": self.runs,
        }


@dataclass(frozen=True, slots=True)
class RanOn:
    """Which code re-ran history: the Airflow release each create was sent to, the `run_on_latest_version` it
    sent, and the DAG versions the spec's runs ran on (each run's latest `dag_versions` entry, read from Airflow)."""

    airflow: tuple[str, ...]  # releases, from the create intents (in order, once each)
    run_on_latest_version: tuple[bool | None, ...]  # as each create sent it (None: the release has no such field)
    versions: tuple[VersionRuns, ...]  # newest version first

    def text(self) -> str:
        created = "Airflow " + ", ".join(self.airflow) if self.airflow else "Airflow release not recorded"
        sent = ", ".join("not sent" if v is None else str(v).lower() for v in self.run_on_latest_version) or "?"
        ran = "; ".join(v.text() for v in self.versions) or "no run read"
        return f"created on {created}, run_on_latest_version {sent}; runs ran on {ran}"

    def as_json(self) -> dict[str, Any]:
        return {
            "airflow": list(self.airflow),
            "run_on_latest_version": list(self.run_on_latest_version),
            "dag_versions": [v.as_json() for v in self.versions],
        }


@dataclass(frozen=True, slots=True)
class ChangeRecord:
    spec: BackfillSpec
    git_commit: str | None
    approval: Approval | None
    approved_by: str  # who approved where and when, or that it was not recorded
    backfill_id: int | None
    outcome: Phase
    created_at: str | None  # the time of the create's audit outcome, as the audit log holds it
    completed_at: str | None  # the time of the last terminal observation, as the audit log holds it
    intervals: Intervals
    own_dates: tuple[DateRange, ...] | None  # the dates its backfill made or re-ran (None: not known)
    partitions: PartitionSpan | None
    chunks: tuple[ChunkRow, ...] | None  # None: not a chunked spec
    retried_by: tuple[FollowUp, ...]
    events: tuple[AuditRecord, ...]
    ran_on: RanOn | None = None  # None: Airflow was not read (offline)
    stages: tuple[StageRecord, ...] = ()  # its rehearsals, verifications and publish run, oldest first
    edited: str | None = None  # its file was edited in place: what changed (the record keeps what was applied)
    file_gone: str | None = None  # its file is no longer in the folder: where the spec shown comes from
    stops: tuple[StopHistory, ...] = ()  # every stop that held it, and its lift
    acknowledged: str | None = None  # its reviewed `acknowledged`, and who committed it (None: not acknowledged)
    link: str | None = None  # its backfill in Airflow's UI (None: no Airflow URL)
    approvals: tuple[Approval, ...] = ()  # each reviewed change an applied create or resume carried, oldest first
    coverage: Coverage | None = None  # version coverage: read now with Airflow, else as measured when it ended
    coverage_changed: tuple[Missed, ...] = ()  # intervals not covered now that were when it ended (Airflow read)

    @property
    def approved_changes(self) -> tuple[Approval, ...]:
        """The approvals that name their change (an evidence document's; an older record's name only reviews)."""
        return tuple(a for a in self.approvals if a.head_sha or a.base_sha or a.url or a.policy_blob is not None)

    @property
    def direction(self) -> str:
        return "backwards" if self.spec.run_backwards else "forward"

    def as_json(self) -> dict[str, Any]:
        s = self.spec
        document: dict[str, Any] = {
            "format_version": REPORT_FORMAT_VERSION,
            "spec": s.name,
            "path": s.path,
            "digest": s.digest,
            "git_commit": self.git_commit,
            "ticket": s.ticket,
            "reason": s.reason,
            "requested_by": s.requested_by,
            "approvers": list(s.approvers),
            "approval": None if self.approval is None else self.approval.as_json(),
            "approved_by": self.approved_by,
            "dag_id": s.dag_id,
            "from_date": format_utc(s.from_date),
            "to_date": format_utc(s.to_date),
            "reprocess_behavior": s.reprocess_behavior.value,
            "max_active_runs": s.max_active_runs,
            "direction": self.direction,
            "desired_state": s.state.value,
            "backfill_id": self.backfill_id,
            "outcome": self.outcome.value,
            "created_at": self.created_at,
            "completed_at": self.completed_at,
            "intervals": self.intervals.as_json(),
            "own_dates": None if self.own_dates is None else ranges_json(self.own_dates),
            "partitions": None
            if self.partitions is None
            else {"first": self.partitions.first, "last": self.partitions.last},
            "chunks": None if self.chunks is None else [c.as_json() for c in self.chunks],
            "retry_of": s.retry_of,
            "retried_by": [{"spec": r.spec, "path": r.path} for r in self.retried_by],
            "audit": [e.as_json() for e in self.events],
        }
        if self.ran_on is not None:  # only with Airflow read: offline, the document is what it always was
            document["ran_on"] = self.ran_on.as_json()
        if self.stages or s.rehearsal or s.verify or s.publish:  # a spec without stages reads as it always did
            document["writes"], document["rollback"] = list(s.writes), s.rollback
            document["stages"] = [stage_json(r) for r in self.stages]
        if self.edited is not None:  # only then: a record of a spec never edited reads as it always did
            document["edited_in_place"] = self.edited
        if self.file_gone is not None:
            document["file_gone"] = self.file_gone
        if self.acknowledged is not None:
            document["acknowledged"] = self.acknowledged
        if self.link is not None:
            document["link"] = self.link
        if self.stops:  # only then: a spec never stopped reads as it always did
            document["stops"] = [_stop_json(h) for h in self.stops]
        if self.coverage is not None:  # only then: a record of a spec that never ended reads as it always did
            changed = [m.as_json() for m in self.coverage_changed]
            document["coverage"] = self.coverage.as_json() | {"changed_since_end": changed, "note": DISCLAIMER}
        if self.approved_changes:  # only then: a record without evidence documents reads as it always did
            document["approved_changes"] = [a.as_json() for a in self.approved_changes]
        return document


def stage_json(record: StageRecord) -> dict[str, Any]:
    return {
        "environment": record.environment,
        "stage": record.stage.value,
        "key": record.key,
        "state": record.state.value,
        "started_at": format_utc(record.started_at.replace(microsecond=0)),
        "backfill_ids": list(record.backfill_ids),
        "run_id": record.run_id,
        "result": record.reason,
        "metrics": None if record.metrics is None else dict(record.metrics),
        "runs": None if record.runs is None else dict(record.runs),
    }


def change_record(
    spec: BackfillSpec,
    binding: Binding | None,
    events: Sequence[AuditRecord],
    retries: Sequence[BackfillSpec] = (),
    stages: Sequence[StageRecord] = (),
    *,
    edited: str | None = None,
    file_gone: str | None = None,
    stops: Sequence[StopHistory] = (),
    acknowledged_by: str | None = None,
) -> ChangeRecord:
    """`spec` as it was applied (an edited file's applied values: `edited` says what the file says now)."""
    created = (binding.created if binding else None) or CreateFacts()
    return ChangeRecord(
        spec=spec,
        git_commit=binding.git_commit if binding else None,
        approval=binding.approval if binding else None,
        approved_by=approved_by(binding.approval if binding else None, spec.approvers),
        backfill_id=binding.backfill_id if binding else None,
        outcome=binding.phase if binding else Phase.PENDING,
        created_at=next((e.time for e in events if _created(e)), None),
        completed_at=next((e.time for e in reversed(events) if e.entry.outcome in TERMINAL), None),
        intervals=_intervals((binding.runs if binding else None) or RunSummary({}), created),
        own_dates=created.dates,
        partitions=_partitions(created),
        chunks=None if binding is None or binding.progress is None else _chunks(binding.progress, binding),
        retried_by=tuple(FollowUp(r.name, r.path) for r in retries),
        events=tuple(events),
        stages=tuple(stages),
        edited=edited,
        file_gone=file_gone,
        stops=tuple(stops),
        acknowledged=None
        if spec.acknowledged is None
        else f"{spec.acknowledged} ({acknowledged_by or 'who: not known'})",
        approvals=approvals_of(events),
        coverage=binding.coverage if binding else None,
    )


def _stop_json(history: StopHistory) -> dict[str, Any]:
    stop = history.stop
    return {
        "id": stop.id,
        "kind": stop.kind.value,
        "target": stop.target,
        "actor": stop.actor,
        "source": stop.source.value,
        "reason": stop.reason,
        "created_at": format_utc(stop.created_at),
        "lifted_at": None if history.lifted_at is None else format_utc(history.lifted_at),
        "lifted_by": history.lifted_by,
        "lift_reason": history.lift_reason,
    }


def so_far(record: ChangeRecord, runs: Sequence[DagRun]) -> ChangeRecord:
    """A spec still running, counted from the runs read now (the ones its calendar shows), so the counts and the
    calendar tell the same; a finished spec keeps its recorded outcome."""
    if record.outcome.terminal:
        return record
    now = summarise(runs)
    counted = _intervals(now, CreateFacts())
    intervals = replace(
        record.intervals,
        complete=counted.complete,
        failed=counted.failed,
        failed_dates=counted.failed_dates,
        failed_partitions=counted.failed_partitions,
        never_started=counted.never_started,
        unfinished=now.count("queued") + now.count("running"),
    )
    return replace(record, intervals=intervals)


def approved_change_text(approval: Approval) -> str:
    """`#41 <url>: base …, head …, merged as …; policy …; reviews that counted: bob (review 9001, commit abc…)`."""
    reviews = ", ".join(
        f"{r.login} (review {'id unknown' if r.review_id is None else r.review_id}, commit {r.commit_id[:12] or '?'})"
        for r in approval.reviews
    )
    return f"{approval.change_text()}; reviews that counted: {reviews or 'none'}"


def approvals_of(events: Iterable[AuditRecord]) -> tuple[Approval, ...]:
    """The approval each create and unpause intent carried, once each, oldest first."""
    found: list[Approval] = []
    for event in events:
        request = event.entry.request
        if event.entry.phase != AuditPhase.INTENT or not isinstance(request, Mapping):
            continue
        approval = request.get("approval")
        try:
            made = Approval.from_json(approval) if isinstance(approval, Mapping) else None
        except (KeyError, TypeError, ValueError):  # a record's body is outside text: never trusted to parse
            made = None
        if made is not None and made not in found:
            found.append(made)
    return tuple(found)


def _created(event: AuditRecord) -> bool:
    entry = event.entry
    return entry.action == Action.CREATE and entry.phase == AuditPhase.OUTCOME and entry.backfill_id is not None


def _intervals(runs: RunSummary, created: CreateFacts) -> Intervals:
    in_range, to_create = created.runs_in_range, created.runs_to_create
    return Intervals(
        complete=runs.count("success"),
        failed=runs.count("failed"),
        failed_dates=tuple(runs.failed_dates),
        failed_partitions=tuple(runs.failed_partitions),
        never_started=runs.never_started,
        skipped=None if in_range is None or to_create is None else in_range - to_create,
        in_range=in_range,
        reruns=tuple(runs.reruns),
        skipped_slots=runs.skipped,
    )


def _chunks(progress: Progress, binding: Binding) -> tuple[ChunkRow, ...]:
    rows = []
    for chunk in progress.chunks:
        summary = chunk.summary or (binding.runs if chunk.backfill_id == binding.backfill_id else None)
        rows.append(
            ChunkRow(
                chunk.backfill_id,
                chunk.first,
                chunk.last,
                chunk.runs,
                chunk.max_active_runs,
                finished=chunk.summary is not None,
                succeeded=None if summary is None else summary.count("success"),
                failed=None if summary is None else summary.count("failed"),
            )
        )
    return tuple(rows)


def _partitions(created: CreateFacts) -> PartitionSpan | None:
    first, last = created.first_partition, created.last_partition
    return None if first is None or last is None else PartitionSpan(first, last)


def ran_on(events: Iterable[AuditRecord], runs: Iterable[DagRun]) -> RanOn:
    """What the create intents recorded (release, `run_on_latest_version` sent) and the versions `runs` ran on."""
    releases: list[str] = []
    sent: list[bool | None] = []
    for event in events:
        request = event.entry.request
        if event.entry.action != "create" or event.entry.phase != "intent" or not request:
            continue
        if isinstance(request.get("airflow"), str) and request["airflow"] not in releases:
            releases.append(request["airflow"])
        body = request.get("body")
        value = body.get("run_on_latest_version") if isinstance(body, Mapping) else None
        if value not in sent:
            sent.append(value)
    counts = Counter(run.dag_versions[-1] if run.dag_versions else None for run in runs)
    known = sorted((v for v in counts if v is not None), key=lambda v: (-v.number, v.text()))
    order: list[DagVersion | None] = [*known, *([None] if None in counts else [])]  # the newest first, unknown last
    return RanOn(tuple(releases), tuple(sent), tuple(VersionRuns(v, counts[v]) for v in order))
