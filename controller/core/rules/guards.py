"""Load guards (pure): what run windows, freezes, the scheduler brake and downstream budgets decide.

Every function takes `now`; none reads a clock. Window times are wall-clock times in the window's IANA
time zone; every comparison is made between UTC instants, because Python compares two datetimes that
share a tzinfo by their wall-clock fields, which is wrong across a DST change.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

from controller.core.model.guards import DAYS, Budget, Freeze, Guard, GuardKind, SchedulerGuard, SchedulerHealth, Window


@dataclass(frozen=True, slots=True)
class Stop:
    """A guard that holds a spec back now: which one, and until when."""

    rule: Guard  # the guard as the audit and the plan name it
    detail: str  # "until 20:00 Europe/Berlin", "(scheduler status 'unhealthy')"
    pauses: bool = True  # False: an analysis that only holds (nothing new, nothing resumed, nothing paused)

    @property
    def paused(self) -> str:
        if self.rule.kind is GuardKind.ANALYSIS:
            return f"paused by {self.rule}: {self.detail}"
        return f"paused by {self.rule} {self.detail}"

    @property
    def queued(self) -> str:
        """Why a create waits; an analysis says its verdict as it is ("waiting: warehouse load 0.95 > 0.85 (…)")."""
        return self.detail if self.rule.kind is GuardKind.ANALYSIS else f"queued by {self.rule} {self.detail}"


def _local_day(now: datetime, timezone: str) -> date:
    return now.astimezone(ZoneInfo(timezone)).date()


def in_windows(windows: Iterable[Window], now: datetime) -> bool:
    """True when `now` lies in one of the windows (an opening that began yesterday counts)."""
    for window in windows:
        today = _local_day(now, window.timezone)
        for day in (today - timedelta(days=1), today):
            span = window.opening(day)
            if span is not None and span[0] <= now < span[1]:
                return True
    return False


def next_opening(windows: Sequence[Window], now: datetime) -> tuple[datetime, Window] | None:
    """The earliest opening after `now` (within a week: every window opens weekly), and its window."""
    found: list[tuple[datetime, int]] = []
    for index, window in enumerate(windows):
        today = _local_day(now, window.timezone)
        for offset in range(8):  # today's opening may have passed: the same weekday comes again in 7 days
            span = window.opening(today + timedelta(days=offset))
            if span is not None and span[0] > now:
                found.append((span[0], index))
    if not found:
        return None
    opens, index = min(found)
    return opens, windows[index]


def opening_text(opens: datetime, window: Window, now: datetime) -> str:
    """`20:00 Europe/Berlin` today (in that zone), else `Mon 20:00 Europe/Berlin`."""
    zone = ZoneInfo(window.timezone)
    local = opens.astimezone(zone)
    same_day = local.date() == now.astimezone(zone).date()
    day = "" if same_day else DAYS[local.weekday()].capitalize() + " "
    return f"{day}{local:%H:%M} {window.timezone}"


def active_freeze(freezes: Iterable[Freeze], now: datetime) -> Freeze | None:
    """The freeze in force at `now` that ends last (None outside every freeze)."""
    active = [f for f in freezes if f.start <= now < f.end]
    return max(active, key=lambda f: f.end) if active else None


def scheduler_problem(health: SchedulerHealth, guard: SchedulerGuard, now: datetime) -> str | None:
    """Why the scheduler counts as unhealthy, or None when it is healthy."""
    if health.status != "healthy":
        return f"scheduler status {health.status or 'unknown'!r}"
    limit = guard.max_heartbeat_age_s
    if limit is not None:
        if health.heartbeat is None:
            return "scheduler reports no heartbeat"
        age = (now - health.heartbeat).total_seconds()
        if age > limit:
            return f"scheduler heartbeat {age:.0f} s old (limit {limit} s)"
    return None


def guard_stop(
    windows: Sequence[Window],
    freezes: Sequence[Freeze],
    now: datetime,
    scheduler: str | None = None,
) -> Stop | None:
    """What holds a spec back now: a freeze first (it overrides windows), then the scheduler, then windows.

    `windows` are the spec's effective windows (empty: always); `scheduler` the scheduler's problem, if any.
    """
    freeze = active_freeze(freezes, now)
    if freeze is not None:
        return Stop(Guard(GuardKind.FREEZE, freeze.reason), f"until {_utc(freeze.end)}")
    if scheduler is not None:
        return Stop(Guard(GuardKind.SCHEDULER), f"({scheduler})")
    if not windows or in_windows(windows, now):
        return None
    opening = next_opening(windows, now)
    until = "(no window opens within a week)" if opening is None else f"until {opening_text(*opening, now)}"
    return Stop(Guard(GuardKind.WINDOW), until)


def resumed_text(rule: Guard) -> str:
    """The reason of the unpause that ends a guard's pause."""
    return f"resumed: {rule} no longer applies"


def _utc(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- budgets --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Claim:
    """A spec that holds (or asks for) budget: its name, the systems it lists and its max_active_runs."""

    spec: str
    downstream: tuple[str, ...]
    max_active_runs: int


@dataclass(frozen=True, slots=True)
class Admission:
    admitted: bool
    budget: str = ""  # the first budget that did not fit
    reason: str = ""


def admit(budgets: Mapping[str, Budget], holding: Sequence[Claim], asking: Sequence[Claim]) -> dict[str, Admission]:
    """Admit `asking` (in queue order) while each budget it lists has room; a spec that does not fit blocks
    every later spec on the same budget, so small later specs never starve an earlier large one."""
    used = dict.fromkeys(budgets, 0)
    users: dict[str, list[str]] = {name: [] for name in budgets}
    for claim in holding:
        for name in _budgeted(claim, budgets):
            used[name] += claim.max_active_runs
            users[name].append(claim.spec)
    first_waiting: dict[str, str] = {}
    result: dict[str, Admission] = {}
    for claim in asking:
        names = _budgeted(claim, budgets)
        short = next(
            (n for n in names if n in first_waiting or used[n] + claim.max_active_runs > budgets[n].max_active_runs),
            None,
        )
        if short is None:
            for name in names:
                used[name] += claim.max_active_runs
                users[name].append(claim.spec)
            result[claim.spec] = Admission(True)
            continue
        who = f" by {', '.join(users[short])}" if users[short] else ""
        text = f"waiting for {short} budget ({used[short]} of {budgets[short].max_active_runs} in use{who}"
        ahead = first_waiting.get(short)
        text += f"; {ahead} waits first)" if ahead else ")"
        for name in names:
            first_waiting.setdefault(name, claim.spec)
        result[claim.spec] = Admission(False, short, text)
    return result


def _budgeted(claim: Claim, budgets: Mapping[str, Budget]) -> list[str]:
    return [name for name in claim.downstream if name in budgets]


@dataclass(frozen=True, slots=True)
class BudgetLoad:
    """A budgeted system in the plan: its budget and the unfinished specs that list it."""

    name: str
    limit: int
    specs: tuple[tuple[str, int], ...]  # (spec, max_active_runs) in queue order

    @property
    def requested(self) -> int:
        return sum(n for _, n in self.specs)

    def text(self) -> str:
        listed = ", ".join(f"{s} {n}" for s, n in self.specs) or "no unfinished spec"
        return f"{self.name} budget {self.limit}: {listed} ({self.requested} requested; at most {self.limit} at once)"

    def as_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "max_active_runs": self.limit,
            "requested": self.requested,
            "specs": [{"spec": s, "max_active_runs": n} for s, n in self.specs],
        }
