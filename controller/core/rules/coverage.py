"""Version coverage (pure): for each interval of a spec's range, did its latest run succeed on the target DAG
version? Evidence from Airflow's metadata about which code ran (each run's `dag_versions`), not proof that the
outputs are correct.

The target is the DAG's latest version when the spec ended (recorded then); a record without one uses the DAG's
latest version when it is read, and says so. An interval is keyed by its logical date, or by its partition date on
a partitioned DAG (a re-processed partition has several runs: the latest by queue time decides).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import MINYEAR, UTC, datetime

from controller.core.model.airflow import DagRun, DagVersion
from controller.core.model.coverage import Coverage, Gap, Missed, TargetSource

_EARLIEST = datetime(MINYEAR, 1, 1, tzinfo=UTC)
IN_FLIGHT = ("queued", "running")


def coverage(
    runs: Sequence[DagRun],
    target: DagVersion,
    intervals: Iterable[datetime],
    *,
    ended: datetime | None,
    source: TargetSource = TargetSource.AT_END,
) -> Coverage:
    """Every interval in `intervals` or with a run in `runs` (any run type), judged by its latest run by queue
    time: covered when it succeeded and its latest try ran on `target` (`latest_code`). `ended`: when the spec ended (a
    successful run on other code queued after it was re-run since; None: not known, so never said)."""
    latest = latest_runs(runs)
    keys = sorted(set(intervals) | set(latest))
    missed = [m for m in (_judge(key, latest.get(key), target, ended) for key in keys) if m is not None]
    return Coverage(target, source, len(keys), len(keys) - len(missed), tuple(missed))


def latest_runs(runs: Iterable[DagRun]) -> dict[datetime, DagRun]:
    """Each interval's latest run by queue time (a later one in `runs` wins a tie: the read is oldest first)."""
    latest: dict[datetime, DagRun] = {}
    for run in runs:
        key = run.logical_date or run.partition_date
        if key is None:
            continue
        kept = latest.get(key)
        if kept is None or (run.queued_at or _EARLIEST) >= (kept.queued_at or _EARLIEST):
            latest[key] = run
    return latest


def changed_since(before: Coverage, now: Coverage) -> tuple[Missed, ...]:
    """The intervals missed now that were covered (or missed for another reason) when `before` was recorded."""
    known = set(before.missed)
    return tuple(m for m in now.missed if m not in known)


def latest_code(run: DagRun) -> DagVersion | None:
    """The code a run's latest try ran on: the last of its `dag_versions` (None: none recorded). Airflow lists the
    code of every try of every task, so a run re-run on new code also names the old one; its own `version_number`
    is this last one too. (A run only partly cleared onto new code reads the same: evidence, not proof.)"""
    return run.dag_versions[-1] if run.dag_versions else None


def _judge(key: datetime, run: DagRun | None, target: DagVersion, ended: datetime | None) -> Missed | None:
    if run is None:
        return Missed(key.isoformat(), Gap.NEVER_RAN)
    label, code = run.partition_key or key.isoformat(), run.dag_versions
    if run.state in IN_FLIGHT:
        return Missed(label, Gap.UNFINISHED, code)
    if run.state != "success":
        return Missed(label, Gap.FAILED, code)
    if latest_code(run) == target:
        return None
    since = ended is not None and run.queued_at is not None and run.queued_at > ended
    return Missed(label, Gap.RERUN_OTHER_CODE if since else Gap.OTHER_CODE, code)


def judged(
    runs: Sequence[DagRun],
    intervals: Iterable[datetime],
    *,
    stored: Coverage | None,
    latest: DagVersion | None,
    ended: datetime | None,
) -> Coverage | None:
    """Coverage read again: against the target recorded when the spec ended; without one, the DAG's latest version
    now (and said so); None when neither is known (Airflow names no latest version)."""
    if stored is not None:
        return coverage(runs, stored.target, intervals, ended=ended, source=stored.source)
    if latest is None:
        return None
    return coverage(runs, latest, intervals, ended=ended, source=TargetSource.NOW)
