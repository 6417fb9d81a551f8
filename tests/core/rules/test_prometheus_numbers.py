"""Prometheus' numbers and times read as Prometheus writes them (B3): its number grammar, not Python's `float`, and
a sample stamped in the future beyond a small skew is inconclusive. Pure parts, which the mutation gate runs."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from controller.core.model.analysis import Analysis, Direction, Inconclusive, Sample, sample_value
from controller.core.rules.analysis import MAX_FUTURE_SKEW, NEW_STATE, LoadAction, evaluate

# --- Prometheus' numbers ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("0", 0.0),
        ("0.5", 0.5),
        ("-12.25", -12.25),
        ("1250000", 1250000.0),
        ("1e+06", 1e6),  # servers of Prometheus' API that write an exponent
        ("1.5E-07", 1.5e-7),
        (".5", 0.5),
        ("5.", 5.0),
        ("+3", 3.0),
        ("+Inf", float("inf")),
        ("-Inf", float("-inf")),
    ],
)
def test_sample_values_as_prometheus_writes_them(text: str, value: float) -> None:
    assert sample_value(text) == value


def test_nan_is_a_value_too() -> None:
    found = sample_value("NaN")
    assert found is not None
    assert found != found  # NaN: the analysis says it is inconclusive, by its own rule


@pytest.mark.parametrize(
    "text",
    [
        "1_0",  # Python's digit grouping
        " 1",
        "1 ",
        "1\n",
        "infinity",
        "Infinity",
        "inf",
        "Inf",  # Prometheus always signs it
        "nan",
        "NAN",
        "0x1p-2",  # Go's hex float
        "١",  # an Arabic-Indic digit: Python's float() reads it
        "",
        "-",
        "e5",
        "1e",
        "--1",
    ],
)
def test_forms_only_python_reads_are_not_numbers(text: str) -> None:
    assert sample_value(text) is None


@pytest.mark.parametrize("value", [1, 1.0, None, ["1"], b"1"])
def test_a_value_that_is_not_a_string_is_not_one(value: object) -> None:
    assert sample_value(value) is None


# --- a sample from the future -----------------------------------------------------------------------------------

NOW = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
CPU = Analysis(
    system="warehouse",
    url_env="BACKFILLCTL_PROMETHEUS_URL",
    query="max(cpu)",
    direction=Direction.ABOVE,
    pause_at=0.85,
    resume_at=0.7,
    max_sample_age=timedelta(minutes=2),
)


def test_a_sample_stamped_in_the_future_beyond_the_skew_is_inconclusive() -> None:
    assert timedelta(seconds=60) == MAX_FUTURE_SKEW
    ahead = Sample(0.1, NOW + MAX_FUTURE_SKEW + timedelta(seconds=1))
    verdict, state = evaluate(CPU, NEW_STATE, ahead, NOW)
    assert verdict.action is LoadAction.INCONCLUSIVE
    assert verdict.inconclusive == (
        "sample stamped 1m1s in the future (more than 1m ahead): the clock of Prometheus or of backfillctl is wrong"
    )
    assert state.last_sample is None  # never counted: a sample from the future would stay fresh for that long
    assert state.inconclusive_since == NOW


@pytest.mark.parametrize("ahead", [timedelta(0), timedelta(seconds=30), MAX_FUTURE_SKEW])
def test_a_sample_within_the_skew_is_read(ahead: timedelta) -> None:
    verdict, _ = evaluate(CPU, NEW_STATE, Sample(0.1, NOW + ahead), NOW)
    assert verdict.action is LoadAction.RESUME


def test_a_stale_sample_is_still_inconclusive() -> None:
    verdict, _ = evaluate(CPU, NEW_STATE, Sample(0.1, NOW - timedelta(minutes=3)), NOW)
    assert verdict.inconclusive == "sample 3m old > max_sample_age 2m"
    assert re.fullmatch(r"inconclusive: warehouse: .*", verdict.reason)
    assert not isinstance(Inconclusive("x"), Sample)
