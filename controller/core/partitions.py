"""Schedules: partitioned DAGs, and the schedules Airflow cannot backfill (pure; `now` is a parameter).

A partitioned DAG (`timetable_partitioned`, e.g. `CronPartitionTimetable`) is backfilled over a range of
partition dates; its runs have a partition key and no logical date.  Measured on Airflow 3.3.2:
reprocessing a partition creates a new run beside the old one, and unlike other DAGs a partitioned
backfill does not drop partitions that lie in the future.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime

from controller.core.diagnostics import Diagnostic, Severity
from controller.core.model import Backfill, DagInfo, DagRun, PlannedRun
from controller.core.policy import Policy
from controller.core.spec import BackfillSpec, format_utc
from controller.core.validation import LoadedSpec

FUTURE_HINT = (
    "end the range at or before now, or set `allow_future_partitions: true` in the policy if runs for "
    "partitions that have not happened yet are intended"
)


def future_partitions(spec: BackfillSpec, info: DagInfo | None, policy: Policy, now: datetime) -> str | None:
    """Why a partitioned spec whose range reaches past `now` must not be created, or None."""
    if info is None or not info.partitioned or policy.allow_future_partitions or spec.to_date <= now:
        return None
    return (
        f"to_date {format_utc(spec.to_date)} is after now ({format_utc(now.replace(microsecond=0))}) and "
        f"{spec.dag_id} is a partitioned "
        "DAG: Airflow would create runs for partitions that have not happened yet"
    )


def unbackfillable(info: DagInfo) -> str | None:
    """Why Airflow cannot backfill this DAG's schedule, in the user's terms, or None when it can."""
    if info.refusal is not None:
        return info.refusal
    if info.is_backfillable:
        return None
    dag, schedule = info.dag_id, info.schedule
    if schedule is None:
        return f"DAG {dag} has no periodic schedule, so it cannot be backfilled"
    allowed = schedule.allowed_run_types
    if schedule.periodic and allowed is not None and "backfill" not in allowed:
        return f"DAG {dag} does not allow backfill runs (allowed_run_types: {', '.join(allowed) or 'none'})"
    summary, description = schedule.summary, schedule.description or "no description"
    if summary is None or summary == "None":
        why = "has no schedule (schedule=None): it runs only when triggered, so there are no dates to backfill"
    elif summary == "@once":
        why = "runs once (schedule='@once'): there is no series of dates to backfill"
    elif summary == "@continuous":
        why = "runs continuously (schedule='@continuous'): its runs have no dates to backfill"
    elif schedule.asset_triggered or summary in ("Asset", "Partitioned Asset"):
        why = (
            "is triggered by assets, not by a time schedule: there are no dates to backfill; "
            "backfill the DAG that updates the assets instead"
        )
    elif summary == "PartitionedAtRuntime":
        why = "gets its partition keys at runtime: there are no partitions to backfill"
    else:
        why = f"has a schedule that is not periodic ({summary}: {description}), so there are no dates to backfill"
    return f"DAG {dag} {why}; Airflow cannot backfill it"


LISTED = 10  # failed partition keys named in a status note or audit message (the report lists all)


def failed_partitions_text(keys: Sequence[str]) -> str:
    """`failed partitions: K1, K2` (the first ten keys, then how many more)."""
    more = f" and {len(keys) - LISTED} more" if len(keys) > LISTED else ""
    return "failed partitions: " + ", ".join(keys[:LISTED]) + more


def runs_of(backfill: Backfill, runs: Sequence[DagRun]) -> list[DagRun]:
    """The runs of a partitioned DAG's range that this backfill created.

    A backfill creates all its runs when it is created, and reprocessing creates new runs, so runs queued
    before the backfill existed, or after it completed, belong to another backfill (or a later reprocess).
    Runs without a partition key or a queue time cannot be told apart and are kept.
    """
    end = backfill.completed_at
    return [
        r
        for r in runs
        if r.partition_key is None
        or r.queued_at is None
        or (r.queued_at >= backfill.created_at and (end is None or r.queued_at <= end))
    ]


def runs_within(backfill: Backfill, runs: Sequence[DagRun], *, partitioned: bool) -> list[DagRun]:
    """The backfill's runs among a DAG's runs over a wider range (what a query over its own range returns)."""
    low, high = backfill.from_date, backfill.to_date
    if not partitioned:
        return [r for r in runs if r.logical_date is not None and low <= r.logical_date <= high]
    return runs_of(backfill, [r for r in runs if r.partition_date is not None and low <= r.partition_date <= high])


def partition_range(planned: Sequence[PlannedRun]) -> tuple[str, str] | None:
    """First and last partition key by partition date, or None when the dry run listed no partitions."""
    keyed = sorted((p.date, p.partition_key) for p in planned if p.partition_key is not None)
    return (keyed[0][1], keyed[-1][1]) if keyed else None


class Unknown:
    """A DAG whose details could not be read (Airflow unreachable, refused): `message` says why."""

    def __init__(self, message: str) -> None:
        self.message = message


def check_against_dag(
    item: LoadedSpec, info: DagInfo | Unknown | None, policy: Policy, now: datetime, similar: Sequence[str] = ()
) -> Iterator[Diagnostic]:
    """`validate` with Airflow configured: the DAG exists, its schedule can be backfilled, and a partitioned
    DAG's range does not reach past `now` (unless the policy allows it). `info` None: the DAG was not found;
    `similar`: the ids Airflow's DAG list holds that are closest to it (a typo's likely fix)."""
    spec = item.spec
    if isinstance(info, Unknown):
        yield Diagnostic(
            item.at("dag_id"),
            f"could not check DAG {spec.dag_id!r} in Airflow: {info.message}",
            "plan and reconcile check it again",
            Severity.WARNING,
        )
        return
    if info is None:
        yield Diagnostic(
            item.at("dag_id"),
            f"DAG {spec.dag_id!r} does not exist in Airflow"
            + (f"; did you mean {' or '.join(repr(i) for i in similar)}?" if similar else ""),
            "check the dag_id (Airflow's UI or `GET /api/v2/dags` lists the DAGs)",
        )
        return
    refusal = unbackfillable(info)
    if refusal is not None:
        yield Diagnostic(item.at("dag_id"), refusal, "only DAGs with a periodic schedule can be backfilled")
    future = future_partitions(spec, info, policy, now)
    if future is not None:
        yield Diagnostic(item.at("to_date"), future, FUTURE_HINT)
    elif info.partitioned and spec.to_date > now:
        yield Diagnostic(
            item.at("to_date"),
            f"to_date {format_utc(spec.to_date)} is in the future and {spec.dag_id} is a partitioned DAG: Airflow "
            "will create runs for partitions that have not happened yet (the policy allows it)",
            None,
            Severity.WARNING,
        )


def superseded_warnings(
    item: LoadedSpec, info: DagInfo | Unknown | None, found: Sequence[Diagnostic]
) -> set[Diagnostic]:
    """The offline warning "Airflow only creates runs whose interval has already ended" is wrong for a
    partitioned DAG; once its details are known, the partition rules above replace it."""
    if not isinstance(info, DagInfo) or not info.partitioned:
        return set()
    path = item.spec.path  # the file's own warnings first: a validated spec's document is read again only if needed
    mine = [
        d for d in found if d.location.source == path and not d.is_error and "interval has already ended" in d.message
    ]
    if not mine:
        return set()
    where = item.at("to_date")
    return {d for d in mine if d.location == where}
