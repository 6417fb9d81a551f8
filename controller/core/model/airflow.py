"""Values describing what Airflow holds (pure): backfills, DAGs, DAG runs, and run summaries."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime, time
from typing import Any

from controller.core.model.spec import BackfillSpec, canonical_json, format_utc, thaw_conf


@dataclass(frozen=True, slots=True)
class Backfill:
    id: int
    dag_id: str
    from_date: datetime
    to_date: datetime
    reprocess_behavior: str
    max_active_runs: int
    is_paused: bool
    dag_run_conf: Mapping[str, Any] | None
    created_at: datetime
    completed_at: datetime | None
    # the Airflow login whose create made it, from its runs (None: not read, or not known)
    creator: str | None = None

    @property
    def active(self) -> bool:
        return self.completed_at is None

    def conf_json(self) -> str | None:
        return None if not self.dag_run_conf else canonical_json(dict(self.dag_run_conf))


@dataclass(frozen=True, slots=True)
class BackfillRequest:
    """A create or dry-run body; only fields that are set are sent (the API rejects unknown fields)."""

    dag_id: str
    from_date: datetime
    to_date: datetime
    reprocess_behavior: str | None = None
    max_active_runs: int | None = None
    run_backwards: bool | None = None
    dag_run_conf: Mapping[str, Any] | None = None
    run_on_latest_version: bool | None = None
    drain_dag: bool | None = None  # sent only when set (a 422 before Airflow 3.4)

    @classmethod
    def from_spec(cls, spec: BackfillSpec, reprocess: str | None = None) -> BackfillRequest:
        """What a spec asks Airflow for: only the fields it sets (older servers refuse unknown ones)."""
        return cls(
            dag_id=spec.dag_id,
            from_date=spec.from_date,
            to_date=spec.to_date,
            reprocess_behavior=reprocess or spec.reprocess_behavior.value,
            max_active_runs=spec.max_active_runs,
            run_backwards=True if spec.run_backwards else None,
            dag_run_conf=thaw_conf(spec) or None,
            run_on_latest_version=spec.run_on_latest_version,
            drain_dag=True if spec.drain_dag else None,
        )

    def body(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "dag_id": self.dag_id,
            "from_date": format_utc(self.from_date),
            "to_date": format_utc(self.to_date),
        }
        optional = {
            "reprocess_behavior": self.reprocess_behavior,
            "max_active_runs": self.max_active_runs,
            "run_backwards": self.run_backwards,
            "run_on_latest_version": self.run_on_latest_version,
            "dag_run_conf": None if self.dag_run_conf is None else dict(self.dag_run_conf),
            "drain_dag": self.drain_dag,
        }
        body.update({k: v for k, v in optional.items() if v is not None})
        return body


@dataclass(frozen=True, slots=True)
class Schedule:
    """What `GET /dags/{id}/details` says about the timetable: enough to explain why it cannot be backfilled."""

    periodic: bool = True
    summary: str | None = None  # "0 0 * * *", "@once", "@continuous", "Asset", None for schedule=None
    description: str | None = None  # "At 00:00", "Never, external triggers only", "Triggered by assets", …
    allowed_run_types: tuple[str, ...] | None = None  # None: every run type
    asset_triggered: bool = False  # the DAG has an asset expression


# Timetable summaries of Airflow's non-periodic timetables (NullTimetable's is None); every other timetable
# is periodic unless it says otherwise, and only 3.3.0+ says it (`timetable_periodic`)
NOT_PERIODIC = ("None", "@once", "@continuous", "Asset", "Partitioned Asset", "PartitionedAtRuntime")


def periodic_from_summary(summary: str | None) -> bool:
    """Whether a timetable is periodic, from `timetable_summary` alone (Airflow before 3.3.0): its
    trivial timetables (`schedule=None`, `@once`, `@continuous`, assets) are not, the rest are (the
    timetable default, `Timetable.periodic = True`); "Asset or 0 0 * * *" runs on its time schedule too."""
    if summary is not None and summary.startswith("Asset or "):  # AssetOrTimeSchedule: its time schedule's
        return periodic_from_summary(summary.removeprefix("Asset or "))
    return summary is not None and summary not in NOT_PERIODIC


# The one declaration of the fields that define a backfill: the create request sends exactly these, and
# immutability (`changes.IMMUTABLE`) forbids changing any of them once a spec is applied.
BACKFILL_FIELDS = tuple(f.name for f in fields(BackfillRequest))


@dataclass(frozen=True, slots=True)
class DagInfo:
    dag_id: str
    is_paused: bool
    is_stale: bool
    has_import_errors: bool
    is_backfillable: bool
    depends_on_past: bool | None  # None: not looked up (Airflow's dry run enforces its rules anyway)
    params: Mapping[str, Any] = field(default_factory=dict)
    partitioned: bool = False  # timetable_partitioned: runs have a partition key instead of a logical date
    schedule: Schedule | None = None  # the timetable as the details endpoint describes it (None: not known)
    max_active_tasks: int | None = None  # the DAG's task concurrency (the plan's load ceiling; None: not known)
    refusal: str | None = None  # why this Airflow release cannot back the DAG up exactly (None: it can)
    latest_version: DagVersion | None = None  # the latest DAG version the details name (the code new runs use)
    rerun_with_latest_version: bool | None = None  # the DAG's own choice for re-runs (3.3.0+ details; None: unset
    # on the DAG, or not read: the DAG listing and older releases do not carry it)
    tags: tuple[str, ...] | None = None  # the DAG's Airflow tags (None: not read); policy `scope: {tags}`
    catchup: bool | None = None  # whether unpausing creates the missed intervals (only the details carry it)

    @property
    def dag_version(self) -> str | None:
        """The latest version as the plan shows it: "3", "3 (bundle abc1234)"."""
        v = self.latest_version
        return None if v is None else f"{v.number}" + (f" (bundle {v.bundle_version})" if v.bundle_version else "")


@dataclass(frozen=True, slots=True)
class DagVersion:
    """One version of a DAG's code, as a run's `dag_versions` names it."""

    number: int  # version_number
    bundle_version: str | None = None  # the bundle's version (a git commit), None for an unversioned bundle

    def text(self) -> str:
        return f"DAG version {self.number}" + (f" (bundle {self.bundle_version})" if self.bundle_version else "")


@dataclass(frozen=True, slots=True)
class DagRun:
    """A DAG run; a partitioned DAG's runs have no logical date but a partition key and date."""

    run_id: str
    logical_date: datetime | None
    state: str
    start_date: datetime | None
    end_date: datetime | None
    partition_key: str | None = None
    partition_date: datetime | None = None
    queued_at: datetime | None = None
    dag_versions: tuple[DagVersion, ...] = ()  # the code its task instances ran on, oldest first (the last: latest)
    triggering_user_name: str | None = None  # who made it: a backfill's creator on 3.1-3.3 (3.4: a display name)


