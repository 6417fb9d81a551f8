"""The analysis evaluation (issue 27 §1): exact verdicts and reasons, the state between passes, hysteresis."""

from __future__ import annotations

import itertools
import json
import math
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.model.analysis import (
    Analysis,
    Direction,
    Inconclusive,
    Sample,
    Series,
    analysis_problems,
    default_resume,
    format_duration,
    number,
    observe_series,
    observe_value,
    parse_analysis,
    parse_duration,
)
from controller.core.rules.analysis import NEW_STATE, AnalysisState, LoadAction, evaluate

T0 = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
Q = "max(warehouse_cpu_ratio)"
WAREHOUSE = Analysis(
    system="warehouse",
    url_env="BACKFILLCTL_PROMETHEUS_URL",
    query=Q,
    direction=Direction.ABOVE,
    pause_at=0.85,
    resume_at=0.7,
    max_sample_age=timedelta(minutes=2),
)


def at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def run(config: Analysis, values: list[float | str], step: float = 1.0) -> list[tuple[LoadAction, str]]:
    """Evaluate one pass per value (a string is an inconclusive reason), `step` minutes apart."""
    state, out = NEW_STATE, []
    for index, value in enumerate(values):
        now = at(index * step)
        observation = Inconclusive(value) if isinstance(value, str) else Sample(value, now)
        verdict, state = evaluate(config, state, observation, now)
        out.append((verdict.action, verdict.reason))
    return out


def test_under_the_limit_runs() -> None:
    assert run(WAREHOUSE, [0.5]) == [(LoadAction.RESUME, f"ok: warehouse load 0.5, pauses > 0.85 ({Q})")]


def test_over_the_limit_pauses_and_waits_for_the_resume_threshold() -> None:
    assert run(WAREHOUSE, [0.95, 0.8, 0.69]) == [
        (LoadAction.PAUSE, f"waiting: warehouse load 0.95 > 0.85 ({Q})"),
        (LoadAction.PAUSE, f"waiting: warehouse load 0.8, resumes < 0.7 ({Q})"),
        (LoadAction.RESUME, f"resuming: warehouse load 0.69 < 0.7 ({Q})"),
    ]


def test_exactly_at_a_threshold_is_not_past_it() -> None:
    assert [a for a, _ in run(WAREHOUSE, [0.85, 0.9, 0.7, 0.6999])] == [
        LoadAction.RESUME,
        LoadAction.PAUSE,
        LoadAction.PAUSE,
        LoadAction.RESUME,
    ]


def test_for_holds_creates_before_pausing() -> None:
    config = replace(WAREHOUSE, for_passes=3)
    assert run(config, [0.9, 0.9, 0.5, 0.9, 0.9, 0.9]) == [
        (LoadAction.HOLD, f"holding: warehouse load 0.9 > 0.85, 1 of 3 passes before pausing ({Q})"),
        (LoadAction.HOLD, f"holding: warehouse load 0.9 > 0.85, 2 of 3 passes before pausing ({Q})"),
        (LoadAction.RESUME, f"ok: warehouse load 0.5, pauses > 0.85 ({Q})"),
        (LoadAction.HOLD, f"holding: warehouse load 0.9 > 0.85, 1 of 3 passes before pausing ({Q})"),
        (LoadAction.HOLD, f"holding: warehouse load 0.9 > 0.85, 2 of 3 passes before pausing ({Q})"),
        (LoadAction.PAUSE, f"waiting: warehouse load 0.9 > 0.85 ({Q})"),
    ]


def test_the_same_sample_read_twice_counts_once() -> None:
    config = replace(WAREHOUSE, for_passes=2)
    sample = Sample(0.9, T0)
    first, state = evaluate(config, NEW_STATE, sample, T0)
    again, state = evaluate(config, state, sample, at(1))
    newer, _ = evaluate(config, state, Sample(0.9, at(1)), at(1))
    assert (first.action, again.action, newer.action) == (LoadAction.HOLD, LoadAction.HOLD, LoadAction.PAUSE)
    assert state.over == 1


