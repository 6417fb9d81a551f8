"""Metric-driven analysis of a downstream system (issue 27 §1), pure: no I/O, no clock, no environment.

A system's `analysis` names one Prometheus instant query and its limits. Each pass the adapter turns the answer
into an observation (a `Sample`, or `Inconclusive` with a reason a human can read) and `evaluate` decides, from
the observation, the state carried from the previous pass and `now`, what the system allows:

- `RESUME`   within the limits: create and resume (a chunked spec at its own concurrency);
- `THROTTLE` over `throttle_above`: create and resume, a chunked spec's next chunk at `throttle_max_active_runs`;
- `HOLD`     over the pause limit for fewer than `for` passes: nothing new is created, nothing is paused yet;
- `PAUSE`    over the pause limit for `for` passes, or paused and not yet back under the resume threshold (or
  within `min_pause_minutes`): nothing new is created and running managed backfills are paused;
- `INCONCLUSIVE` the load is not known: nothing new is created and nothing is resumed;
- `FAIL_CLOSED`  inconclusive for `on_inconclusive.pause_after`: as PAUSE.

Hysteresis: the resume threshold is strictly on the safe side of the pause threshold (`Analysis` cannot be built
otherwise), so a constant value never makes a system flap between PAUSE and RESUME.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, ClassVar

from controller.core.escaping import plain
from controller.errors import truncate

DEFAULT_RESUME_FACTOR = 0.9  # the default resume threshold: 10 % on the safe side of the pause threshold
_DURATION = re.compile(r"^(?:([0-9]+)h)?(?:([0-9]+)m)?(?:([0-9]+)s)?$")
_QUERY_SHOWN = 120  # a query longer than this is cut in reasons (the audit keeps it whole)


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


def observe_value(value: float, time: datetime) -> Observation:
    if math.isnan(value):
        return Inconclusive("the value is NaN (not a number)")
    if math.isinf(value):
        return Inconclusive(f"the value is {'+' if value > 0 else '-'}Inf")
    return Sample(value, time)


def _labels(labels: tuple[tuple[str, str], ...]) -> str:
    inner = ", ".join(f"{plain(k)}={plain(v)!r}" for k, v in labels[:4]) + (", …" if len(labels) > 4 else "")
    return truncate("{" + inner + "}", 80)


# --- state between passes -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AnalysisState:
    """What one system's evaluation carries to the next pass (stored as JSON, `to_json`/`from_json`)."""

    VERSION: ClassVar[int] = 1

    over: int = 0  # consecutive conclusive samples past the pause threshold (an inconclusive pass keeps the count)
    last_sample: datetime | None = None  # the newest sample counted: the same sample read twice counts once
    paused_since: datetime | None = None  # paused by this analysis (a pause or a fail-closed) since
    last_conclusive: datetime | None = None
    inconclusive_since: datetime | None = None  # the first inconclusive pass of the current streak

    def to_json(self) -> dict[str, Any]:
        times = ("last_sample", "paused_since", "last_conclusive", "inconclusive_since")
        return {"version": self.VERSION, "over": self.over} | {name: _iso(getattr(self, name)) for name in times}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> AnalysisState:
        """The state `to_json` wrote; a newer or broken one raises ValueError (the caller starts afresh)."""
        if data.get("version") != cls.VERSION:
            raise ValueError(f"analysis state version {data.get('version')!r} is not {cls.VERSION}")
        over = data.get("over")
        if not isinstance(over, int) or isinstance(over, bool) or over < 0:
            raise ValueError(f"analysis state: over {over!r} is not a count")
        return cls(
            over,
            _time(data, "last_sample"),
            _time(data, "paused_since"),
            _time(data, "last_conclusive"),
            _time(data, "inconclusive_since"),
        )


NEW_STATE = AnalysisState()


def _iso(value: datetime | None) -> str | None:
    return None if value is None else value.astimezone(UTC).isoformat()


def _time(data: Mapping[str, Any], name: str) -> datetime | None:
    raw = data.get(name)
    if raw is None:
        return None
    parsed = datetime.fromisoformat(raw) if isinstance(raw, str) else None
    if parsed is None or parsed.tzinfo is None:
        raise ValueError(f"analysis state: {name} {raw!r} is not a date-time with an offset")
    return parsed.astimezone(UTC)


# --- the verdict ------------------------------------------------------------------------------------------------


class Action(StrEnum):
    RESUME = "resume"
    THROTTLE = "throttle"
    HOLD = "hold"
    PAUSE = "pause"
    INCONCLUSIVE = "inconclusive"
    FAIL_CLOSED = "fail-closed"

    @property
    def creates(self) -> bool:
        """Whether a spec listing the system may be created (or its next chunk) and a guard pause lifted."""
        return self in (Action.RESUME, Action.THROTTLE)

    @property
    def pauses(self) -> bool:
        """Whether running managed backfills of specs listing the system are paused."""
        return self in (Action.PAUSE, Action.FAIL_CLOSED)


