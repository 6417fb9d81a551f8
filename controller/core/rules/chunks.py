"""Progressive execution of a large spec (pure): chunk sizes, the canary, the failure halt.

The values (`Chunk`, `Slice`, `Progress`) are `core/model/chunks.py`; this module decides from them and the
spec how large the next chunk is, what is left of the range, and when too many failed runs halt the spec.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from controller.core.model.airflow import BackfillRequest, RunSummary
from controller.core.model.chunks import Progress, Slice
from controller.core.model.policy import Policy
from controller.core.model.ranges import compact
from controller.core.model.spec import BackfillSpec

HALT_MIN_FINISHED = 5  # a failure ratio over fewer finished runs says too little to halt on
TICK = timedelta(microseconds=1)  # dry-run and backfill bounds are inclusive: the next range starts after the last date
LISTED_FAILURES = 100  # failed dates kept over all chunks (the rest are counted)

# bounded dry runs: the first sub-range when the timetable's rate is not known, and the runs each one aims at
# (~1.2 ms a run on the server)
FIRST_SPAN = timedelta(days=14)
TARGET_RUNS = 2000


# --- chunk sizes ----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Chunking:
    size: int | None  # runs per chunk; None: the rest in one backfill (a canary or a halt without chunks)
    canary: int | None = None

    def first(self) -> int | None:
        return self.canary or self.size

    def count(self, total: int) -> int:
        """Chunks for `total` runs."""
        if total <= 0:
            return 0
        canary = min(self.canary or 0, total)
        rest = total - canary
        return (1 if canary else 0) + (0 if rest == 0 else math.ceil(rest / self.size) if self.size else 1)

    def describe(self, total: int) -> str:
        """`8,760 runs in 52 chunks of ≤ 168; canary 24`."""
        size = f" of ≤ {self.size:,}" if self.size else ""
        canary = f"; canary {self.canary:,}" if self.canary else ""
        count = self.count(total)
        return f"{total:,} runs in {count:,} chunk{'s' if count != 1 else ''}{size}{canary}"


def chunking(spec: BackfillSpec, policy: Policy, runs: int) -> Chunking | None:
    """How the spec runs: None for one backfill; a policy default chunks specs above its run count."""
    execution = spec.execution
    if execution is not None and (execution.chunk_runs or execution.canary_runs or execution.halt_on_failure_ratio):
        size = execution.chunk_runs or _policy_size(spec, policy, runs)
        return Chunking(size, execution.canary_runs)
    size = _policy_size(spec, policy, runs)
    return None if size is None else Chunking(size)


def _policy_size(spec: BackfillSpec, policy: Policy, runs: int) -> int | None:
    rule = policy.rule_for(spec.dag_id)
    if rule is None or rule.chunk_default is None or runs <= rule.chunk_required_above:
        return None
    return rule.chunk_default


def next_size(spec: BackfillSpec, policy: Policy, progress: Progress) -> int | None:
    """Runs of the next chunk (None: all that is left), from the spec as it is now (execution is mutable):
    the canary while no chunk exists yet."""
    if progress.sub_ranges is not None:  # a `select` spec: each chunk is a whole sub-range
        return None
    plan = chunking(spec, policy, progress.created if progress.total is None else progress.total) or Chunking(None)
    return plan.size if progress.chunks else plan.first()


def take(dates: Sequence[datetime], size: int | None, *, backwards: bool) -> Sequence[datetime]:
    """The next chunk's dates of the (sorted) dates left: the first `size`, or the last when backwards."""
    if size is None or size >= len(dates):
        return dates
    return dates[-size:] if backwards else dates[:size]


def slice_of(dates: Sequence[datetime], max_active_runs: int) -> Slice:
    return Slice(min(dates), max(dates), len(dates), max_active_runs, compact(dates))


def request_for(spec: BackfillSpec, chunk: Slice) -> BackfillRequest:
    """A chunk's create: the spec's request over the chunk's dates, with the chunk's concurrency."""
    return replace(
        BackfillRequest.from_spec(spec),
        from_date=chunk.first,
        to_date=chunk.last,
        max_active_runs=chunk.max_active_runs,
        # a `select` spec's runs move to the latest code: without it a re-run keeps the code it first ran with
        run_on_latest_version=True if spec.select is not None else spec.run_on_latest_version,
    )


def remaining(spec: BackfillSpec, progress: Progress) -> tuple[datetime, datetime] | None:
    """What is left of the spec's range after its chunks (None: nothing); a `select` spec's: its next sub-range."""
    if progress.sub_ranges is not None:
        return next_selected(progress, backwards=spec.run_backwards)
    if not progress.chunks:
        return spec.from_date, spec.to_date
    if spec.run_backwards:
        low, high = spec.from_date, min(c.first for c in progress.chunks) - TICK
    else:
        low, high = max(c.last for c in progress.chunks) + TICK, spec.to_date
    return None if low > high else (low, high)


def next_selected(progress: Progress, *, backwards: bool) -> tuple[datetime, datetime] | None:
    """A `select` spec's next sub-range in its direction: the first beyond its chunks (None: none left)."""
    ranges = progress.sub_ranges or ()
    if backwards:
        low = min((c.first for c in progress.chunks), default=None)
        return next((r for r in reversed(ranges) if low is None or r[1] < low), None)
    high = max((c.last for c in progress.chunks), default=None)
    return next((r for r in ranges if high is None or r[0] > high), None)


