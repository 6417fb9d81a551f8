"""Schedules: partitioned DAGs, and the schedules Airflow cannot backfill (pure; `now` is a parameter).

A partitioned DAG (`timetable_partitioned`, e.g. `CronPartitionTimetable`) is backfilled over a range of
partition dates; its runs have a partition key and no logical date.  Measured on Airflow 3.3.2:
reprocessing a partition creates a new run beside the old one, and unlike other DAGs a partitioned
backfill does not drop partitions that lie in the future.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from controller.core.model.airflow import Backfill, DagInfo, DagRun, PlannedRun
from controller.core.model.policy import Policy
from controller.core.model.spec import BackfillSpec, format_utc

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