def test_an_inconclusive_pass_keeps_the_count() -> None:
    config = replace(WAREHOUSE, for_passes=2)
    assert [a for a, _ in run(config, [0.9, "boom", 0.9])] == [
        LoadAction.HOLD,
        LoadAction.INCONCLUSIVE,
        LoadAction.PAUSE,
    ]


def test_min_pause() -> None:
    config = replace(WAREHOUSE, min_pause=timedelta(minutes=10))
    assert run(config, [0.95, 0.5, 0.5], step=6) == [
        (LoadAction.PAUSE, f"waiting: warehouse load 0.95 > 0.85 ({Q})"),
        (LoadAction.PAUSE, f"waiting: warehouse load 0.5 < 0.7, paused at least until 12:10Z ({Q})"),
        (LoadAction.RESUME, f"resuming: warehouse load 0.5 < 0.7 ({Q})"),
    ]


def test_pause_below() -> None:
    resume = default_resume(Direction.BELOW, 10.0)
    slots = replace(
        WAREHOUSE, system="slots", query="min(open_slots)", direction=Direction.BELOW, pause_at=10.0, resume_at=resume
    )
    assert run(slots, [12, 9, 10.5, 11.5]) == [
        (LoadAction.RESUME, "ok: slots load 12, pauses < 10 (min(open_slots))"),
        (LoadAction.PAUSE, "waiting: slots load 9 < 10 (min(open_slots))"),
        (LoadAction.PAUSE, "waiting: slots load 10.5, resumes > 11 (min(open_slots))"),
        (LoadAction.RESUME, "resuming: slots load 11.5 > 11 (min(open_slots))"),
    ]


def test_throttle() -> None:
    config = replace(WAREHOUSE, throttle_at=0.75, throttle_max_active_runs=2, resume_at=0.8)
    throttled = f"throttled: warehouse load 0.78 > 0.75, next chunk at max_active_runs 2 ({Q})"
    assert run(config, [0.78, 0.9, 0.78, 0.5]) == [
        (LoadAction.THROTTLE, throttled),
        (LoadAction.PAUSE, f"waiting: warehouse load 0.9 > 0.85 ({Q})"),
        (LoadAction.THROTTLE, throttled),
        (LoadAction.RESUME, f"ok: warehouse load 0.5, pauses > 0.85 ({Q})"),
    ]


def test_stale_sample_is_inconclusive() -> None:
    verdict, state = evaluate(WAREHOUSE, NEW_STATE, Sample(0.1, T0), at(5))
    assert verdict.action is LoadAction.INCONCLUSIVE
    assert verdict.reason == f"inconclusive: warehouse: sample 5m old > max_sample_age 2m ({Q})"
    assert verdict.inconclusive == "sample 5m old > max_sample_age 2m"
    assert state.inconclusive_since == at(5)
    at_limit, _ = evaluate(WAREHOUSE, NEW_STATE, Sample(0.1, T0), at(2))
    assert at_limit.action is LoadAction.RESUME


def test_fail_closed_after_pause_after_and_back() -> None:
    config = replace(WAREHOUSE, pause_after=timedelta(minutes=10))
    dead = "Prometheus unreachable (ConnectError)"
    assert run(config, [0.5, dead, dead, dead, 0.8, 0.6], step=5) == [
        (LoadAction.RESUME, f"ok: warehouse load 0.5, pauses > 0.85 ({Q})"),
        (LoadAction.INCONCLUSIVE, f"inconclusive: warehouse: {dead}; pausing at 12:15Z if it stays so ({Q})"),
        (LoadAction.INCONCLUSIVE, f"inconclusive: warehouse: {dead}; pausing at 12:15Z if it stays so ({Q})"),
        (LoadAction.FAIL_CLOSED, f"fail-closed: warehouse: {dead}; inconclusive for 10m >= pause_after 10m ({Q})"),
        (LoadAction.PAUSE, f"waiting: warehouse load 0.8, resumes < 0.7 ({Q})"),
        (LoadAction.RESUME, f"resuming: warehouse load 0.6 < 0.7 ({Q})"),
    ]


