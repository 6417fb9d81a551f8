"""A downstream system's metric analysis as the policy declares it, and the observations of its query (pure).

`parse_analysis` builds the value only from an analysis without problems (`analysis_problems`, which `validate`
reports); `Analysis` cannot be built with equal or crossed thresholds, so a constant value never flaps.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any

from controller.core.documents.diagnostics import PathPart
from controller.core.documents.escaping import plain
from controller.errors import truncate

DEFAULT_RESUME_FACTOR = 0.9  # the default resume threshold: 10 % on the safe side of the pause threshold
_DURATION = re.compile(r"^(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?$")


class Direction(StrEnum):
    ABOVE = "above"  # high values are load (CPU): pause_above, resume_below
    BELOW = "below"  # low values are load (free slots): pause_below, resume_above


@dataclass(frozen=True, slots=True)
class Analysis:
    """One system's analysis, as the policy states it (resume threshold already defaulted)."""

    system: str
    url_env: str
    query: str
    direction: Direction
    pause_at: float
    resume_at: float
    max_sample_age: timedelta
    for_passes: int = 1
    min_pause: timedelta = timedelta(0)
    pause_after: timedelta | None = None  # on_inconclusive.pause_after; None: inconclusive never pauses
    throttle_at: float | None = None  # throttle_above (direction ABOVE only)
    throttle_max_active_runs: int | None = None

    def __post_init__(self) -> None:
        numbers = [self.pause_at, self.resume_at, *([] if self.throttle_at is None else [self.throttle_at])]
        if not all(math.isfinite(n) for n in numbers):
            raise ValueError(f"{self.system}: thresholds must be finite numbers")
        if not self.under(self.pause_at, self.resume_at):
            raise ValueError(f"{self.system}: the resume threshold must be strictly on the safe side of the pause one")
        if (self.throttle_at is None) != (self.throttle_max_active_runs is None):
            raise ValueError(f"{self.system}: throttle_above and throttle_max_active_runs go together")
        if self.throttle_at is not None and (self.direction is Direction.BELOW or self.throttle_at >= self.pause_at):
            raise ValueError(f"{self.system}: throttle_above must be below pause_above")
        if self.for_passes < 1 or self.max_sample_age <= timedelta(0) or self.min_pause < timedelta(0):
            raise ValueError(f"{self.system}: `for` >= 1, max_sample_age > 0 and min_pause_minutes >= 0")

    def over(self, limit: float, value: float) -> bool:
        """`value` is strictly past `limit` on the loaded side."""
        return value > limit if self.direction is Direction.ABOVE else value < limit

    def under(self, limit: float, value: float) -> bool:
        """`value` is strictly past `limit` on the safe side."""
        return value < limit if self.direction is Direction.ABOVE else value > limit

    @property
    def signs(self) -> tuple[str, str]:
        """How a value past the pause threshold, and one past the resume threshold, compare: (">", "<")."""
        return (">", "<") if self.direction is Direction.ABOVE else ("<", ">")

    @property
    def thresholds(self) -> dict[str, float | int]:
        """The limits by their policy names (for reasons and the audit)."""
        if self.direction is Direction.ABOVE:
            found: dict[str, float | int] = {"pause_above": self.pause_at, "resume_below": self.resume_at}
        else:
            found = {"pause_below": self.pause_at, "resume_above": self.resume_at}
        if self.throttle_at is not None and self.throttle_max_active_runs is not None:
            found |= {"throttle_above": self.throttle_at, "throttle_max_active_runs": self.throttle_max_active_runs}
        return found


def default_resume(direction: Direction, pause_at: float) -> float:
    """0.9 × pause_above for a positive limit; in general 10 % of its size on the safe side (equal for 0)."""
    step = abs(pause_at) * (1 - DEFAULT_RESUME_FACTOR)
    return pause_at - step if direction is Direction.ABOVE else pause_at + step


# --- observations ------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Sample:
    """One finite value and the time Prometheus stamped it with (UTC)."""

    value: float
    time: datetime

    def __post_init__(self) -> None:
        if not math.isfinite(self.value):
            raise ValueError("a sample's value is a finite number (NaN and ±Inf are inconclusive)")
        if self.time.tzinfo is None:
            raise ValueError("a sample's time carries its offset")


@dataclass(frozen=True, slots=True)
class Inconclusive:
    """The load could not be known; `reason` says why, for a human ("sample 5m old > max_sample_age 2m")."""

    reason: str


Observation = Sample | Inconclusive


@dataclass(frozen=True, slots=True)
class Series:
    """One series of an instant query's answer, as decoded: its labels, value and time."""

    labels: tuple[tuple[str, str], ...]
    value: float
    time: datetime