def chunk_count(spec: BackfillSpec, policy: Policy, progress: Progress) -> int:
    """Chunks so far plus those the runs not yet created still need (an estimate from the first count);
    0 when that is not known. A `select` spec: one a sub-range."""
    if progress.sub_ranges is not None:
        return len(progress.sub_ranges)
    left = progress.uncreated
    if left is None:
        return 0
    plan = chunking(spec, policy, progress.total or 0) or Chunking(None)
    if not progress.chunks:  # the canary first, as the first plan counted them
        return plan.count(left)
    return len(progress.chunks) + (0 if left == 0 else math.ceil(left / plan.size) if plan.size else 1)


def chunk_text(chunk: tuple[int, int]) -> str:
    """`chunk 3 of 7`, or `chunk 3 of ?` when the count is not known."""
    return f"chunk {chunk[0]} of {chunk[1] or '?'}"


# --- runs over all chunks -------------------------------------------------------------------------------


def combined(summaries: Sequence[RunSummary]) -> RunSummary:
    """One summary of several chunks' runs: counts added, failed dates listed up to a limit, mean weighted."""
    counts: dict[str, int] = {}
    for s in summaries:
        for state, n in s.counts.items():
            counts[state] = counts.get(state, 0) + n
    failed = tuple(sorted(d for s in summaries for d in s.failed_dates))[:LISTED_FAILURES]
    weights = [(s.mean_duration, s.count("success") + s.count("failed")) for s in summaries]
    weighted = [(m, w) for m, w in weights if m is not None and w]
    mean = sum(m * w for m, w in weighted) / sum(w for _, w in weighted) if weighted else None
    partitions = tuple(sorted(k for s in summaries for k in s.failed_partitions))[:LISTED_FAILURES]
    return RunSummary(
        counts,
        failed,
        sum(s.never_started for s in summaries),
        mean,
        partitions,
        sum(s.superseded for s in summaries),
    )


def all_runs(progress: Progress, current: Mapping[int, RunSummary]) -> RunSummary:
    """The spec's runs: each chunk's final runs, or those observed now (`current`) for an unfinished one."""
    return combined([current.get(c.backfill_id, c.summary or RunSummary({})) for c in progress.chunks])


# --- the halt -------------------------------------------------------------------------------------------


def finished_and_failed(runs: RunSummary) -> tuple[int, int]:
    """Runs that ran to an end, and those of them that failed (a cancelled run that never started is neither)."""
    failed = runs.count("failed") - runs.never_started
    return runs.count("success") + failed, failed


def halt_reason(spec: BackfillSpec, progress: Progress, runs: RunSummary, *, boundary: bool = False) -> str | None:
    """`halted: 3 of 8 finished runs failed (38 % > 20 %)…` when the spec's failure ratio is over its limit:
    while a chunk runs once `halt_min_finished` runs finished; at a chunk boundary whatever finished (a chunk
    smaller than the minimum is judged too: no next chunk starts while the ratio is over the limit)."""
    execution = spec.execution
    ratio = execution.halt_on_failure_ratio if execution is not None else None
    if execution is None or ratio is None:
        return None
    finished, failed = finished_and_failed(runs)
    finished, failed = finished - progress.base_finished, failed - progress.base_failed
    least = 1 if boundary else (execution.halt_min_finished or HALT_MIN_FINISHED)
    if finished < least or failed <= ratio * finished:
        return None
    since = f" since resume {progress.resumed!r}" if progress.resumed else ""
    return (
        f"halted: {failed} of {finished} finished runs failed{since} ({failed / finished:.0%} > {ratio:.0%}); "
        "fix the cause, then set a new `resume` value"
    )


def halt(spec: BackfillSpec, progress: Progress, runs: RunSummary, *, boundary: bool = False) -> Progress:
    """The progress after this observation: a halt begins (remembering the `resume` value of that moment),
    holds, or ends because the spec now carries a new `resume` value (failures count again from there).
    `boundary`: the spec's chunks have all finished (see `halt_reason`)."""
    if progress.halted is not None:
        if spec.resume is None or spec.resume == progress.resumed:
            return progress
        finished, failed = finished_and_failed(runs)
        return replace(progress, halted=None, resumed=spec.resume, base_finished=finished, base_failed=failed)
    why = halt_reason(spec, progress, runs, boundary=boundary)
    return progress if why is None else replace(progress, halted=why, resumed=spec.resume)


def awaiting_promotion(spec: BackfillSpec, progress: Progress) -> bool:
    """The canary chunk is done and nobody merged `promote: true` yet."""
    canary = spec.execution.canary_runs if spec.execution is not None else None
    return bool(canary) and len(progress.chunks) == 1 and not spec.promote and not progress.promoted


# --- bounded dry runs -----------------------------------------------------------------------------------


def first_span(runs_a_day: float | None, target: int = TARGET_RUNS) -> timedelta:
    """The first sub-range of a dry run: `target` runs at the timetable's most runs a day, when known."""
    if runs_a_day is None or runs_a_day <= 0:
        return FIRST_SPAN
    return max(timedelta(seconds=1), timedelta(days=target / runs_a_day))


def sub_range_span(done: int, covered: timedelta, target: int = TARGET_RUNS) -> timedelta:
    """The span of the next sub-range of a dry run: aimed at `target` runs from the rate seen so far."""
    if done == 0:
        return covered * 8
    return max(timedelta(seconds=1), covered * (target / done))


def next_sub_range(
    low: datetime, high: datetime, span: timedelta, *, backwards: bool
) -> tuple[tuple[datetime, datetime], tuple[datetime, datetime] | None]:
    """The next sub-range of `span` at the range's start (its end when backwards), and what is left."""
    if high - low < span:
        return (low, high), None
    if backwards:
        start = high - span + TICK
        return (start, high), (low, start - TICK)
    end = low + span - TICK
    return (low, end), (end + TICK, high)
