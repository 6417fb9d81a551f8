"""Selecting by code (pure): which intervals of a range a `select` spec re-runs, and the sub-ranges they form.

An interval is selected when its latest run (by queue time) failed, when it never ran, or when that run's latest
code is not the target: a lower `version_number`, or for a versioned bundle any other `bundle_version` (commits
have no order). An interval already on the target is never selected. Consecutive selected intervals form one
contiguous sub-range (one backfill each); more sub-ranges than the policy's `max_backfills` are refused, unless
the policy's `merge_sub_ranges` lets the closest ones join: the on-target intervals between them are then re-run
too (the fewest such intervals, said in the plan); an interval in flight is never inside a join.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from controller.core.model.airflow import DagRun, DagVersion
from controller.core.model.policy import Policy
from controller.core.model.spec import Select
from controller.core.rules.coverage import IN_FLIGHT, latest_code, latest_runs  # one rule for an interval's code

MAX_BACKFILLS = 20  # sub-ranges a selection may make when the policy sets no `max_backfills`


def in_flight(runs: Sequence[DagRun]) -> tuple[datetime, ...]:
    """The intervals whose latest run is still going: a dry run leaves them out, a selection must not span them."""
    return tuple(sorted(at for at, run in latest_runs(runs).items() if run.state in IN_FLIGHT))


@dataclass(frozen=True, slots=True)
class Selection:
    """The intervals a `select` spec re-runs, by why, and the contiguous sub-ranges (first, last) they form."""

    target: Select
    intervals: int  # intervals in range
    selected: tuple[datetime, ...]  # in order
    failed: int  # selected: their latest run failed
    never_ran: int  # selected: no run at all
    off_target: int  # selected: their latest run is on other code
    newer: int  # not selected: on a higher version_number than the target
    sub_ranges: tuple[tuple[datetime, datetime], ...]
    in_flight: int = 0  # not selected: a queued or running run holds it (it splits a sub-range)
    # between each two sub-ranges, the on-target intervals (None: one in flight sits there: never joined)
    gaps: tuple[tuple[datetime, ...] | None, ...] = ()
    merged: int = 0  # selected: on the target, re-run to join sub-ranges (`merge_sub_ranges`)

    @property
    def on_target(self) -> int:
        return self.intervals - len(self.selected) - self.in_flight

    def text(self) -> str:
        """`re-runs 37 of 90 intervals: 37 on version 3 or older; 53 already on version 4`."""
        why = [f"{self.off_target} on {_older(self.target)}"] if self.off_target else []
        why += [f"{self.failed} failed"] if self.failed else []
        why += [f"{self.never_ran} never ran"] if self.never_ran else []
        why += [f"{self.merged} on {self.target.text()} re-run to join sub-ranges"] if self.merged else []
        already = f"{self.on_target} already on {self.target.text()}" + (" or newer" if self.newer else "")
        already += f"; {self.in_flight} in flight (never re-run)" if self.in_flight else ""
        head = f"re-runs {len(self.selected)} of {self.intervals} interval{'' if self.intervals == 1 else 's'}"
        if not self.selected:
            return f"{head}: nothing to re-run; {already}"
        parts = "; ".join([*why, already] if self.on_target or self.in_flight else why)
        return f"{head} in {_backfills(len(self.sub_ranges))}: {parts}"

    def as_json(self) -> dict[str, Any]:
        return {
            "code_version": self.target.code_version,
            "bundle_version": self.target.bundle_version,
            "intervals": self.intervals,
            "selected": len(self.selected),
            "failed": self.failed,
            "never_ran": self.never_ran,
            "off_target": self.off_target,
            "on_target": self.on_target,
            "in_flight": self.in_flight,
            "sub_ranges": [[first.isoformat(), last.isoformat()] for first, last in self.sub_ranges],
        } | ({"merged": self.merged} if self.merged else {})

    @property
    def mergeable(self) -> int:
        """The joins `merge_sub_ranges` could make (gaps with no interval in flight)."""
        return sum(1 for gap in self.gaps if gap is not None)


def select(intervals: Sequence[datetime], runs: Sequence[DagRun], target: Select) -> Selection:
    """The selection over the range's intervals (logical dates, or a partitioned DAG's partition dates) from every
    run in range (any run type)."""
    latest = latest_runs(runs)
    ordered = sorted(set(intervals))
    chosen: list[datetime] = []
    failed = never = off = newer = flying = 0
    for at in ordered:
        run = latest.get(at)
        if run is None:
            never += 1
        elif run.state in IN_FLIGHT:  # Airflow would skip it, and it must split the sub-range around it
            flying += 1
            continue
        elif run.state == "failed":
            failed += 1
        elif (code := latest_code(run)) is None or not on_target(code, target):
            off += 1
        else:
            newer += _newer(code, target)
            continue
        chosen.append(at)
    spans = sub_ranges(ordered, chosen)
    gaps = _gaps(ordered, spans, {at for at, run in latest.items() if run.state in IN_FLIGHT})
    return Selection(target, len(ordered), tuple(chosen), failed, never, off, newer, spans, flying, gaps)


def _gaps(
    ordered: Sequence[datetime], spans: Sequence[tuple[datetime, datetime]], flying: set[datetime]
) -> tuple[tuple[datetime, ...] | None, ...]:
    """Between each two consecutive sub-ranges, the intervals of the range (None: one of them is in flight)."""
    out: list[tuple[datetime, ...] | None] = []
    for (_, last), (first, _) in itertools.pairwise(spans):
        between = tuple(ordered[bisect.bisect_right(ordered, last) : bisect.bisect_left(ordered, first)])
        out.append(None if flying.intersection(between) else between)
    return tuple(out)


def merged(selection: Selection, limit: int) -> Selection:
    """The selection with its sub-ranges joined across the smallest gaps until at most `limit` (the on-target
    intervals inside a join are re-run: the fewest possible); as it is when within the limit, or when the gaps
    without an interval in flight cannot bring it there (it is refused with its count)."""
    over = len(selection.sub_ranges) - limit
    if over <= 0 or selection.mergeable < over:
        return selection
    smallest = sorted((len(gap), i) for i, gap in enumerate(selection.gaps) if gap is not None)
    joined = {i for _, i in smallest[:over]}
    spans: list[tuple[datetime, datetime]] = []
    first, last = selection.sub_ranges[0]
    added: list[datetime] = []
    for i, (low, high) in enumerate(selection.sub_ranges[1:]):
        if i in joined:
            last, added = high, [*added, *(selection.gaps[i] or ())]
        else:
            spans.append((first, last))
            first, last = low, high
    spans.append((first, last))
    return replace(
        selection,
        selected=tuple(sorted((*selection.selected, *added))),
        sub_ranges=tuple(spans),
        gaps=tuple(gap for i, gap in enumerate(selection.gaps) if i not in joined),
        merged=selection.merged + len(added),
    )


def on_target(version: DagVersion | None, target: Select) -> bool:
    """A run's latest code is the target: the pinned commit, or a version_number at least the pinned one."""
    if version is None:
        return False
    if target.bundle_version is not None:
        return version.bundle_version == target.bundle_version
    return target.code_version is not None and version.number >= target.code_version


