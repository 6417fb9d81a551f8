"""Status rows and the change record of a chunked spec (consecutive Airflow backfills): chunk k of n, ETA over
later chunks, the running chunk's concurrency, every chunk's backfill."""

from __future__ import annotations

from datetime import timedelta

import pytest

from controller.core.model.airflow import RunSummary
from controller.core.model.binding import Binding, Phase
from controller.core.model.chunks import Chunk, Progress
from controller.core.plan.values import Item, Kind, Plan
from controller.core.render.change_record import change_record
from controller.core.render.report_markdown import report_markdown
from controller.core.render.status import StatusRow, status_rows, stored_rows
from tests.core.plan.test_plan import JAN1, spec

DAY = timedelta(days=1)


def summary(
    success: int = 0, failed: int = 0, running: int = 0, queued: int = 0, mean: float | None = 60.0
) -> RunSummary:
    counts = {"success": success, "failed": failed, "running": running, "queued": queued}
    return RunSummary({k: v for k, v in counts.items() if v}, mean_duration=mean)


def chunk(id_: int, first: int, last: int, mar: int = 2, done: RunSummary | None = None) -> Chunk:
    return Chunk(id_, JAN1 + first * DAY, JAN1 + last * DAY, last - first + 1, mar, done)


PROGRESS = Progress(20, (chunk(1, 0, 3, 2, summary(success=4)), chunk(2, 4, 7, 3)))


def item(
    phase: Phase = Phase.RUNNING,
    runs: RunSummary | None = None,
    progress: Progress | None = PROGRESS,
    chunked: tuple[int, int] | None = (2, 5),
    backfill_id: int | None = 2,
    mar: int = 1,
) -> Item:
    return Item(
        "s",
        "d",
        Kind.NOOP,
        phase,
        "in sync",
        backfill_id,
        source=spec("s", max_active_runs=mar),
        runs=runs,
        chunk=chunked,
        progress=progress,
    )


def test_a_running_chunk_row() -> None:
    runs = summary(success=5, failed=1, running=1, queued=1)
    (row,) = status_rows(Plan((item(runs=runs),)), {})
    # left: 2 of this chunk and the 12 runs no chunk created yet, 3 at a time (chunk 2's concurrency, not the spec's 1);
    # the total counts those 12 too, so progress is over the whole spec (6 of 20 done); 3 chunk boundaries ahead
    # wait for a pass each (~30 s)
    eta = 5 * 60.0 + 3 * 30.0
    assert row == StatusRow("s", "d", "Running", 2, 5, 1, 1, 1, 20, eta, "chunk 2 of 5; in sync", (2, 5), (1, 2))
    assert row.progress == 30.0
    assert row.as_json()["chunk"] == {"index": 2, "count": 5}
    assert row.as_json()["backfills"] == [1, 2]


@pytest.mark.parametrize(
    ("phase", "progress", "chunked", "eta", "note"),
    [
        (Phase.SUCCEEDED, PROGRESS, (2, 5), 60.0, "chunk 2 of 5; in sync"),  # terminal: no later chunk counts
        (Phase.RUNNING, Progress(None, PROGRESS.chunks), (2, 0), 60.0, "chunk 2 of ?; in sync"),
        (Phase.RUNNING, Progress(8, PROGRESS.chunks), (2, 2), 60.0, "chunk 2 of 2; in sync"),
        (Phase.RUNNING, None, None, 180.0, "in sync"),  # the spec's own concurrency: 1
    ],
)
def test_the_eta_counts_later_chunks_only_while_the_spec_goes_on(
    phase: Phase, progress: Progress | None, chunked: tuple[int, int] | None, eta: float, note: str
) -> None:
    runs = summary(success=2, running=2, queued=1)
    (row,) = status_rows(Plan((item(phase, runs, progress, chunked),)), {})
    assert (row.eta_seconds, row.note, row.chunk) == (eta, note, chunked)
    assert row.backfills == (() if progress is None else (1, 2))


def test_a_finished_chunk_is_counted_with_the_specs_concurrency() -> None:
    done = Progress(20, (chunk(1, 0, 3, 2, summary(success=4)), chunk(2, 4, 7, 3, summary(success=4))))
    (row,) = status_rows(Plan((item(runs=summary(success=8), progress=done, mar=4),)), {})
    assert row.eta_seconds == 3 * 60.0 + 3 * 30.0  # 12 runs not created, 4 at a time; 3 chunks still to create


@pytest.mark.parametrize("phase", [Phase.AWAITING_PROMOTION, Phase.PAUSED, Phase.HALTED, Phase.QUEUED])
def test_a_spec_held_by_a_human_or_a_queue_has_no_eta(phase: Phase) -> None:
    (row,) = status_rows(Plan((item(phase, summary(success=4, queued=2)),)), {})
    assert (row.phase, row.eta_seconds) == (phase.value, None)


