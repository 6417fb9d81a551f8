"""`new NAME --retry-failed-of SPEC` (pure): the follow-up spec over the failed runs of a finished spec.

One spec, `reprocess_behavior: failed`, from the first to the last failed logical date: Airflow re-runs only the
failed runs of that range (the successful ones between stay), and `expected_runs` is the number of failed runs the
store recorded, so reconcile refuses the follow-up if the dry run counts more (a failure that is not the spec's own,
or a date with no run). When the store lists only some failed dates (a large backfill, runs cancelled while queued,
a partitioned DAG's keys), the range is the original's whole range, with the same bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, time

from controller.core.model.airflow import RunSummary
from controller.core.model.binding import Binding
from controller.core.model.spec import BackfillSpec, format_utc
from controller.errors import UsageError

LISTED = 5  # failed dates named in the reason


@dataclass(frozen=True, slots=True)
class Retry:
    original: str
    dag_id: str
    from_date: str
    to_date: str
    failed: int  # the failed runs the store recorded: the follow-up's expected_runs
    whole_range: bool  # the store did not list every failed date: the original's range is retried
    reason: str
    never_started: int = 0  # of `failed`, the runs a cancel failed while they were queued: they never ran

    def text(self) -> str:
        """What `new` says it wrote: the failed runs, and those of a cancel that never ran."""
        said = f"retries the {self.failed} failed run(s) of {self.original}"
        if self.never_started:
            said += (
                f"; {self.never_started} of them never started: {self.original} was cancelled while they were "
                "queued (Airflow marks them failed), so they re-run work that never ran, not a failure"
            )
        return said


def retry_of(spec: BackfillSpec, binding: Binding | None) -> Retry:
    """The follow-up of `spec`, from its binding's final counts; refused (exit 2) unless it finished with failures."""
    if binding is None:
        raise UsageError(
            f"{spec.name} has no recorded outcome: it was never reconciled with this store",
            hint="run it with the store that reconciled it (BACKFILLCTL_STORE_URL)",
        )
    if not binding.phase.terminal:
        raise UsageError(
            f"{spec.name} is {binding.phase.value}: only a finished spec's failed runs can be retried",
            hint=f"wait until `backfillctl status {spec.name}` shows CompletedWithFailures",
        )
    runs = binding.runs or RunSummary({})
    failed = runs.count("failed")
    if not failed:
        raise UsageError(f"{spec.name} ended {binding.phase.value} with no failed run: nothing to retry")
    listed = sorted(runs.failed_dates)
    whole = not listed or runs.failed_unlisted > 0 or runs.never_started > 0 or bool(runs.failed_partitions)
    first, last = (spec.from_date, spec.to_date) if whole else (listed[0], listed[-1])
    shown = ", ".join(_when(d) for d in listed[:LISTED]) + (", …" if len(listed) > LISTED else "")
    reason = f"Retry the {failed} failed run(s) of {spec.name} ({binding.phase.value}" + (
        f": {shown})" if shown else ")"
    )
    return Retry(spec.name, spec.dag_id, _when(first), _when(last), failed, whole, reason, runs.never_started)


def _when(moment: datetime) -> str:
    """A date for 00:00 UTC, else the date-time (an hourly DAG's failed 05:00 run stays 05:00)."""
    utc = moment.astimezone(UTC)
    return utc.date().isoformat() if utc.time() == time(0) else format_utc(utc)