def test_inconclusive_while_paused_resumes_nothing() -> None:
    verdict, state = evaluate(WAREHOUSE, NEW_STATE, Sample(0.95, T0), T0)
    verdict, state = evaluate(WAREHOUSE, state, Inconclusive("the value is NaN (not a number)"), at(1))
    assert verdict.action is LoadAction.INCONCLUSIVE
    assert not verdict.action.creates
    assert not verdict.action.pauses
    assert state.paused_since == T0


def test_actions_say_what_they_allow() -> None:
    assert {a for a in LoadAction if a.creates} == {LoadAction.RESUME, LoadAction.THROTTLE}
    assert {a for a in LoadAction if a.pauses} == {LoadAction.PAUSE, LoadAction.FAIL_CLOSED}


def test_audit_fields() -> None:
    verdict, _ = evaluate(WAREHOUSE, NEW_STATE, Sample(0.95, T0), at(1))
    assert verdict.audit() == {
        "system": "warehouse",
        "action": "pause",
        "reason": f"waiting: warehouse load 0.95 > 0.85 ({Q})",
        "query": Q,
        "value": 0.95,
        "sample_time": "2026-03-02T12:00:00+00:00",
        "thresholds": {"pause_above": 0.85, "resume_below": 0.7},
        "inconclusive": None,
    }
    json.dumps(verdict.audit())


def test_a_long_query_is_cut_in_the_reason_only() -> None:
    long = "max(" + "a" * 300 + ")"
    verdict, _ = evaluate(replace(WAREHOUSE, query=long), NEW_STATE, Sample(0.1, T0), T0)
    assert verdict.reason.endswith("a…)")
    assert len(verdict.reason) < 200
    assert verdict.query == long


# --- observations ---------------------------------------------------------------------------------------------


def test_series() -> None:
    one = Series((("instance", "a"),), 0.5, T0)
    assert observe_series([one]) == Sample(0.5, T0)
    assert observe_series([]) == Inconclusive(
        "the query returned no series (a stopped exporter, or a selector that matches nothing)"
    )
    two = [one, Series((("instance", "b\n"),), 0.7, T0)]
    assert observe_series(two) == Inconclusive(
        "the query returned 2 series, one is needed ({instance='a'}, {instance='b '}); aggregate them, e.g. max(…)"
    )
    many = [Series((("job", "x"), ("node", str(n))), 1.0, T0) for n in range(5)]
    assert observe_series(many) == Inconclusive(
        "the query returned 5 series, one is needed ({node='0'}, {node='1'}, {node='2'}, …); aggregate them, e.g. "
        "max(…)"
    )


@pytest.mark.parametrize(
    ("value", "reason"),
    [(math.nan, "the value is NaN (not a number)"), (math.inf, "the value is +Inf"), (-math.inf, "the value is -Inf")],
)
def test_not_a_number_is_inconclusive(value: float, reason: str) -> None:
    assert observe_value(value, T0) == Inconclusive(reason)
    with pytest.raises(ValueError, match="finite"):
        Sample(value, T0)


def test_a_sample_time_carries_its_offset() -> None:
    with pytest.raises(ValueError, match="offset"):
        Sample(1.0, datetime(2026, 1, 1))


# --- state --------------------------------------------------------------------------------------------------


def test_state_round_trips_through_json() -> None:
    state = AnalysisState(2, T0, at(1), at(2), None)
    data = json.loads(json.dumps(state.to_json()))
    assert data == {
        "version": 1,
        "over": 2,
        "last_sample": "2026-03-02T12:00:00+00:00",
        "paused_since": "2026-03-02T12:01:00+00:00",
        "last_conclusive": "2026-03-02T12:02:00+00:00",
        "inconclusive_since": None,
    }
    assert AnalysisState.from_json(data) == state
    assert AnalysisState.from_json(NEW_STATE.to_json()) == NEW_STATE


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"version": 2, "over": 0}, "analysis state version 2 is not 1"),
        ({"version": 1, "over": -1}, "over -1 is not a count"),
        ({"version": 1, "over": True}, "over True is not a count"),
        ({"version": 1, "over": 0, "paused_since": "2026-03-02T12:00:00"}, "paused_since '2026-03-02T12:00:00' is"),
        ({"version": 1, "over": 0, "last_sample": 5}, "last_sample 5 is not a date-time"),
    ],
)
def test_state_refuses_what_it_did_not_write(data: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AnalysisState.from_json(data)


# --- durations and numbers -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"), [("90s", 90), ("2m", 120), ("1h30m", 5400), ("1h2m3s", 3723), ("0m", None), ("", None)]
)
def test_durations(text: str, seconds: int | None) -> None:
    found = parse_duration(text)
    assert (None if found is None else found.total_seconds()) == seconds
    if found is not None:
        assert parse_duration(format_duration(found)) == found