def sub_ranges(ordered: Sequence[datetime], chosen: Sequence[datetime]) -> tuple[tuple[datetime, datetime], ...]:
    """Runs of consecutive chosen intervals (in the range's order) as (first, last) pairs."""
    picked = set(chosen)
    out: list[tuple[datetime, datetime]] = []
    start: datetime | None = None
    previous: datetime | None = None
    for at in ordered:
        if at in picked:
            start = at if start is None else start
            previous = at
        elif start is not None and previous is not None:
            out.append((start, previous))
            start = None
    if start is not None and previous is not None:
        out.append((start, previous))
    return tuple(out)


def code_moved(target: Select, latest: DagVersion | None) -> str | None:
    """Why a `select` spec's next runs would not run the reviewed target: the DAG's latest code is another version
    (runs use the latest); None when it is the target, or not known."""
    if latest is None:
        return None
    exact = (
        latest.bundle_version == target.bundle_version
        if target.bundle_version is not None
        else latest.number == target.code_version
    )
    if exact:
        return None
    return (
        f"the DAG's latest code is {latest.text()}, not the reviewed target ({target.text()}): its runs would use code "
        "nobody reviewed for this backfill; a new target is a new spec (select cannot change once applied): cancel "
        "this one (state: cancelled) and add a spec selecting the new target"
    )


def rederived(
    selection: Selection, chunks: Sequence[tuple[datetime, datetime]], *, backwards: bool
) -> tuple[tuple[datetime, datetime], ...]:
    """A spec's sub-ranges after a lost store: the ranges of its chunks found in Airflow, then the sub-ranges of
    its selection read now beyond them in its direction (each clipped to its selected intervals there). The same
    as at its first create, but for what changed since: an interval brought onto the target is left out, one that
    failed since is in."""
    if not chunks:
        return selection.sub_ranges
    low, high = min(first for first, _ in chunks), max(last for _, last in chunks)
    rest = []
    for first, last in selection.sub_ranges:
        inside = [d for d in selection.selected if first <= d <= last and (d < low if backwards else d > high)]
        if inside:
            rest.append((inside[0], inside[-1]))
    return tuple(sorted((*chunks, *rest)))


def merge_allowed(policy: Policy, dag_id: str) -> bool:
    """The policy lets a `select` spec on this DAG join sub-ranges over `max_backfills` (`merge_sub_ranges`)."""
    rule = policy.rule_for(dag_id)
    return rule is not None and rule.merge_sub_ranges


def max_backfills(policy: Policy, dag_id: str) -> int:
    rule = policy.rule_for(dag_id)
    return MAX_BACKFILLS if rule is None or rule.max_backfills is None else rule.max_backfills


def too_many(selection: Selection, limit: int) -> str | None:
    """Why the selection is refused: more sub-ranges than the policy allows (None: within it)."""
    return ranges_over(len(selection.sub_ranges), len(selection.selected), limit)


def ranges_over(ranges: int, selected: int, limit: int) -> str | None:
    """`too_many` from the counts alone (a selection judged ahead of its turn keeps only those)."""
    if ranges <= limit:
        return None
    return (
        f"select makes {ranges} backfills (contiguous sub-ranges of the {selected} selected intervals); "
        f"the policy allows at most {limit} (max_backfills): narrow the range, or raise max_backfills in a reviewed "
        "policy change"
    )


def _newer(version: DagVersion, target: Select) -> int:
    return 1 if target.code_version is not None and version.number > target.code_version else 0


def _older(target: Select) -> str:
    if target.bundle_version is not None:
        return "other bundle versions"
    return f"version {(target.code_version or 1) - 1} or older"


def _backfills(n: int) -> str:
    return f"{n} backfill" + ("" if n == 1 else "s")