def observe_series(series: Sequence[Series]) -> Observation:
    """The one sample of an answer; no series, several series or a value that is not a number are inconclusive."""
    if not series:
        return Inconclusive("the query returned no series (a stopped exporter, or a selector that matches nothing)")
    if len(series) > 1:
        common = set.intersection(*(set(s.labels) for s in series))  # shown: the labels that tell them apart
        shown = ", ".join(_labels(tuple(p for p in s.labels if p not in common)) for s in series[:3])
        shown += ", …" if len(series) > 3 else ""
        return Inconclusive(
            f"the query returned {len(series)} series, one is needed ({shown}); aggregate them, e.g. max(…)"
        )
    return observe_value(series[0].value, series[0].time)


# a sample value as Prometheus writes it in JSON: a string, Go's shortest decimal of a float64 (an exponent, too, as
# other servers of its API write them), or NaN, +Inf, -Inf; Python's float() also reads "1_0", " 1", "infinity"
_SAMPLE_VALUE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|NaN|[+-]Inf")


def sample_value(text: object) -> float | None:
    """The number a sample's value string holds, by Prometheus' grammar; None when it is not one."""
    if not isinstance(text, str) or _SAMPLE_VALUE.fullmatch(text) is None:
        return None
    return float(text)


def observe_value(value: float, time: datetime) -> Observation:
    if math.isnan(value):
        return Inconclusive("the value is NaN (not a number)")
    if math.isinf(value):
        return Inconclusive(f"the value is {'+' if value > 0 else '-'}Inf")
    return Sample(value, time)


def _labels(labels: tuple[tuple[str, str], ...]) -> str:
    inner = ", ".join(f"{plain(k)}={plain(v)!r}" for k, v in labels[:4]) + (", …" if len(labels) > 4 else "")
    return truncate("{" + inner + "}", 80)


# --- numbers and durations as people write them -------------------------------------------------------------------


def number(value: float) -> str:
    """A threshold or a value, short: 0.95, 0.765, 12, 1250000, 1.5e-07."""
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    return f"{value:.6g}" if abs(value) < 1e6 else f"{value:.0f}"


def parse_duration(text: str) -> timedelta | None:
    """`90s`, `2m`, `1h30m` (Prometheus' units h, m, s, in that order); None if it is not one or is zero."""
    found = _DURATION.match(text)
    if found is None or not text:
        return None
    hours, minutes, seconds = (int(part or 0) for part in found.groups())
    duration = timedelta(hours=hours, minutes=minutes, seconds=seconds)
    return duration if duration > timedelta(0) else None


def format_duration(value: timedelta) -> str:
    """A duration as `parse_duration` reads it, to the second: 5m, 1m30s, 2h, 0s."""
    seconds = max(0, int(value.total_seconds()))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{seconds}s" if seconds else "")
    return text or "0s"


# --- the policy's `analysis` mapping ---------------------------------------------------------------------------

_ENV_NAME = re.compile(r"^[A-Z_][A-Z0-9_]*$")
_URL_LIKE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:|/|@")
Problem = tuple[tuple[PathPart, ...], str, str]  # (path inside `analysis`, what is wrong, how to fix it)


def parse_analysis(system: str, raw: Mapping[str, Any] | None) -> Analysis | None:
    """The system's analysis (None: it has none, or it has problems that `validate` reports)."""
    if raw is None or next(analysis_problems(system, raw), None) is not None:
        return None
    direction = Direction.ABOVE if "pause_above" in raw else Direction.BELOW
    pause_at = float(raw[f"pause_{direction.value}"])
    resume = raw.get("resume_below" if direction is Direction.ABOVE else "resume_above")
    pause_after = raw.get("on_inconclusive", {}).get("pause_after")
    throttle = raw.get("throttle_above")
    return Analysis(
        system=system,
        url_env=raw["prometheus"]["url_env"],
        query=raw["prometheus"]["query"],
        direction=direction,
        pause_at=pause_at,
        resume_at=default_resume(direction, pause_at) if resume is None else float(resume),
        max_sample_age=_duration(raw["max_sample_age"]),
        for_passes=raw.get("for", 1),
        min_pause=timedelta(minutes=raw.get("min_pause_minutes", 0)),
        pause_after=None if pause_after is None else _duration(pause_after),
        throttle_at=None if throttle is None else float(throttle),
        throttle_max_active_runs=raw.get("throttle_max_active_runs"),
    )


def _duration(text: str) -> timedelta:
    found = parse_duration(text)
    if found is None:  # the schema's pattern let it through: the two disagree
        raise ValueError(f"{text!r} is not a duration")
    return found