def test_numbers() -> None:
    assert [number(v) for v in (0.95, 0.765, 12.0, 1250000.0, 1.5e-7, -3.0)] == [
        "0.95",
        "0.765",
        "12",
        "1250000",
        "1.5e-07",
        "-3",
    ]
    assert format_duration(timedelta(seconds=-3)) == "0s"


# --- the config can only be built with room between its thresholds ----------------------------------------------


def test_equal_or_crossed_thresholds_cannot_be_built() -> None:
    for resume in (0.85, 0.9):
        with pytest.raises(ValueError, match="strictly on the safe side"):
            replace(WAREHOUSE, resume_at=resume)
    with pytest.raises(ValueError, match="finite"):
        replace(WAREHOUSE, pause_at=math.nan)
    with pytest.raises(ValueError, match="go together"):
        replace(WAREHOUSE, throttle_at=0.7)
    with pytest.raises(ValueError, match="below pause_above"):
        replace(WAREHOUSE, throttle_at=0.9, throttle_max_active_runs=1)
    with pytest.raises(ValueError, match="`for` >= 1"):
        replace(WAREHOUSE, for_passes=0)


finite = st.floats(allow_nan=False, allow_infinity=False, min_value=-1e12, max_value=1e12)


def raw_analysis(direction: Direction, pause: float, resume: float | None) -> dict[str, object]:
    raw: dict[str, object] = {
        "prometheus": {"url_env": "PROM", "query": "q"},
        f"pause_{direction.value}": pause,
        "max_sample_age": "2m",
    }
    if resume is not None:
        raw["resume_below" if direction is Direction.ABOVE else "resume_above"] = resume
    return raw


@given(st.sampled_from(Direction), finite, st.none() | finite)
def test_equal_thresholds_are_impossible(direction: Direction, pause: float, resume: float | None) -> None:
    """Whatever a policy states: either validate refuses it, or its resume threshold is strictly safer."""
    raw = raw_analysis(direction, pause, resume)
    problems = list(analysis_problems("s", raw))
    config = parse_analysis("s", raw)
    assert (config is None) == bool(problems)
    if config is not None:
        assert config.resume_at != config.pause_at
        assert config.under(config.pause_at, config.resume_at)


@given(
    st.sampled_from(Direction),
    st.floats(min_value=0.01, max_value=1e6),
    st.floats(min_value=0.01, max_value=0.99),
    st.floats(min_value=-2e6, max_value=2e6),
    st.integers(min_value=1, max_value=4),
    st.integers(min_value=0, max_value=30),
    st.booleans(),
    st.lists(st.booleans(), min_size=1, max_size=30),
)
def test_a_constant_value_never_flaps(
    direction: Direction,
    pause: float,
    gap: float,
    value: float,
    passes: int,
    min_pause: int,
    paused: bool,
    readable: list[bool],
) -> None:
    """With one value throughout (some passes inconclusive, no fail-closed), the system changes between paused and
    running at most once, whatever the state it starts in."""
    resume = pause * (1 - gap) if direction is Direction.ABOVE else pause * (1 + gap)
    config = Analysis(
        "s", "PROM", "q", direction, pause, resume, timedelta(minutes=2), passes, timedelta(minutes=min_pause)
    )
    state = AnalysisState(paused_since=T0) if paused else NEW_STATE
    modes = []
    for index, ok in enumerate(readable):
        now = at(index * 3)
        verdict, state = evaluate(config, state, Sample(value, now) if ok else Inconclusive("x"), now)
        if verdict.action.pauses:
            modes.append("paused")
        elif verdict.action.creates:
            modes.append("running")
    changes = sum(1 for a, b in itertools.pairwise(modes) if a != b)
    assert changes <= 1