@dataclass(frozen=True, slots=True)
class Verdict:
    system: str
    action: Action
    reason: str  # one line: "waiting: warehouse load 0.95 > 0.85 (max(warehouse_cpu_ratio))"
    query: str
    thresholds: Mapping[str, float | int]
    sample: Sample | None = None
    inconclusive: str | None = None  # why the load is not known

    def audit(self) -> dict[str, Any]:
        """The fields an audit record of a pause or resume carries (JSON)."""
        return {
            "system": self.system,
            "action": self.action.value,
            "reason": self.reason,
            "query": self.query,
            "value": None if self.sample is None else self.sample.value,
            "sample_time": None if self.sample is None else _iso(self.sample.time),
            "thresholds": dict(self.thresholds),
            "inconclusive": self.inconclusive,
        }


def evaluate(
    config: Analysis, previous: AnalysisState, observation: Observation, now: datetime
) -> tuple[Verdict, AnalysisState]:
    """The system's verdict for this pass, and the state the next pass starts from."""
    if isinstance(observation, Sample):
        age = now - observation.time
        if age > config.max_sample_age:
            stale = f"sample {format_duration(age)} old > max_sample_age {format_duration(config.max_sample_age)}"
            return _inconclusive(config, previous, stale, now)
        return _conclusive(config, previous, observation, now)
    return _inconclusive(config, previous, observation.reason, now)


def _conclusive(
    config: Analysis, previous: AnalysisState, sample: Sample, now: datetime
) -> tuple[Verdict, AnalysisState]:
    over = config.over(config.pause_at, sample.value)
    fresh = previous.last_sample is None or sample.time > previous.last_sample
    count = (previous.over + 1 if fresh else max(previous.over, 1)) if over else 0
    state = replace(
        previous,
        over=count,
        last_sample=sample.time if fresh else previous.last_sample,
        last_conclusive=now,
        inconclusive_since=None,
    )
    load, (past, back) = f"{config.system} load {number(sample.value)}", config.signs
    pause, resume = number(config.pause_at), number(config.resume_at)
    if previous.paused_since is not None:
        if not config.under(config.resume_at, sample.value):
            return _verdict(config, Action.PAUSE, f"waiting: {load}, resumes {back} {resume}", sample), state
        until = previous.paused_since + config.min_pause
        if now < until:
            why = f"waiting: {load} {back} {resume}, paused at least until {_hhmm(until)}"
            return _verdict(config, Action.PAUSE, why, sample), state
        return _running(config, sample, replace(state, paused_since=None, over=0), f"resuming: {load} {back} {resume}")
    if over and count >= config.for_passes:
        paused = replace(state, paused_since=now)
        return _verdict(config, Action.PAUSE, f"waiting: {load} {past} {pause}", sample), paused
    if over:
        why = f"holding: {load} {past} {pause}, {count} of {config.for_passes} passes before pausing"
        return _verdict(config, Action.HOLD, why, sample), state
    return _running(config, sample, state, f"ok: {load}, pauses {past} {pause}")


def _running(config: Analysis, sample: Sample, state: AnalysisState, why: str) -> tuple[Verdict, AnalysisState]:
    if config.throttle_at is not None and sample.value > config.throttle_at:
        why = (
            f"throttled: {config.system} load {number(sample.value)} > {number(config.throttle_at)}, next chunk at "
            f"max_active_runs {config.throttle_max_active_runs}"
        )
        return _verdict(config, Action.THROTTLE, why, sample), state
    return _verdict(config, Action.RESUME, why, sample), state


def _inconclusive(config: Analysis, previous: AnalysisState, why: str, now: datetime) -> tuple[Verdict, AnalysisState]:
    since = previous.inconclusive_since or now
    state = replace(previous, inconclusive_since=since)
    what = f"{config.system}: {why}"
    if config.pause_after is None:
        return _verdict(config, Action.INCONCLUSIVE, f"inconclusive: {what}", None, why), state
    if now - since >= config.pause_after:
        lasted = f"inconclusive for {format_duration(now - since)} >= pause_after {format_duration(config.pause_after)}"
        state = replace(state, paused_since=previous.paused_since or now)
        return _verdict(config, Action.FAIL_CLOSED, f"fail-closed: {what}; {lasted}", None, why), state
    pausing = f"pausing at {_hhmm(since + config.pause_after)} if it stays so"
    return _verdict(config, Action.INCONCLUSIVE, f"inconclusive: {what}; {pausing}", None, why), state


def _verdict(
    config: Analysis, action: Action, why: str, sample: Sample | None, inconclusive: str | None = None
) -> Verdict:
    query = config.query if len(config.query) <= _QUERY_SHOWN else config.query[: _QUERY_SHOWN - 1] + "…"
    return Verdict(
        config.system, action, f"{why} ({plain(query)})", config.query, config.thresholds, sample, inconclusive
    )


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


def _hhmm(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%H:%MZ")