def analysis_problems(system: str, raw: Mapping[str, Any]) -> Iterator[Problem]:
    """What is wrong with one system's analysis, in the order of its fields."""
    yield from _url_env(system, raw["prometheus"]["url_env"])
    for path in (("max_sample_age",), ("on_inconclusive", "pause_after")):
        text = raw.get(path[0]) if len(path) == 1 else raw.get(path[0], {}).get(path[1])
        if text is not None and parse_duration(text) is None:
            yield path, f"{'.'.join(map(str, path))} {text!r} of {system} is zero", "write a duration like 90s or 2m"
    above, below = raw.get("pause_above"), raw.get("pause_below")
    if above is not None and below is not None:
        yield (
            ("pause_below",),
            f"analysis of {system} sets both pause_above and pause_below",
            "keep one: pause_above when high values are load (CPU, queue depth), pause_below when low ones are "
            "(free slots)",
        )
        return
    if above is None and below is None:
        yield (
            (),
            f"analysis of {system} sets neither pause_above nor pause_below",
            "add `pause_above: 0.85` (pause when the query's value is higher) or `pause_below:` (when it is lower)",
        )
        return
    direction = Direction.ABOVE if above is not None else Direction.BELOW
    yield from _resume(system, raw, direction)
    yield from _throttle(system, raw, direction)


def _url_env(system: str, name: str) -> Iterator[Problem]:
    if _ENV_NAME.match(name):
        return
    where = ("prometheus", "url_env")
    if _URL_LIKE.search(name):  # never echoed: a URL in a file may carry credentials
        yield (
            where,
            f"url_env of {system} holds an address; it names the environment variable that holds it",
            "put the URL into an environment variable and name it, e.g. `url_env: BACKFILLCTL_PROMETHEUS_URL`",
        )
        return
    yield (
        where,
        f"url_env {name!r} of {system} is not an environment variable name",
        "use upper-case letters, digits and '_', not starting with a digit, e.g. BACKFILLCTL_PROMETHEUS_URL",
    )


def _resume(system: str, raw: Mapping[str, Any], direction: Direction) -> Iterator[Problem]:
    pause_key = f"pause_{direction.value}"
    resume_key, wrong_key = ("resume_below", "resume_above")[:: 1 if direction is Direction.ABOVE else -1]
    if wrong_key in raw:
        yield (
            (wrong_key,),
            f"{wrong_key} does not go with {pause_key} in the analysis of {system}",
            f"write {resume_key} (the value the load must get back {resume_key.removeprefix('resume_')} to resume)",
        )
        return
    pause_at, given = float(raw[pause_key]), raw.get(resume_key)
    resume_at = default_resume(direction, pause_at) if given is None else float(given)
    safe = resume_at < pause_at if direction is Direction.ABOVE else resume_at > pause_at
    if safe:
        return
    side = "below" if direction is Direction.ABOVE else "above"
    if given is None:
        yield (
            (pause_key,),
            f"{pause_key} {number(pause_at)} of {system} leaves no room for the default resume threshold "
            f"(10 % of {number(pause_at)} is 0): it would flap between pause and resume",
            f"set {resume_key} explicitly, {side} {number(pause_at)}",
        )
        return
    yield (
        (resume_key,),
        f"{resume_key} {number(resume_at)} is not {side} {pause_key} {number(pause_at)} in the analysis of {system}: "
        "it would flap between pause and resume",
        f"set {resume_key} {side} {number(pause_at)} (default: {number(default_resume(direction, pause_at))}), "
        "or remove it",
    )


def _throttle(system: str, raw: Mapping[str, Any], direction: Direction) -> Iterator[Problem]:
    above, runs = raw.get("throttle_above"), raw.get("throttle_max_active_runs")
    if above is None and runs is None:
        return
    if direction is Direction.BELOW:
        yield (
            ("throttle_above" if above is not None else "throttle_max_active_runs",),
            f"throttling goes with pause_above; the analysis of {system} pauses below a value",
            "remove throttle_above and throttle_max_active_runs, or use pause_above",
        )
        return
    if above is None or runs is None:
        present, missing = ("throttle_above", "throttle_max_active_runs")[:: 1 if runs is None else -1]
        yield (
            (present,),
            f"{present} of {system} needs {missing}",
            "throttle_above is the value above which a chunked spec's next chunk runs with throttle_max_active_runs",
        )
        return
    if float(above) >= float(raw["pause_above"]):
        yield (
            ("throttle_above",),
            f"throttle_above {number(above)} is not below pause_above {number(raw['pause_above'])} in the "
            f"analysis of {system}: it would pause before it throttles",
            f"set throttle_above below {number(raw['pause_above'])}",
        )
