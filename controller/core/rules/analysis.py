"""Metric-driven analysis of a downstream system, pure: no I/O, no clock, no environment.

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

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any, ClassVar

from controller.core.documents.escaping import plain
from controller.core.model.analysis import (
    Analysis,
    Observation,
    Sample,
    format_duration,
    number,
)

_QUERY_SHOWN = 120  # a query longer than this is cut in reasons (the audit keeps it whole)
# a sample stamped later than now by more than this is not believed: it would be fresh for as long as it is ahead
MAX_FUTURE_SKEW = timedelta(seconds=60)


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


class LoadAction(StrEnum):
    RESUME = "resume"
    THROTTLE = "throttle"
    HOLD = "hold"
    PAUSE = "pause"
    INCONCLUSIVE = "inconclusive"
    FAIL_CLOSED = "fail-closed"

    @property
    def creates(self) -> bool:
        """Whether a spec listing the system may be created (or its next chunk) and a guard pause lifted."""
        return self in (LoadAction.RESUME, LoadAction.THROTTLE)

    @property
    def pauses(self) -> bool:
        """Whether running managed backfills of specs listing the system are paused."""
        return self in (LoadAction.PAUSE, LoadAction.FAIL_CLOSED)


@dataclass(frozen=True, slots=True)
class Verdict:
    system: str
    action: LoadAction
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
        if -age > MAX_FUTURE_SKEW:
            ahead = (
                f"sample stamped {format_duration(-age)} in the future (more than {format_duration(MAX_FUTURE_SKEW)} "
                "ahead): the clock of Prometheus or of backfillctl is wrong"
            )
            return _inconclusive(config, previous, ahead, now)
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
            return _verdict(config, LoadAction.PAUSE, f"waiting: {load}, resumes {back} {resume}", sample), state
        until = previous.paused_since + config.min_pause
        if now < until:
            why = f"waiting: {load} {back} {resume}, paused at least until {_hhmm(until)}"
            return _verdict(config, LoadAction.PAUSE, why, sample), state
        return _running(config, sample, replace(state, paused_since=None, over=0), f"resuming: {load} {back} {resume}")
    if over and count >= config.for_passes:
        paused = replace(state, paused_since=now)
        return _verdict(config, LoadAction.PAUSE, f"waiting: {load} {past} {pause}", sample), paused
    if over:
        why = f"holding: {load} {past} {pause}, {count} of {config.for_passes} passes before pausing"
        return _verdict(config, LoadAction.HOLD, why, sample), state
    return _running(config, sample, state, f"ok: {load}, pauses {past} {pause}")


def _running(config: Analysis, sample: Sample, state: AnalysisState, why: str) -> tuple[Verdict, AnalysisState]:
    if config.throttle_at is not None and sample.value > config.throttle_at:
        why = (
            f"throttled: {config.system} load {number(sample.value)} > {number(config.throttle_at)}, next chunk at "
            f"max_active_runs {config.throttle_max_active_runs}"
        )
        return _verdict(config, LoadAction.THROTTLE, why, sample), state
    return _verdict(config, LoadAction.RESUME, why, sample), state


def _inconclusive(config: Analysis, previous: AnalysisState, why: str, now: datetime) -> tuple[Verdict, AnalysisState]:
    since = previous.inconclusive_since or now
    state = replace(previous, inconclusive_since=since)
    what = f"{config.system}: {why}"
    if config.pause_after is None:
        return _verdict(config, LoadAction.INCONCLUSIVE, f"inconclusive: {what}", None, why), state
    if now - since >= config.pause_after:
        lasted = f"inconclusive for {format_duration(now - since)} >= pause_after {format_duration(config.pause_after)}"
        state = replace(state, paused_since=previous.paused_since or now)
        return _verdict(config, LoadAction.FAIL_CLOSED, f"fail-closed: {what}; {lasted}", None, why), state
    pausing = f"pausing at {_hhmm(since + config.pause_after)} if it stays so"
    return _verdict(config, LoadAction.INCONCLUSIVE, f"inconclusive: {what}; {pausing}", None, why), state


def _verdict(
    config: Analysis, action: LoadAction, why: str, sample: Sample | None, inconclusive: str | None = None
) -> Verdict:
    query = config.query if len(config.query) <= _QUERY_SHOWN else config.query[: _QUERY_SHOWN - 1] + "…"
    return Verdict(
        config.system, action, f"{why} ({plain(query)})", config.query, config.thresholds, sample, inconclusive
    )


def _hhmm(value: datetime) -> str:
    return value.astimezone(UTC).strftime("%H:%MZ")