RUN_STATES = ("queued", "running", "success", "failed")  # Airflow 3's DagRunState, every value
FINISHED_STATES = ("success", "failed")


@dataclass(frozen=True, slots=True)
class TriggeredRun:
    """A run started with `POST /dags/{dag_id}/dagRuns` (a verification or publish run), or read back by its id."""

    dag_id: str
    run_id: str
    state: str  # queued | running | success | failed
    start_date: datetime | None
    end_date: datetime | None
    conf: Mapping[str, Any]
    queued_at: datetime | None = None  # when Airflow queued it: a run that never starts is timed from here

    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES


@dataclass(frozen=True, slots=True)
class PlannedRun:
    """One run a dry run lists: a logical date, or for a partitioned DAG a partition key and date."""

    logical_date: datetime | None
    partition_key: str | None = None
    partition_date: datetime | None = None

    @property
    def date(self) -> datetime:
        """The logical date, else the partition date (Airflow gives one of the two)."""
        when = self.logical_date or self.partition_date
        if when is None:
            raise ValueError("a dry-run entry without logical_date or partition_date")
        return when


@dataclass(frozen=True, slots=True)
class Rerun:
    """A date of a backfill's own that was queued again after its creation window."""

    date: datetime
    by: str  # `spec NAME (#ID)`, `backfill #ID (unmanaged)`, or `hand`
    state: str  # the date's state now
    own: str | None = None  # what the backfill's own run did (None: not known, the re-run replaced it)

    def text(self) -> str:
        """`2025-01-03 re-run by spec orders-fix (#42), now success` (`re-run by hand, …`; hours when not midnight)."""
        when = self.date.strftime("%Y-%m-%d" if self.date.time() == time(0) else "%Y-%m-%d %H:%M")
        return f"{when} re-run by {self.by}, now {self.state}"

    def as_json(self) -> dict[str, Any]:
        return {"date": self.date.isoformat(), "by": self.by, "state": self.state, "own": self.own}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Rerun:
        return cls(datetime.fromisoformat(data["date"]), str(data["by"]), str(data["state"]), data.get("own"))


