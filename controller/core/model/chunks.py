"""A chunked spec's progress as values (pure): its chunks, the chunk being created, the halt and the canary.

A chunked spec owns consecutive Airflow backfills. Each chunk is a contiguous slice of the runs Airflow's
dry run lists for what is left of the spec's range, in the spec's direction; its backfill spans the slice's
first to last date. What the store keeps between passes is a `Progress`: the chunks created so far (each
with its final runs once finished), the spec's whole run count, the chunk being created, and the `resume`
value last acknowledged with the failure counts at that moment (the halt counts only what finished since).
How large each chunk is and when a spec halts is `core/rules/chunks.py`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from controller.core.model.airflow import RunSummary, summary_from_json
from controller.core.model.ranges import DateRange, ranges_from_json, ranges_json


@dataclass(frozen=True, slots=True)
class Chunk:
    backfill_id: int
    first: datetime  # first and last date of its slice (its backfill's from_date and to_date)
    last: datetime
    runs: int  # the runs its dry run listed
    max_active_runs: int
    summary: RunSummary | None = None  # its runs once its backfill finished (final: never read again)
    dates: tuple[DateRange, ...] | None = None  # the dates its dry run listed (None: not known)

    def as_json(self) -> dict[str, Any]:
        return {
            "backfill_id": self.backfill_id,
            "from_date": self.first.isoformat(),
            "to_date": self.last.isoformat(),
            "runs": self.runs,
            "max_active_runs": self.max_active_runs,
            "summary": None if self.summary is None else self.summary.as_json(),
            "dates": None if self.dates is None else ranges_json(self.dates),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Chunk:
        summary = data.get("summary")
        return cls(
            int(data["backfill_id"]),
            datetime.fromisoformat(data["from_date"]),
            datetime.fromisoformat(data["to_date"]),
            int(data["runs"]),
            int(data["max_active_runs"]),
            None if summary is None else summary_from_json(summary),
            ranges_from_json(data.get("dates")),
        )


@dataclass(frozen=True, slots=True)
class Slice:
    """The next chunk to create: its dates' bounds, run count and concurrency."""

    first: datetime
    last: datetime
    runs: int
    max_active_runs: int
    dates: tuple[DateRange, ...] | None = None  # the dates its dry run listed

    def as_json(self) -> dict[str, Any]:
        return {
            "from_date": self.first.isoformat(),
            "to_date": self.last.isoformat(),
            "runs": self.runs,
            "max_active_runs": self.max_active_runs,
            "dates": None if self.dates is None else ranges_json(self.dates),
        }

    def chunk(self, backfill_id: int) -> Chunk:
        """The chunk its create made."""
        return Chunk(backfill_id, self.first, self.last, self.runs, self.max_active_runs, dates=self.dates)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Slice:
        return cls(
            datetime.fromisoformat(data["from_date"]),
            datetime.fromisoformat(data["to_date"]),
            int(data["runs"]),
            int(data["max_active_runs"]),
            ranges_from_json(data.get("dates")),
        )


@dataclass(frozen=True, slots=True)
class Progress:
    total: int | None  # the spec's runs when its first chunk was planned (None: not known, after a lost store)
    chunks: tuple[Chunk, ...] = ()
    pending: Slice | None = None  # a chunk whose create was asked for and not yet answered
    halted: str | None = None  # why the spec is halted (None: it is not)
    resumed: str | None = None  # the spec's `resume` value when the halt began, or the one that ended it
    base_finished: int = 0  # finished and failed runs when it was acknowledged (the halt counts from there)
    base_failed: int = 0
    promoted: bool = False
    # a `select` spec's contiguous sub-ranges (first, last), one chunk each, as selected at its first create
    sub_ranges: tuple[tuple[datetime, datetime], ...] | None = None

    @property
    def created(self) -> int:
        return sum(c.runs for c in self.chunks)

    @property
    def uncreated(self) -> int | None:
        """Runs the spec counted that no chunk has created yet (None: not known)."""
        return None if self.total is None else max(0, self.total - self.created)

    @property
    def ids(self) -> tuple[int, ...]:
        return tuple(c.backfill_id for c in self.chunks)

    def with_chunk(self, chunk: Chunk) -> Progress:
        return replace(self, chunks=(*self.chunks, chunk), pending=None)

    def finished(self, backfill_id: int, summary: RunSummary) -> Progress:
        """The chunk of `backfill_id` with its final runs."""
        chunks = tuple(replace(c, summary=summary) if c.backfill_id == backfill_id else c for c in self.chunks)
        return replace(self, chunks=chunks)

    def as_json(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "chunks": [c.as_json() for c in self.chunks],
            "pending": None if self.pending is None else self.pending.as_json(),
            "halted": self.halted,
            "resumed": self.resumed,
            "base_finished": self.base_finished,
            "base_failed": self.base_failed,
            "promoted": self.promoted,
        } | (
            {}
            if self.sub_ranges is None
            else {"sub_ranges": [[a.isoformat(), b.isoformat()] for a, b in self.sub_ranges]}
        )

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Progress:
        pending = data.get("pending")
        return cls(
            None if data.get("total") is None else int(data["total"]),
            tuple(Chunk.from_json(c) for c in data.get("chunks") or ()),
            None if pending is None else Slice.from_json(pending),
            data.get("halted"),
            data.get("resumed"),
            int(data.get("base_finished") or 0),
            int(data.get("base_failed") or 0),
            bool(data.get("promoted")),
            _sub_ranges(data.get("sub_ranges")),
        )


def _sub_ranges(raw: Any) -> tuple[tuple[datetime, datetime], ...] | None:
    if raw is None:
        return None
    return tuple((datetime.fromisoformat(a), datetime.fromisoformat(b)) for a, b in raw)
