"""Which runs are a spec's own (pure): the dates its backfill made or re-ran, and who re-ran them since.

Airflow 3.3's public API has no backfill id on a DAG run and no list of a backfill's runs. A backfill's runs
are created, or cleared and re-queued, inside its create request, which sets their `queued_at` by the clock
of the backfill's `created_at`; Airflow allows one active backfill per DAG and commits the backfill row before
its runs, so two creation windows on one DAG never overlap. A later reprocess or a clear by hand moves a
run's `queued_at` past the window (clearing single tasks does not: that run is still the backfill's).
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from controller.core.model.airflow import Backfill, DagRun, Rerun, RunSummary, summarise
from controller.core.model.ranges import DateRange, compact

GAP = timedelta(seconds=5)  # a create queues its runs back to back: a longer pause ends its window
CREATE_SPAN = timedelta(minutes=2)  # a create's longest run (Airflow 3.2.2+ stops initialising after 2 minutes)
BY_HAND = "hand"


def run_date(run: DagRun) -> datetime | None:
    """The date a run stands for: its logical date, or a partitioned DAG's partition date."""
    return run.logical_date or run.partition_date


def window_end(backfill: Backfill, runs: Sequence[DagRun], later: Sequence[Backfill]) -> datetime:
    """The end of the backfill's creation window: its runs queued from `created_at` on, each within GAP of the
    one before, before the next backfill on the DAG was created and before it completed."""
    following = min((b.created_at for b in later if b.created_at > backfill.created_at), default=None)
    return _window_end(backfill, runs, following)


def _window_end(backfill: Backfill, runs: Sequence[DagRun], following: datetime | None) -> datetime:
    """`window_end`, given when the next backfill on the DAG was created (None: none was)."""
    limits = [following] if following is not None else []
    limits += [backfill.completed_at] if backfill.completed_at is not None else []
    until = min(limits, default=None)
    end = backfill.created_at
    queued = sorted(r.queued_at for r in runs if r.queued_at is not None and r.queued_at >= backfill.created_at)
    for moment in queued:
        if (until is not None and moment >= until) or moment - end > GAP:
            break
        end = moment
    return end


def rerun_by(queued_at: datetime, backfills: Sequence[Backfill], owners: Mapping[int, str]) -> str:
    """Who queued a run again: `spec NAME (#ID)`, `backfill #ID (unmanaged)`, or `hand` (no create was under way)."""
    creating = [
        b
        for b in backfills
        if b.created_at <= queued_at <= b.created_at + CREATE_SPAN
        and (b.completed_at is None or queued_at <= b.completed_at)
    ]
    if not creating:
        return BY_HAND
    backfill = max(creating, key=lambda b: b.created_at)
    name = owners.get(backfill.id)
    return f"spec {name} (#{backfill.id})" if name else f"backfill #{backfill.id} (unmanaged)"


@dataclass(frozen=True, slots=True)
class Owned:
    """A backfill's own runs, as one read of its dates found them."""

    summary: RunSummary  # its own runs by state, and the dates re-run since (`summary.reruns`)
    dates: tuple[DateRange, ...]  # the dates its window holds (an adopted backfill's recovered dates)
    whole: bool  # every backfill run in its range is its own (counting the range counts only its runs)


def own_runs(
    backfill: Backfill,
    dates: Sequence[datetime] | None,
    runs: Sequence[DagRun],
    backfills: Sequence[Backfill],
    owners: Mapping[int, str],
) -> Owned:
    """The backfill's own runs among `runs` (backfill runs over its dates' range): see `DagHistory.own`."""
    return DagHistory.of(runs, backfills).own(backfill, dates, owners)


@dataclass(frozen=True, slots=True)
class DagHistory:
    """A DAG's runs and backfills, ordered once for many backfills' own runs (a lost store adopts a DAG's whole
    history: a scan of every run and backfill per backfill made that O(backfills × runs))."""

    dated: tuple[tuple[datetime, DagRun], ...]  # (run date, run) by date; runs of one date in their given order
    backfills: Sequence[Backfill]
    created: tuple[datetime, ...]  # the backfills' creation times, in order

    @classmethod
    def of(cls, runs: Sequence[DagRun], backfills: Sequence[Backfill]) -> DagHistory:
        dated = sorted(((d, r) for r in runs if (d := run_date(r)) is not None), key=_first)  # stable
        return cls(tuple(dated), backfills, tuple(sorted(b.created_at for b in backfills)))

    def own(self, backfill: Backfill, dates: Sequence[datetime] | None, owners: Mapping[int, str]) -> Owned:
        """The runs of its `dates` (None: not recorded, every date of its range) queued inside its creation window.
        A date whose run was queued again after the window is a re-run: its current state and who re-ran it are
        kept, and what this backfill's run did there is not known unless that run is still beside it (a
        partitioned DAG keeps the old run)."""
        wanted = None if dates is None else set(dates)
        dated = self._within(backfill.from_date, backfill.to_date)
        mine = [(d, r) for d, r in dated if wanted is None or d in wanted]
        end = _window_end(backfill, [r for _d, r in mine], self._created_after(backfill.created_at))
        own = {d: r for d, r in mine if r.queued_at is not None and backfill.created_at <= r.queued_at <= end}
        again = ((d, r, r.queued_at) for d, r in mine if r.queued_at is not None and r.queued_at > end)
        later = sorted(again, key=_third)
        latest = {d: (r, when) for d, r, when in later}  # the last re-run of a date says its state now
        others = [b for b in self.backfills if b.id != backfill.id] if latest else []  # its own create is over
        reruns = tuple(
            Rerun(d, rerun_by(when, others, owners), r.state, own[d].state if d in own else None)
            for d, (r, when) in sorted(latest.items())
        )
        strangers = {d for d, _r in dated} - own.keys()
        return Owned(replace(summarise([own[d] for d in sorted(own)]), reruns=reruns), compact(own), not strangers)

    def _within(self, low: datetime, high: datetime) -> Sequence[tuple[datetime, DagRun]]:
        """The dated runs from `low` to `high`, both included."""
        start = bisect.bisect_left(self.dated, low, key=_first)
        return self.dated[start : bisect.bisect_right(self.dated, high, lo=start, key=_first)]

    def _created_after(self, moment: datetime) -> datetime | None:
        """When the first backfill created after `moment` was (None: none was)."""
        at = bisect.bisect_right(self.created, moment)
        return self.created[at] if at < len(self.created) else None


def _first(item: tuple[datetime, DagRun]) -> datetime:
    return item[0]


def _third(item: tuple[datetime, DagRun, datetime]) -> datetime:
    return item[2]