def test_the_row_falls_back_to_the_stored_progress() -> None:
    waiting = Item(
        "s",
        "d",
        Kind.WAIT,
        Phase.PENDING,
        "awaiting dry run",
        None,
        source=spec("s", max_active_runs=4),
        awaiting_dry_run=True,
    )
    binding = Binding("s", "d", 2, Phase.RUNNING, runs=summary(success=8), backfills=(1, 2), progress=PROGRESS)
    (row,) = status_rows(Plan((waiting,)), {"s": binding})
    assert (row.backfill_id, row.success, row.eta_seconds, row.backfills, row.note) == (
        2,
        8,
        3 * 60.0,
        (1, 2),
        "awaiting dry run",
    )


def test_an_orphan_row_counts_one_run_at_a_time() -> None:
    orphan = Item("s", "d", Kind.NOOP, Phase.ORPHANED, "deleted", 2, runs=summary(running=1, queued=2))
    (row,) = status_rows(Plan((orphan,)), {})
    assert (row.eta_seconds, row.backfills, row.chunk) == (3 * 60.0, (), None)


def test_stored_rows_list_a_chunked_specs_backfills() -> None:
    binding = Binding("s", "d", 2, Phase.RUNNING, reason="in sync", updated_at="t", progress=PROGRESS)
    plain = Binding("p", "d", 7, Phase.RUNNING, reason="in sync", updated_at="t")
    rows = stored_rows([spec("s"), spec("p"), spec("n")], {"s": binding, "p": plain})
    assert [(r.spec, r.backfill_id, r.backfills, r.note) for r in rows] == [
        ("s", 2, (1, 2), "(stored t) in sync"),
        ("p", 7, (), "(stored t) in sync"),
        ("n", None, (), "(stored -) not reconciled yet"),
    ]


def test_the_change_record_lists_every_chunk() -> None:
    binding = Binding("s", "d", 2, Phase.RUNNING, runs=summary(success=1, failed=2, running=1), progress=PROGRESS)
    later = Progress(20, (*PROGRESS.chunks, chunk(3, 8, 9)))
    report = change_record(spec("s"), binding, []).as_json()
    assert report["chunks"] == [
        {
            "backfill_id": 1,
            "from_date": "2025-01-01T00:00:00Z",
            "to_date": "2025-01-04T00:00:00Z",
            "runs": 4,
            "max_active_runs": 2,
            "finished": True,
            "succeeded": 4,
            "failed": 0,
        },
        {
            "backfill_id": 2,
            "from_date": "2025-01-05T00:00:00Z",
            "to_date": "2025-01-08T00:00:00Z",
            "runs": 4,
            "max_active_runs": 3,
            "finished": False,
            "succeeded": 1,
            "failed": 2,
        },
    ]
    unknown = change_record(spec("s"), Binding("s", "d", 2, Phase.RUNNING, progress=later), []).as_json()["chunks"]
    assert [(c["backfill_id"], c["succeeded"], c["failed"], c["finished"]) for c in unknown] == [
        (1, 4, 0, True),
        (2, None, None, False),
        (3, None, None, False),
    ]
    assert change_record(spec("s"), Binding("s", "d", 2, Phase.RUNNING), []).as_json()["chunks"] is None
    assert change_record(spec("s"), None, []).as_json()["chunks"] is None
    assert (
        change_record(spec("s"), Binding("s", "d", 2, Phase.RUNNING, progress=Progress(3)), []).as_json()["chunks"]
        == []
    )


def test_the_change_record_in_markdown_says_every_chunk() -> None:
    binding = Binding("s", "d", 2, Phase.RUNNING, runs=summary(success=1, failed=2, running=1), progress=PROGRESS)
    lines = report_markdown(change_record(spec("s"), binding, [])).splitlines()
    at = lines.index("- **Chunks**: 2 Airflow backfill(s), one after another")
    assert lines[at - 1].startswith("- **Intervals**: ")
    assert lines[at + 1 : at + 4] == [
        "  - backfill #1: 2025-01-01T00:00:00Z → 2025-01-04T00:00:00Z, 4 run(s), max_active_runs 2, "
        "4 succeeded, 0 failed",
        "  - backfill #2: 2025-01-05T00:00:00Z → 2025-01-08T00:00:00Z, 4 run(s), max_active_runs 3, "
        "1 succeeded, 2 failed (active)",
        "",
    ]
    unknown = Binding("s", "d", 2, Phase.RUNNING, progress=Progress(20, (chunk(2, 4, 7, 3),)))
    lines = report_markdown(change_record(spec("s"), unknown, [])).splitlines()
    assert "  - backfill #2: 2025-01-05T00:00:00Z → 2025-01-08T00:00:00Z, 4 run(s), max_active_runs 3 (active)" in lines
    for empty in (Progress(3), None):
        text = report_markdown(change_record(spec("s"), Binding("s", "d", 2, Phase.RUNNING, progress=empty), []))
        assert "Chunks" not in text
