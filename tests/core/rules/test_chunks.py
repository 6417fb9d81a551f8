"""Chunked execution's pure core (chunk sizes, slices, the canary, the halt), function by function with exact values."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from controller.core.model.airflow import BackfillRequest, RunSummary
from controller.core.model.chunks import Chunk, Progress, Slice
from controller.core.model.policy import Policy, Rule
from controller.core.model.ranges import DateRange
from controller.core.model.spec import BackfillSpec, Execution, ReprocessBehavior
from controller.core.rules.chunks import (
    FIRST_SPAN,
    HALT_MIN_FINISHED,
    LISTED_FAILURES,
    TARGET_RUNS,
    TICK,
    Chunking,
    all_runs,
    awaiting_promotion,
    chunk_count,
    chunk_text,
    chunking,
    combined,
    finished_and_failed,
    halt,
    halt_reason,
    next_size,
    next_sub_range,
    remaining,
    request_for,
    slice_of,
    sub_range_span,
    take,
)

JAN1 = datetime(2025, 1, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


def spec(**extra: Any) -> BackfillSpec:
    fields: dict[str, Any] = {
        "name": "s",
        "dag_id": "d",
        "from_date": JAN1,
        "to_date": JAN1 + timedelta(days=9),
        "reprocess_behavior": ReprocessBehavior.FAILED,
        "max_active_runs": 2,
        "ticket": "CHG-1",
        "reason": "unit test",
        "requested_by": "a",
        "approvers": ("b",),
        "path": "specs/s.yaml",
        "digest": "sha256:s",
    }
    fields.update(extra)
    return BackfillSpec(**fields)


def days(n: int, start: datetime = JAN1) -> list[datetime]:
    return [start + i * DAY for i in range(n)]


def chunk(backfill_id: int, first: int, last: int, summary: RunSummary | None = None) -> Chunk:
    """A chunk over days `first`..`last` (0 = JAN1) with one run a day."""
    return Chunk(backfill_id, JAN1 + first * DAY, JAN1 + last * DAY, last - first + 1, 2, summary)


def runs(success: int = 0, failed: int = 0, never: int = 0, **more: int) -> RunSummary:
    counts = {"success": success, "failed": failed, **more}
    return RunSummary({k: v for k, v in counts.items() if v}, never_started=never)


POLICY = Policy(rules=(Rule(("d",), chunk_default=16, chunk_required_above=30),))


# --- values and their JSON --------------------------------------------------------------------------------


def test_constants() -> None:
    assert (
        5,
        timedelta(microseconds=1),
        100,
        timedelta(days=14),
        2000,
    ) == (HALT_MIN_FINISHED, TICK, LISTED_FAILURES, FIRST_SPAN, TARGET_RUNS)


def test_chunk_json_round_trip_with_and_without_summary() -> None:
    summary = RunSummary({"success": 3, "failed": 1}, (JAN1,), 0, 12.5, (), 2)
    done = Chunk(7, JAN1, JAN1 + 3 * DAY, 4, 3, summary, (DateRange(JAN1, JAN1 + 3 * DAY, 4),))
    assert done.as_json() == {
        "backfill_id": 7,
        "from_date": "2025-01-01T00:00:00+00:00",
        "to_date": "2025-01-04T00:00:00+00:00",
        "runs": 4,
        "max_active_runs": 3,
        "summary": summary.as_json(),
        "dates": [["2025-01-01T00:00:00+00:00", "2025-01-04T00:00:00+00:00", 4]],
    }
    assert Chunk.from_json(done.as_json()) == done
    running = Chunk(8, JAN1, JAN1, 1, 1)
    assert (running.as_json()["summary"], running.as_json()["dates"]) == (None, None)
    assert Chunk.from_json(running.as_json()) == running
    assert Chunk.from_json({k: v for k, v in running.as_json().items() if k not in ("summary", "dates")}) == running


def test_slice_json_round_trip() -> None:
    piece = slice_of([JAN1 + 2 * HOUR, JAN1, JAN1 + HOUR], 4)
    assert piece.as_json() == {
        "from_date": "2025-01-01T00:00:00+00:00",
        "to_date": "2025-01-01T02:00:00+00:00",
        "runs": 3,
        "max_active_runs": 4,
        "dates": [["2025-01-01T00:00:00+00:00", "2025-01-01T02:00:00+00:00", 3]],
    }
    assert Slice.from_json(piece.as_json()) == piece
    assert piece.chunk(9) == Chunk(9, JAN1, JAN1 + 2 * HOUR, 3, 4, dates=piece.dates)
    bare = Slice(JAN1, JAN1, 1, 1)
    assert Slice.from_json({k: v for k, v in bare.as_json().items() if k != "dates"}) == bare


def test_progress_json_round_trip_every_field() -> None:
    progress = Progress(
        48,
        (chunk(1, 0, 3, runs(success=4)), chunk(2, 4, 7)),
        Slice(JAN1 + 8 * DAY, JAN1 + 9 * DAY, 2, 2),
        "halted: x",
        "r1",
        6,
        2,
        True,
    )
    data = progress.as_json()
    assert data == {
        "total": 48,
        "chunks": [c.as_json() for c in progress.chunks],
        "pending": progress.pending.as_json() if progress.pending else "missing",
        "halted": "halted: x",
        "resumed": "r1",
        "base_finished": 6,
        "base_failed": 2,
        "promoted": True,
    }
    assert Progress.from_json(data) == progress
    bare = Progress(5)
    assert bare.as_json() == {
        "total": 5,
        "chunks": [],
        "pending": None,
        "halted": None,
        "resumed": None,
        "base_finished": 0,
        "base_failed": 0,
        "promoted": False,
    }
    assert Progress.from_json(bare.as_json()) == bare
    assert Progress.from_json({"total": "5"}) == bare  # older rows: only the total
    assert Progress.from_json({"total": 5, "chunks": None, "base_finished": None, "base_failed": None}) == bare


def test_progress_created_ids_with_chunk_and_finished() -> None:
    pending = Slice(JAN1 + 6 * DAY, JAN1 + 9 * DAY, 4, 2)
    progress = Progress(10, (chunk(1, 0, 2), chunk(2, 3, 5)), pending)
    assert (progress.created, progress.ids) == (6, (1, 2))
    assert (Progress(10).created, Progress(10).ids) == (0, ())
    added = progress.with_chunk(chunk(3, 6, 9))
    assert (added.ids, added.created, added.pending, added.total) == ((1, 2, 3), 10, None, 10)
    done = progress.finished(2, runs(success=3))
    assert [c.summary for c in done.chunks] == [None, runs(success=3)]
    assert done.pending == pending
    assert progress.finished(9, runs(success=3)) == progress


# --- chunk sizes --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("plan", "first"),
    [
        (Chunking(10), 10),
        (Chunking(10, 3), 3),
        (Chunking(None, 3), 3),
        (Chunking(None), None),
        (Chunking(10, 0), 10),
    ],
)
def test_chunking_first(plan: Chunking, first: int | None) -> None:
    assert plan.first() == first


@pytest.mark.parametrize(
    ("plan", "total", "count"),
    [
        (Chunking(10), 0, 0),
        (Chunking(10), -3, 0),
        (Chunking(10, 3), 0, 0),
        (Chunking(10), 1, 1),
        (Chunking(10), 10, 1),
        (Chunking(10), 11, 2),
        (Chunking(10), 25, 3),
        (Chunking(10), 30, 3),
        (Chunking(10), 31, 4),
        (Chunking(10, 3), 3, 1),  # the canary is all
        (Chunking(10, 3), 4, 2),
        (Chunking(10, 3), 13, 2),
        (Chunking(10, 3), 14, 3),
        (Chunking(10, 50), 20, 1),  # a canary larger than the spec: one chunk
        (Chunking(None, 5), 20, 2),  # the canary, then the rest at once
        (Chunking(None, 5), 5, 1),
        (Chunking(None), 20, 1),
        (Chunking(12, 4), 48, 5),
    ],
)
def test_chunking_count(plan: Chunking, total: int, count: int) -> None:
    assert plan.count(total) == count


@pytest.mark.parametrize(
    ("plan", "total", "text"),
    [
        (Chunking(168, 24), 8760, "8,760 runs in 53 chunks of ≤ 168; canary 24"),
        (Chunking(168), 8736, "8,736 runs in 52 chunks of ≤ 168"),
        (Chunking(1000, 1500), 2500, "2,500 runs in 2 chunks of ≤ 1,000; canary 1,500"),
        (Chunking(None, 4), 10, "10 runs in 2 chunks; canary 4"),
        (Chunking(None), 1, "1 runs in 1 chunk"),
        (Chunking(10), 0, "0 runs in 0 chunks of ≤ 10"),
    ],
)
def test_chunking_describe(plan: Chunking, total: int, text: str) -> None:
    assert plan.describe(total) == text


@pytest.mark.parametrize(
    ("execution", "policy", "count", "expected"),
    [
        (None, Policy(), 1000, None),
        (Execution(), Policy(), 1000, None),
        (Execution(chunk_runs=10), Policy(), 5, Chunking(10)),
        (Execution(chunk_runs=10, canary_runs=3), Policy(), 100, Chunking(10, 3)),
        (Execution(canary_runs=3), Policy(), 100, Chunking(None, 3)),
        (Execution(canary_runs=3), POLICY, 31, Chunking(16, 3)),
        (Execution(canary_runs=3), POLICY, 30, Chunking(None, 3)),
        (Execution(halt_on_failure_ratio=0.1), Policy(), 100, Chunking(None)),  # one backfill that can halt
        (Execution(halt_on_failure_ratio=0.1), POLICY, 31, Chunking(16)),
        (Execution(chunk_runs=8), POLICY, 100, Chunking(8)),  # the spec's own size wins
        (None, POLICY, 30, None),  # at the threshold: not chunked
        (None, POLICY, 31, Chunking(16)),
        (Execution(), POLICY, 31, Chunking(16)),
        (None, Policy(rules=(Rule(("other",), chunk_default=16),)), 100, None),
        (None, Policy(rules=(Rule(("d",)),)), 100, None),
        (None, Policy(rules=(Rule(("d",), chunk_default=16),)), 1, Chunking(16)),
    ],
)
def test_chunking_from_spec_and_policy(
    execution: Execution | None, policy: Policy, count: int, expected: Chunking | None
) -> None:
    assert chunking(spec(execution=execution), policy, count) == expected


@pytest.mark.parametrize(
    ("execution", "progress", "size"),
    [
        (Execution(chunk_runs=10, canary_runs=3), Progress(40), 3),
        (Execution(chunk_runs=10, canary_runs=3), Progress(40, (chunk(1, 0, 2),)), 10),
        (Execution(chunk_runs=10), Progress(40), 10),
        (Execution(canary_runs=3), Progress(40, (chunk(1, 0, 2),)), None),
        (None, Progress(20), None),
        (None, Progress(31), 16),  # the policy default from the spec's whole count
        (None, Progress(30, (chunk(1, 0, 2),)), None),
    ],
)
def test_next_size(execution: Execution | None, progress: Progress, size: int | None) -> None:
    policy = POLICY if execution is None else Policy()
    assert next_size(spec(execution=execution), policy, progress) == size


@pytest.mark.parametrize(
    ("size", "backwards", "expected"),
    [
        (None, False, [0, 1, 2, 3, 4]),
        (None, True, [0, 1, 2, 3, 4]),
        (5, False, [0, 1, 2, 3, 4]),
        (9, True, [0, 1, 2, 3, 4]),
        (4, False, [0, 1, 2, 3]),
        (4, True, [1, 2, 3, 4]),
        (2, False, [0, 1]),
        (2, True, [3, 4]),
        (1, True, [4]),
    ],
)
def test_take(size: int | None, backwards: bool, expected: list[int]) -> None:
    assert list(take(days(5), size, backwards=backwards)) == [JAN1 + i * DAY for i in expected]


def test_take_all_is_the_dates_themselves() -> None:
    dates = days(5)
    assert take(dates, 5, backwards=False) is dates
    assert take(dates, 5, backwards=True) is dates
    assert take(dates, None, backwards=False) is dates


def test_slice_of_and_request_for() -> None:
    piece = slice_of([JAN1 + 3 * DAY, JAN1 + DAY, JAN1 + 2 * DAY], 5)
    assert piece == Slice(JAN1 + DAY, JAN1 + 3 * DAY, 3, 5, (DateRange(JAN1 + DAY, JAN1 + 3 * DAY, 3),))
    s = spec(run_backwards=True, dag_run_conf={"k": 1})
    assert request_for(s, piece) == BackfillRequest(
        dag_id="d",
        from_date=JAN1 + DAY,
        to_date=JAN1 + 3 * DAY,
        reprocess_behavior="failed",
        max_active_runs=5,
        run_backwards=True,
        dag_run_conf={"k": 1},
        run_on_latest_version=s.run_on_latest_version,
    )


@pytest.mark.parametrize(
    ("backwards", "chunks", "left"),
    [
        (False, (), (JAN1, JAN1 + 9 * DAY)),
        (True, (), (JAN1, JAN1 + 9 * DAY)),
        (False, (chunk(1, 0, 3),), (JAN1 + 3 * DAY + TICK, JAN1 + 9 * DAY)),
        (False, (chunk(1, 0, 3), chunk(2, 4, 6)), (JAN1 + 6 * DAY + TICK, JAN1 + 9 * DAY)),
        (False, (chunk(2, 4, 6), chunk(1, 0, 3)), (JAN1 + 6 * DAY + TICK, JAN1 + 9 * DAY)),
        (True, (chunk(1, 6, 9),), (JAN1, JAN1 + 6 * DAY - TICK)),
        (True, (chunk(1, 6, 9), chunk(2, 3, 5)), (JAN1, JAN1 + 3 * DAY - TICK)),
        (True, (chunk(2, 3, 5), chunk(1, 6, 9)), (JAN1, JAN1 + 3 * DAY - TICK)),
        (False, (chunk(1, 0, 9),), None),
        (True, (chunk(1, 0, 9),), None),
    ],
)
def test_remaining(backwards: bool, chunks: tuple[Chunk, ...], left: tuple[datetime, datetime] | None) -> None:
    assert remaining(spec(run_backwards=backwards), Progress(10, chunks)) == left


def test_remaining_down_to_a_single_instant() -> None:
    last = Chunk(1, JAN1, JAN1 + 9 * DAY - TICK, 9, 2)
    assert remaining(spec(), Progress(10, (last,))) == (JAN1 + 9 * DAY, JAN1 + 9 * DAY)
    first = Chunk(1, JAN1 + TICK, JAN1 + 9 * DAY, 9, 2)
    assert remaining(spec(run_backwards=True), Progress(10, (first,))) == (JAN1, JAN1)


@pytest.mark.parametrize(
    ("execution", "progress", "count"),
    [
        (Execution(chunk_runs=12), Progress(48, (chunk(1, 0, 11),)), 4),
        (Execution(chunk_runs=12), Progress(48, (chunk(1, 0, 12),)), 4),  # 35 left: 3 more
        (Execution(chunk_runs=12), Progress(48, (chunk(1, 0, 10),)), 5),  # 37 left: 4 more
        (Execution(chunk_runs=12), Progress(10, (chunk(1, 0, 9),)), 1),
        (Execution(chunk_runs=12), Progress(5, (chunk(1, 0, 9),)), 1),  # more created than counted
        (Execution(chunk_runs=12), Progress(48), 4),
        (Execution(canary_runs=4), Progress(48, (chunk(1, 0, 3),)), 2),  # the rest in one
        (Execution(chunk_runs=20, canary_runs=4), Progress(48, (chunk(1, 0, 3),)), 4),
        (Execution(chunk_runs=12), Progress(11, (chunk(1, 0, 9),)), 2),  # one run left: one more chunk
        (Execution(canary_runs=4), Progress(4, (chunk(1, 0, 3),)), 1),  # none left: none more, whatever the size
        (Execution(canary_runs=4), Progress(5, (chunk(1, 0, 3),)), 2),
    ],
)
def test_chunk_count(execution: Execution, progress: Progress, count: int) -> None:
    assert chunk_count(spec(execution=execution), Policy(), progress) == count


# --- runs over all chunks ---------------------------------------------------------------------------------


def test_combined_adds_counts_and_weights_the_mean_by_finished_runs() -> None:
    a = RunSummary({"success": 2, "failed": 1}, (JAN1 + 5 * DAY,), 1, 10.0, ("p2",), 1)
    b = RunSummary({"success": 1, "running": 2}, (JAN1 + 2 * DAY, JAN1), 2, 30.0, ("p1",), 3)
    c = RunSummary({"running": 4}, (), 0, 1000.0)  # nothing finished: its mean weighs nothing
    d = RunSummary({"success": 7}, (), 0, None)  # no mean: left out
    total = combined([a, b, c, d])
    assert total == RunSummary(
        {"success": 10, "failed": 1, "running": 6},
        (JAN1, JAN1 + 2 * DAY, JAN1 + 5 * DAY),
        3,
        15.0,  # (10 × 3 + 30 × 1) / 4
        ("p1", "p2"),
        4,
    )
    assert combined([]) == RunSummary({}, (), 0, None, (), 0)
    assert combined([c]).mean_duration is None
    assert combined([d, RunSummary({"failed": 2}, (), 0, 4.0)]).mean_duration == 4.0


def test_combined_lists_the_first_hundred_failed_dates_and_partitions() -> None:
    late = RunSummary({"failed": 60}, tuple(JAN1 + (60 + i) * HOUR for i in range(60)), 0, None, ("b",) * 60)
    early = RunSummary({"failed": 60}, tuple(JAN1 + i * HOUR for i in range(60)), 0, None, ("a",) * 60)
    total = combined([late, early])
    assert total.failed_dates == tuple(JAN1 + i * HOUR for i in range(100))
    assert total.failed_partitions == ("a",) * 60 + ("b",) * 40
    assert total.count("failed") == 120


def test_all_runs_prefers_current_then_final_then_nothing() -> None:
    progress = Progress(30, (chunk(1, 0, 9, runs(success=9, failed=1)), chunk(2, 10, 19), chunk(3, 20, 29)))
    everything = all_runs(progress, {2: runs(success=4, queued=6), 9: runs(success=100)})
    assert everything.counts == {"success": 13, "failed": 1, "queued": 6}
    assert all_runs(progress, {}).counts == {"success": 9, "failed": 1}
    assert all_runs(progress, {1: runs(failed=3)}).counts == {"failed": 3}
    assert all_runs(Progress(3), {}) == RunSummary({}, (), 0, None, (), 0)


# --- the halt ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("summary", "pair"),
    [
        (runs(success=3, failed=2, never=1), (4, 1)),
        (runs(failed=2, never=2), (0, 0)),
        (runs(success=5, running=3, queued=2), (5, 0)),
        (runs(), (0, 0)),
    ],
)
def test_finished_and_failed(summary: RunSummary, pair: tuple[int, int]) -> None:
    assert finished_and_failed(summary) == pair


HALTS = spec(execution=Execution(chunk_runs=10, halt_on_failure_ratio=0.2))


def reason(failed: int, finished: int, pct: int, since: str = "", limit: int = 20) -> str:
    return (
        f"halted: {failed} of {finished} finished runs failed{since} ({pct}% > {limit}%); "
        "fix the cause, then set a new `resume` value"
    )


@pytest.mark.parametrize(
    ("s", "progress", "summary", "why"),
    [
        (spec(), Progress(10), runs(failed=10), None),
        (spec(execution=Execution(chunk_runs=10)), Progress(10), runs(failed=10), None),
        (HALTS, Progress(10), runs(failed=4), None),  # 4 finished never halt
        (HALTS, Progress(10), runs(success=3, failed=1), None),
        (HALTS, Progress(10), runs(success=4, failed=1), None),  # 1 of 5 = 20 %: at the limit, not above
        (HALTS, Progress(10), runs(success=3, failed=2), reason(2, 5, 40)),
        (HALTS, Progress(10), runs(failed=5), reason(5, 5, 100)),
        (HALTS, Progress(10), runs(success=3, failed=3, never=1), reason(2, 5, 40)),  # never started: not counted
        (HALTS, Progress(10), runs(success=4, failed=2, never=1), None),  # 1 of 5
        (HALTS, Progress(10), runs(success=5, failed=3, running=9), reason(3, 8, 38)),
        (HALTS, Progress(10), runs(success=8, failed=2), None),
        (HALTS, Progress(10), runs(success=7, failed=3), reason(3, 10, 30)),
        (
            spec(execution=Execution(halt_on_failure_ratio=0.25)),
            Progress(10),
            runs(success=6, failed=2),
            None,
        ),
        (
            spec(execution=Execution(halt_on_failure_ratio=0.25)),
            Progress(10),
            runs(success=5, failed=3),
            reason(3, 8, 38, limit=25),
        ),
        (
            spec(execution=Execution(halt_on_failure_ratio=0.0)),
            Progress(10),
            runs(success=5),
            None,
        ),
        (
            spec(execution=Execution(halt_on_failure_ratio=0.0)),
            Progress(10),
            runs(success=4, failed=1),
            reason(1, 5, 20, limit=0),
        ),
        # the baseline: only what finished since the resume counts
        (HALTS, Progress(10, resumed="r1", base_finished=5, base_failed=3), runs(success=3, failed=4), None),
        (
            HALTS,
            Progress(10, resumed="r1", base_finished=5, base_failed=3),
            runs(success=5, failed=5),
            reason(2, 5, 40, " since resume 'r1'"),
        ),
        (HALTS, Progress(10, resumed="r1", base_finished=5, base_failed=3), runs(success=6, failed=4), None),
        (HALTS, Progress(10, base_finished=5, base_failed=0), runs(success=3, failed=3), None),  # 4 since
        (HALTS, Progress(10, base_finished=1, base_failed=1), runs(success=3, failed=3), reason(2, 5, 40)),
    ],
)
def test_halt_reason(s: BackfillSpec, progress: Progress, summary: RunSummary, why: str | None) -> None:
    assert halt_reason(s, progress, summary) == why


def test_the_halt_minimum_is_a_field_and_a_chunk_boundary_judges_whatever_finished() -> None:
    """A chunk of 4 ended with 2 failed (50 % over 30 %): mid-chunk 4 < 5 finished says too little; at the
    boundary it halts, so no second chunk starts."""
    thirty = spec(execution=Execution(chunk_runs=4, halt_on_failure_ratio=0.3))
    half = runs(success=2, failed=2)
    assert halt_reason(thirty, Progress(8), half) is None
    assert halt_reason(thirty, Progress(8), half, boundary=True) == reason(2, 4, 50, limit=30)
    assert halt(thirty, Progress(8), half, boundary=True).halted == reason(2, 4, 50, limit=30)
    assert halt(thirty, Progress(8), half).halted is None
    assert halt_reason(thirty, Progress(8), runs(success=1), boundary=True) is None
    assert halt_reason(thirty, Progress(8), runs(), boundary=True) is None  # nothing finished: nothing to judge
    assert halt_reason(thirty, Progress(8), runs(failed=1, never=1), boundary=True) is None  # cancelled, not run
    assert halt_reason(thirty, Progress(8), runs(failed=1), boundary=True) == reason(1, 1, 100, limit=30)
    three = spec(execution=Execution(chunk_runs=4, halt_on_failure_ratio=0.3, halt_min_finished=3))
    assert halt_reason(three, Progress(8), runs(success=1, failed=1)) is None  # 2 < 3
    assert halt_reason(three, Progress(8), runs(success=1, failed=2)) == reason(2, 3, 67, limit=30)
    one_ = spec(execution=Execution(halt_on_failure_ratio=0.3, halt_min_finished=1))
    assert halt_reason(one_, Progress(8), runs(failed=1)) == reason(1, 1, 100, limit=30)
    # the resume baseline counts at the boundary too
    since = Progress(8, resumed="r", base_finished=4, base_failed=2)
    assert halt_reason(thirty, since, half, boundary=True) is None


def test_halt_begins_holds_and_ends() -> None:
    bad = runs(success=3, failed=2)
    calm = Progress(10, (chunk(1, 0, 9),))
    assert halt(HALTS, calm, runs(success=5)) is calm
    began = halt(spec(execution=HALTS.execution, resume="r0"), calm, bad)
    assert began == Progress(10, calm.chunks, None, reason(2, 5, 40), "r0")
    assert halt(HALTS, calm, bad) == Progress(10, calm.chunks, None, reason(2, 5, 40), None)
    # it holds while the resume value is absent or the one of the halt's moment
    assert halt(HALTS, began, bad) is began
    assert halt(spec(execution=HALTS.execution, resume="r0"), began, bad) is began
    # a new value ends it; failures count again from the runs of that moment
    now = runs(success=6, failed=4, never=1)
    ended = halt(spec(execution=HALTS.execution, resume="r1"), began, now)
    assert ended == Progress(10, calm.chunks, None, None, "r1", 9, 3)
    # a halt held even when the spec no longer sets a ratio: only a new resume value ends it
    assert halt(spec(), began, bad) is began


@pytest.mark.parametrize(
    ("execution", "promote", "progress", "waits"),
    [
        (Execution(chunk_runs=10, canary_runs=3), False, Progress(40, (chunk(1, 0, 2),)), True),
        (Execution(canary_runs=3), False, Progress(40, (chunk(1, 0, 2),)), True),
        (Execution(chunk_runs=10, canary_runs=3), True, Progress(40, (chunk(1, 0, 2),)), False),
        (Execution(chunk_runs=10, canary_runs=3), False, Progress(40, (chunk(1, 0, 2),), promoted=True), False),
        (Execution(chunk_runs=10, canary_runs=3), False, Progress(40), False),
        (Execution(chunk_runs=10, canary_runs=3), False, Progress(40, (chunk(1, 0, 2), chunk(2, 3, 9))), False),
        (Execution(chunk_runs=10), False, Progress(40, (chunk(1, 0, 9),)), False),
        (Execution(chunk_runs=10, canary_runs=0), False, Progress(40, (chunk(1, 0, 9),)), False),
        (None, False, Progress(40, (chunk(1, 0, 9),)), False),
    ],
)
def test_awaiting_promotion(execution: Execution | None, promote: bool, progress: Progress, waits: bool) -> None:
    assert awaiting_promotion(spec(execution=execution, promote=promote), progress) is waits


# --- bounded dry runs -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("done", "covered", "target", "span"),
    [
        (0, DAY, TARGET_RUNS, 8 * DAY),  # nothing found: eight times as far
        (0, FIRST_SPAN, TARGET_RUNS, 112 * DAY),
        (1000, DAY, TARGET_RUNS, 2 * DAY),
        (336, FIRST_SPAN, TARGET_RUNS, FIRST_SPAN * (2000 / 336)),
        (4000, DAY, TARGET_RUNS, DAY / 2),
        (100, DAY, 50, DAY / 2),
        (2_000_000, timedelta(seconds=1), TARGET_RUNS, timedelta(seconds=1)),  # never below a second
        (2000, timedelta(seconds=1), TARGET_RUNS, timedelta(seconds=1)),
        (1000, timedelta(seconds=1), TARGET_RUNS, timedelta(seconds=2)),
    ],
)
def test_sub_range_span(done: int, covered: timedelta, target: int, span: timedelta) -> None:
    assert sub_range_span(done, covered, target) == span


def test_sub_range_span_aims_at_the_default_target() -> None:
    assert sub_range_span(500, DAY) == 4 * DAY


H24 = JAN1 + 24 * HOUR


@pytest.mark.parametrize(
    ("low", "high", "span", "backwards", "expected"),
    [
        (JAN1, H24, 6 * HOUR, False, ((JAN1, JAN1 + 6 * HOUR - TICK), (JAN1 + 6 * HOUR, H24))),
        (JAN1, H24, 6 * HOUR, True, ((H24 - 6 * HOUR + TICK, H24), (JAN1, H24 - 6 * HOUR))),
        (JAN1, H24, 48 * HOUR, False, ((JAN1, H24), None)),  # the last piece
        (JAN1, H24, 48 * HOUR, True, ((JAN1, H24), None)),
        (JAN1, H24, 24 * HOUR + TICK, False, ((JAN1, H24), None)),
        (JAN1, H24, 24 * HOUR, False, ((JAN1, H24 - TICK), (H24, H24))),  # exactly the span: one instant left
        (JAN1, H24, 24 * HOUR, True, ((JAN1 + TICK, H24), (JAN1, JAN1))),
        (JAN1, JAN1, TICK, False, ((JAN1, JAN1), None)),
    ],
)
def test_next_sub_range(
    low: datetime,
    high: datetime,
    span: timedelta,
    backwards: bool,
    expected: tuple[tuple[datetime, datetime], tuple[datetime, datetime] | None],
) -> None:
    assert next_sub_range(low, high, span, backwards=backwards) == expected


def test_sub_ranges_cover_the_range_once_in_either_direction() -> None:
    for backwards in (False, True):
        pieces: list[tuple[datetime, datetime]] = []
        rest: tuple[datetime, datetime] | None = (JAN1, H24)
        while rest is not None:
            piece, rest = next_sub_range(*rest, 5 * HOUR, backwards=backwards)
            pieces.append(piece)
        ordered = sorted(pieces)
        assert len(pieces) == 5
        assert ordered[0][0] == JAN1
        assert ordered[-1][1] == H24
        assert all(a[1] + TICK == b[0] for a, b in itertools.pairwise(ordered))
        assert pieces == (ordered[::-1] if backwards else ordered)


# --- a progress whose total is not known (a store rebuilt from Airflow) --------------------------------------


def test_uncreated() -> None:
    assert Progress(10, (chunk(1, 0, 3),)).uncreated == 6
    assert Progress(10).uncreated == 10
    assert Progress(3, (chunk(1, 0, 3),)).uncreated == 0  # never below zero
    assert Progress(4, (chunk(1, 0, 3),)).uncreated == 0
    assert Progress(None, (chunk(1, 0, 3),)).uncreated is None


def test_an_unknown_total_round_trips() -> None:
    progress = Progress(None, (chunk(1, 0, 3),))
    assert progress.as_json()["total"] is None
    assert Progress.from_json(progress.as_json()) == progress
    assert Progress.from_json({"chunks": []}) == Progress(None)


@pytest.mark.parametrize(
    ("execution", "progress", "size"),
    [
        (None, Progress(None, (chunk(1, 0, 30),)), 16),  # 31 created: above the policy threshold
        (None, Progress(None, (chunk(1, 0, 29),)), None),
        (Execution(chunk_runs=5, canary_runs=2), Progress(None), 2),
    ],
)
def test_next_size_without_a_total_counts_what_was_created(
    execution: Execution | None, progress: Progress, size: int | None
) -> None:
    assert next_size(spec(execution=execution), POLICY, progress) == size


@pytest.mark.parametrize(
    ("execution", "progress", "count"),
    [
        (Execution(chunk_runs=12), Progress(None, (chunk(1, 0, 11),)), 0),  # not known
        (Execution(chunk_runs=20, canary_runs=4), Progress(48), 4),  # no chunk yet: the canary, then 20, 20, 4
        (Execution(chunk_runs=20, canary_runs=4), Progress(4), 1),
        (Execution(chunk_runs=20, canary_runs=50), Progress(48), 1),
        (Execution(canary_runs=4), Progress(48), 2),
        (Execution(chunk_runs=20, canary_runs=4), Progress(0), 0),
    ],
)
def test_chunk_count_without_chunks_or_total(execution: Execution, progress: Progress, count: int) -> None:
    assert chunk_count(spec(execution=execution), Policy(), progress) == count


def test_chunk_count_by_the_policy_default_over_the_whole_count() -> None:
    assert chunk_count(spec(), POLICY, Progress(40, (chunk(1, 0, 15),))) == 3  # 16, then 16 and 8
    assert chunk_count(spec(), POLICY, Progress(40)) == 3
    assert chunk_count(spec(), POLICY, Progress(30, (chunk(1, 0, 15),))) == 2  # not above 30: the rest at once


@pytest.mark.parametrize(
    ("pair", "text"), [((3, 7), "chunk 3 of 7"), ((3, 0), "chunk 3 of ?"), ((1, 1), "chunk 1 of 1")]
)
def test_chunk_text(pair: tuple[int, int], text: str) -> None:
    assert chunk_text(pair) == text
