"""A calendar heat map of a backfill's range (pure): one cell per interval or partition, coloured by outcome.

Cells come from the DAG runs in the range (read from Airflow for the report): a backfill run's state gives
succeeded / failed / never started (failed without a start: cancelled while queued) / in progress; a run of
another type (scheduled, manual) is an interval the backfill skipped (kept by the reprocess behaviour).  The
controller does not know the DAG's schedule, so without Airflow only the failed dates the store recorded can
be placed; `from_stored` says so in its note.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from controller.core.model.airflow import DagRun, latest_per_partition
from controller.core.render.change_record import Intervals

STATES = ("succeeded", "failed", "skipped", "never_started", "in_progress")
LABELS = {
    "succeeded": "succeeded",
    "failed": "failed",
    "skipped": "skipped (kept, not re-run)",
    "never_started": "never started",
    "in_progress": "queued or running",
}
SYMBOLS = {"succeeded": "#", "failed": "X", "skipped": ".", "never_started": "o", "in_progress": "~"}


@dataclass(frozen=True, slots=True)
class Cell:
    when: datetime  # the logical date, or the partition date
    label: str  # what a tooltip says: the date/time, or the partition key
    state: str  # one of STATES


@dataclass(frozen=True, slots=True)
class HeatMap:
    cells: tuple[Cell, ...]
    complete: bool  # every interval with a run is placed (False: only what the store knew)
    note: str = ""
    unplaced: Mapping[str, int] = field(default_factory=dict)  # counts known but not placeable on dates

    def count(self, state: str) -> int:
        return sum(1 for c in self.cells if c.state == state)


def cell_state(run: DagRun, run_type: str) -> str:
    if run_type != "backfill":
        return "skipped"
    if run.state == "success":
        return "succeeded"
    if run.state == "failed":
        return "failed" if run.start_date is not None else "never_started"
    return "in_progress"


def from_runs(runs: Sequence[tuple[DagRun, str]]) -> HeatMap:
    """Every run in the range with its run type; a partition's latest run decides (as in `summarise`)."""
    types = {id(run): run_type for run, run_type in runs}
    latest = latest_per_partition([run for run, _ in runs])
    latest_by_date: dict[datetime, DagRun] = {}
    cells = []
    for run in latest:
        when = run.logical_date or run.partition_date
        if when is None:
            continue
        if run.partition_key is None:  # one run per logical date; a later one (a reprocess) replaces it
            latest_by_date[when] = run
            continue
        cells.append(Cell(when, f"{run.partition_key} ({_label(when)})", cell_state(run, types[id(run)])))
    cells += [Cell(when, _label(when), cell_state(run, types[id(run)])) for when, run in latest_by_date.items()]
    return HeatMap(tuple(sorted(cells, key=lambda c: (c.when, c.label))), complete=True)


def from_stored(intervals: Intervals) -> HeatMap:
    """Offline: the failed dates the store recorded are placed; other counts are shown beside the map."""
    cells = tuple(Cell(d, _label(d), "failed") for d in sorted(intervals.failed_dates))
    unplaced = {
        "succeeded": intervals.complete,
        "never_started": intervals.never_started,
        "skipped": intervals.skipped or 0,
    }
    note = (
        "Only the failed dates the store recorded are placed: the controller does not know the DAG's schedule. "
        "Set BACKFILLCTL_AIRFLOW_URL to read every run of the range from Airflow for the full map."
    )
    return HeatMap(cells, complete=False, note=note, unplaced={k: v for k, v in unplaced.items() if v})


def _label(when: datetime) -> str:
    text = when.strftime("%Y-%m-%d %H:%M")
    return text.removesuffix(" 00:00")


@dataclass(frozen=True, slots=True)
class Row:
    label: str
    slots: tuple[Cell | None, ...]  # None: no interval at this position


def calendar(heatmap: HeatMap) -> tuple[str, list[Row]]:
    """Rows of a calendar: a month per row with a column per day, or for sub-daily schedules a day per row
    with a column per hour (several runs in one hour share its column, the worst outcome shown)."""
    cells = heatmap.cells
    if not cells:
        return "day", []
    gaps = [b.when - a.when for a, b in itertools.pairwise(cells) if b.when != a.when]
    if gaps and min(gaps) < timedelta(days=1):
        return "hour", _rows(cells, lambda c: c.when.strftime("%Y-%m-%d"), lambda c: c.when.hour, 24)
    return "day", _rows(cells, lambda c: c.when.strftime("%Y-%m"), lambda c: c.when.day - 1, 31)


_WORST = {"failed": 0, "never_started": 1, "in_progress": 2, "succeeded": 3, "skipped": 4}


def _rows(
    cells: Sequence[Cell], row_of: Callable[[Cell], str], column_of: Callable[[Cell], int], width: int
) -> list[Row]:
    grouped: dict[str, list[Cell | None]] = {}
    for cell in cells:
        slots = grouped.setdefault(row_of(cell), [None] * width)
        index = column_of(cell)
        held = slots[index]
        if held is None or _WORST[cell.state] < _WORST[held.state]:
            slots[index] = cell
    return [Row(label, tuple(slots)) for label, slots in grouped.items()]


def heatmap_text(heatmap: HeatMap) -> str:
    """The compact text version for the markdown report: one line per month (or day), one character per slot."""
    unit, rows = calendar(heatmap)
    legend = "  ".join(f"{SYMBOLS[s]} {LABELS[s]}" for s in STATES) + "  (blank: no interval)"
    header = " " * 11 + "".join(
        str((i + 1) % 10) if unit == "day" else str(i % 10) for i in range(24 if unit == "hour" else 31)
    )
    lines = [legend, header] + [
        f"{row.label:<10} " + "".join(SYMBOLS[c.state] if c else " " for c in row.slots) for row in rows
    ]
    counts = ", ".join(f"{heatmap.count(s)} {LABELS[s]}" for s in STATES if heatmap.count(s))
    lines.append(f"{len(heatmap.cells)} cells: {counts or 'none'}")
    if heatmap.unplaced:
        lines.append("not placed: " + ", ".join(f"{n} {LABELS[s]}" for s, n in heatmap.unplaced.items()))
    if heatmap.note:
        lines.append(heatmap.note)
    return "\n".join(line.rstrip() for line in lines) + "\n"
