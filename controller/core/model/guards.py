"""The load guards as values (pure): run windows, freezes, budgets, the scheduler guard and what the scheduler
said of its health. A window's opening on a day is computed between UTC instants: Python compares two datetimes
that share a tzinfo by their wall-clock fields, which is wrong across a DST change. What the guards decide from
these values is `core/rules/guards.py`.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from enum import StrEnum
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from controller.core.model.analysis import Analysis


class GuardKind(StrEnum):
    """Which guard's pause or wait holds a spec: the word the plan, the binding and the audit record say."""

    FREEZE = "freeze"  # overrides the others
    SCHEDULER = "scheduler guard"
    WINDOW = "window"
    ANALYSIS = "analysis"  # a downstream system's metric analysis
    BUDGET = "budget"  # a downstream budget's share
    STOP = "stop"  # an emergency stop's pause (never `state: paused`, never drift)
    HALT = "halt"  # a chunked spec's halt ratio
    CODE_CHANGED = "code-changed"  # a `select` spec's DAG moved past its reviewed target


_NAMED = frozenset({GuardKind.ANALYSIS, GuardKind.BUDGET})  # "analysis warehouse", "budget warehouse"


@dataclass(frozen=True, slots=True)
class Guard:
    """The guard behind a pause or a wait; `str()` is its stored text ("window", "freeze 'year-end close'",
    "analysis warehouse"), which stays byte-identical in bindings, plans and audit records."""

    kind: GuardKind
    name: str = ""  # a freeze's reason, an analysis's system, a budget's name

    def __str__(self) -> str:
        if self.kind is GuardKind.FREEZE:
            return f"freeze {self.name!r}"
        return f"{self.kind} {self.name}" if self.kind in _NAMED else self.kind.value

    @classmethod
    def from_text(cls, text: str) -> Guard:
        """The guard a stored text names (the inverse of `str`); ValueError for a text no release wrote."""
        word, _, rest = text.partition(" ")
        if word == GuardKind.FREEZE and rest:
            reason = _literal(rest)  # written with repr(): either quote, escapes included
            if isinstance(reason, str):
                return cls(GuardKind.FREEZE, reason)
        elif word in _NAMED and rest:
            return cls(GuardKind(word), rest)
        elif text in set(GuardKind) - _NAMED - {GuardKind.FREEZE}:
            return cls(GuardKind(text))
        raise ValueError(f"not a guard: {text!r}")


def _literal(text: str) -> object:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return None


DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
DAY_MINUTES = 24 * 60


@dataclass(frozen=True, slots=True)
class Window:
    """Opens on each of `days` at `start` (local) and closes at `end`, the next day when end <= start."""

    days: tuple[str, ...]
    start: str  # "HH:MM"
    end: str  # "HH:MM", "24:00" allowed
    timezone: str

    def opening(self, day: date) -> tuple[datetime, datetime] | None:
        """The UTC instants this window opens and closes when it opens on local `day` (None: not that day)."""
        if DAYS[day.weekday()] not in self.days:
            return None
        start, end = _minutes(self.start), _minutes(self.end)
        opens = _instant(day, start, self.timezone)
        close_day = day + timedelta(days=1) if end <= start else day
        return opens, _instant(close_day, end, self.timezone)


@dataclass(frozen=True, slots=True)
class Freeze:
    start: datetime  # UTC instants, start inclusive, end exclusive
    end: datetime
    reason: str


@dataclass(frozen=True, slots=True)
class Budget:
    name: str
    max_active_runs: int
    owners: tuple[str, ...] = ()
    analysis: Analysis | None = None  # metric-driven pauses of the system's backfills
    dags: tuple[str, ...] = ()  # the DAGs that load the system: a spec listing it names them (`asset_consumers`)


@dataclass(frozen=True, slots=True)
class SchedulerGuard:
    pause_when_unhealthy: bool = False
    max_heartbeat_age_s: int | None = None


@dataclass(frozen=True, slots=True)
class SchedulerHealth:
    """What `/api/v2/monitor/health` said of the scheduler; `error` when it could not be read."""

    status: str | None = None
    heartbeat: datetime | None = None
    error: str | None = None


def valid_timezone(name: str) -> bool:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a name the file system refuses
        return False
    return True


def _minutes(text: str) -> int:
    hours, minutes = text.split(":")
    return int(hours) * 60 + int(minutes)


def _instant(day: date, minutes: int, timezone: str) -> datetime:
    """Local wall time → UTC. A time skipped by DST is read with the offset before the change (02:30 → 03:30)."""
    if minutes == DAY_MINUTES:
        day, minutes = day + timedelta(days=1), 0
    local = datetime.combine(day, time(minutes // 60, minutes % 60), tzinfo=ZoneInfo(timezone))
    return local.astimezone(UTC)