@dataclass(frozen=True, slots=True)
class Skipped:
    """A slot of a backfill Airflow did not create a run for, with Airflow's reason (`in flight`: a queued or
    running run was there; `already exists`: a run was there and the reprocess rule kept it; `unknown`)."""

    slot: str  # the date (`2025-01-03`, hours when not midnight) or the partition key
    reason: str

    def text(self) -> str:
        return f"{self.slot} skipped: {self.reason}"

    def as_json(self) -> dict[str, Any]:
        return {"slot": self.slot, "reason": self.reason}


@dataclass(frozen=True, slots=True)
class BackfillSlot:
    """One slot of a backfill as `GET /backfills/{id}/dag_runs` lists it (Airflow 3.4): the run it created or
    re-ran there (its current state), or none and why (`exception_reason`)."""

    sort_ordinal: int
    logical_date: datetime | None
    partition_key: str | None
    run_id: str | None
    state: str | None
    exception_reason: str | None

    @property
    def name(self) -> str:
        if self.logical_date is None:
            return self.partition_key or f"slot {self.sort_ordinal}"
        return self.logical_date.strftime("%Y-%m-%d" if self.logical_date.time() == time(0) else "%Y-%m-%d %H:%M")


def slot_counts(slots: Sequence[BackfillSlot]) -> tuple[dict[str, int], tuple[Skipped, ...]]:
    """A backfill's runs by state and its skipped slots, from its slots: exact, no dates to attribute."""
    counts = Counter(s.state for s in slots if s.run_id is not None and s.state is not None)
    skipped = tuple(Skipped(s.name, s.exception_reason or "unknown") for s in slots if s.run_id is None)
    return dict(counts), skipped


@dataclass(frozen=True, slots=True)
class RunSummary:
    """DAG runs of one backfill, by state, with what status and reports need."""

    counts: Mapping[str, int]
    failed_dates: tuple[datetime, ...] = ()
    never_started: int = 0  # failed without a start: cancelled while queued
    mean_duration: float | None = None  # seconds, over finished runs
    failed_partitions: tuple[str, ...] = ()  # partition keys of failed runs (partitioned DAGs)
    superseded: int = 0  # older runs of a partition that a later run replaced (not counted)
    reruns: tuple[Rerun, ...] = ()  # own dates queued again after the creation window (not counted)
    skipped: tuple[Skipped, ...] = ()  # slots Airflow created no run for, with its reason (3.4's slots only)

    @property
    def unknown(self) -> int:
        """Own dates re-run before their outcome was recorded: what the backfill's run did there is lost."""
        return sum(1 for r in self.reruns if r.own is None)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def count(self, state: str) -> int:
        return self.counts.get(state, 0)

    @property
    def failed_unlisted(self) -> int:
        """Failed runs that started but are not in `failed_dates` (a large backfill lists the first ones)."""
        listed = len(self.failed_dates) + len(self.failed_partitions)
        return max(0, self.count("failed") - self.never_started - listed)

    @property
    def unfinished(self) -> int:
        return self.count("queued") + self.count("running")

    def as_json(self) -> dict[str, Any]:
        return {
            "counts": dict(sorted(self.counts.items())),
            "total": self.total,
            "failed_dates": [d.isoformat() for d in self.failed_dates],
            "never_started": self.never_started,
            "mean_duration": self.mean_duration,
            "failed_partitions": list(self.failed_partitions),
            "superseded": self.superseded,
            "reruns": [r.as_json() for r in self.reruns],
        } | ({"skipped": [s.as_json() for s in self.skipped]} if self.skipped else {})


