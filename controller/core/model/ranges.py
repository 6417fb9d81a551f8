"""Dates as few ranges of equal steps (pure): what a binding and a chunk keep of the runs they own."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True, slots=True)
class DateRange:
    """Equally spaced dates: `count` of them from `first` to `last` (a daily range is one of these)."""

    first: datetime
    last: datetime
    count: int

    def dates(self) -> list[datetime]:
        if self.count == 1:
            return [self.first]
        step = (self.last - self.first) / (self.count - 1)
        return [self.first + step * k for k in range(self.count)]

    def as_json(self) -> list[Any]:
        return [self.first.isoformat(), self.last.isoformat(), self.count]

    @classmethod
    def from_json(cls, data: Sequence[Any]) -> DateRange:
        return cls(datetime.fromisoformat(data[0]), datetime.fromisoformat(data[1]), int(data[2]))


def compact(dates: Iterable[datetime]) -> tuple[DateRange, ...]:
    """The dates (any order, repeats dropped) as few ranges of equal steps, in date order."""
    ordered = sorted(set(dates))
    ranges: list[DateRange] = []
    start = 0
    while start < len(ordered):
        end = start
        if start + 1 < len(ordered):
            step = ordered[start + 1] - ordered[start]
            end = start + 1
            while end + 1 < len(ordered) and ordered[end + 1] - ordered[end] == step:
                end += 1
        ranges.append(DateRange(ordered[start], ordered[end], end - start + 1))
        start = end + 1
    return tuple(ranges)


def expand(ranges: Iterable[DateRange]) -> list[datetime]:
    return [d for r in ranges for d in r.dates()]


def ranges_json(ranges: Sequence[DateRange]) -> list[list[Any]]:
    return [r.as_json() for r in ranges]


def ranges_from_json(data: Sequence[Sequence[Any]] | None) -> tuple[DateRange, ...] | None:
    return None if data is None else tuple(DateRange.from_json(r) for r in data)
