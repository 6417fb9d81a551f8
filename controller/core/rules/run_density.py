"""How many runs a day a DAG's timetable makes at most, read from its `timetable_summary` (pure).

A bound, not a count: a cron expression's minutes times its hours (its day fields only leave days out), a
timedelta's runs in 24 hours. It sizes a dry run's first sub-range, so a year of a daily DAG is one dry run
and a minutely one is not asked for weeks at once; a summary it cannot read (a custom timetable, a
`relativedelta`, assets only) leaves the fixed first span to find the rate.
"""

from __future__ import annotations

import math
import re

PRESETS = {  # Airflow's cron presets (`airflow.utils.dates.cron_presets`), as runs a day at most
    "@hourly": 24,
    "@daily": 1,
    "@weekly": 1,
    "@monthly": 1,
    "@quarterly": 1,
    "@yearly": 1,
    "@annually": 1,
}
_MINUTES, _HOURS = 60, 24
# str(timedelta): "0:30:00", "1 day, 0:00:00", "2 days, 6:00:00.500000"
_DELTA = re.compile(r"(?:(\d+) days?, )?(\d+):([0-5]\d):([0-5]\d(?:\.\d+)?)")
_STEP = re.compile(r"(\*|\d+(?:-\d+)?)(?:/(\d+))?")


def runs_a_day_at_most(summary: str | None) -> float | None:
    """The most runs a day the timetable summary allows, or None when it is not a cron, a preset or a
    timedelta (several crons joined by ", " add up; "Asset or …" is its time schedule's)."""
    if summary is None:
        return None
    text = summary.strip().removeprefix("Asset or ")
    parts = [_one(part) for part in text.split(", ")] if not _DELTA.fullmatch(text) else [_one(text)]
    return None if not parts or any(p is None for p in parts) else sum(p for p in parts if p is not None)


def _one(text: str) -> float | None:
    if text in PRESETS:
        return float(PRESETS[text])
    delta = _DELTA.fullmatch(text)
    if delta is not None:
        days, hours, minutes, seconds = delta.groups()
        total = int(days or 0) * 86400 + int(hours) * 3600 + int(minutes) * 60 + float(seconds)
        return 86400 / total if total > 0 else None
    fields = text.split()
    if len(fields) != 5:  # not a five-field cron (a custom timetable's summary, or seconds we do not read)
        return None
    minutes, hours = _field(fields[0], _MINUTES), _field(fields[1], _HOURS)
    return None if minutes is None or hours is None else float(minutes * hours)


def _field(text: str, size: int) -> int | None:
    """How many values a cron field can take at most: '*' all, '*/n' every n-th, 'a-b/n', 'a', lists."""
    total = 0
    for item in text.split(","):
        match = _STEP.fullmatch(item)
        if match is None:
            return None
        span, step = match.group(1), int(match.group(2) or 1)
        if step == 0:
            return None
        if span == "*":
            low, high = 0, size - 1
        elif "-" in span:
            low, high = (int(v) for v in span.split("-"))
        else:
            low = high = int(span)
            high = size - 1 if match.group(2) else high  # 'a/n': from a to the end, every n-th
        if high < low:
            return None
        total += math.ceil((high - low + 1) / step)
    return min(total, size)