def summary_from_json(data: Mapping[str, Any]) -> RunSummary:
    """The inverse of `RunSummary.as_json` (the store keeps the last observed summary as JSON)."""
    return RunSummary(
        dict(data.get("counts") or {}),
        tuple(datetime.fromisoformat(d) for d in data.get("failed_dates") or ()),
        int(data.get("never_started") or 0),
        data.get("mean_duration"),
        tuple(data.get("failed_partitions") or ()),
        int(data.get("superseded") or 0),
        tuple(Rerun.from_json(r) for r in data.get("reruns") or ()),
        tuple(Skipped(str(s["slot"]), str(s["reason"])) for s in data.get("skipped") or ()),
    )


def summary_from_counts(
    counts: Mapping[str, int],
    failed: Sequence[DagRun],
    recent_finished: Sequence[DagRun],
    *,
    never_started: int | None = None,
) -> RunSummary:
    """A summary from state counts, the failed runs (all, or the first ones with `never_started` counted
    apart), and a sample of the latest finished runs (for the mean duration): what `summarise` computes
    from every run, for backfills too large to list."""
    sample = summarise(recent_finished)
    started = [r for r in failed if r.start_date is not None]
    return RunSummary(
        {state: n for state, n in counts.items() if n},
        tuple(r.logical_date for r in started if r.logical_date is not None),
        len(failed) - len(started) if never_started is None else never_started,
        sample.mean_duration,
    )


def summarise(runs: Sequence[DagRun]) -> RunSummary:
    """Counts by state; of several runs of one partition only the latest counts (see `latest_per_partition`)."""
    latest = latest_per_partition(runs)
    started_failures = [r for r in latest if r.state == "failed" and r.start_date is not None]
    counts = Counter(run.state for run in latest)
    failed = tuple(r.logical_date for r in started_failures if r.logical_date is not None)
    keys = tuple(sorted(r.partition_key for r in started_failures if r.partition_key is not None))
    never = sum(1 for r in latest if r.state == "failed" and r.start_date is None)
    durations = [(r.end_date - r.start_date).total_seconds() for r in latest if r.start_date and r.end_date]
    mean = sum(durations) / len(durations) if durations else None
    return RunSummary(dict(counts), failed, never, mean, keys, len(runs) - len(latest))


_EARLIEST = datetime.min.replace(tzinfo=UTC)


def latest_per_partition(runs: Sequence[DagRun]) -> list[DagRun]:
    """Runs without a partition key, and the latest run of each partition key, in the given order.

    Reprocessing a partition creates a new run beside the old one (Airflow 3.3.2), so the latest run of a
    partition decides its state: latest by queued_at, then start_date, then run id.
    """
    latest: dict[str, DagRun] = {}
    for run in runs:
        if run.partition_key is None:
            continue
        seen = latest.get(run.partition_key)
        if seen is None or _recency(run) > _recency(seen):
            latest[run.partition_key] = run
    return [r for r in runs if r.partition_key is None or latest[r.partition_key] is r]


def _recency(run: DagRun) -> tuple[datetime, datetime, str]:
    return (run.queued_at or _EARLIEST, run.start_date or _EARLIEST, run.run_id)
