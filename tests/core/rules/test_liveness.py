"""The dead-man's check (pure): overdue after two intervals without a good pass, with the exact words."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from controller.core.rules.liveness import Liveness, span_text

NOW = datetime(2026, 12, 6, 12, tzinfo=UTC)
EVERY = timedelta(minutes=15)


@pytest.mark.parametrize(
    ("last", "every", "overdue"),
    [
        (NOW - timedelta(minutes=30), EVERY, False),  # exactly two intervals: not yet
        (NOW - timedelta(minutes=30, seconds=1), EVERY, True),
        (NOW - timedelta(days=9), None, False),  # no interval declared: nothing to say
        (None, EVERY, True),  # expected, never recorded
        (None, None, False),
    ],
)
def test_overdue_after_two_intervals(last: datetime | None, every: timedelta | None, overdue: bool) -> None:
    assert Liveness(last, every, NOW).overdue is overdue
    assert (Liveness(last, every, NOW).warning() is not None) is overdue


def test_the_warning_says_how_long_and_what_to_check() -> None:
    late = Liveness(NOW - timedelta(hours=3, minutes=10), EVERY, NOW)
    assert late.warning() == (
        "the last good reconcile pass was 3h 10m ago (2026-12-06T08:50:00Z), and one is expected every 15m: check "
        "that scheduled reconciles still run (GitHub delays, drops and disables scheduled workflows) or that the "
        "--watch process is alive"
    )
    assert Liveness(None, EVERY, NOW).warning() == (
        "no reconcile pass has been recorded, and one is expected every 15m"
    )
    assert late.as_json() == {
        "last_good_pass": "2026-12-06T08:50:00+00:00",
        "expect_every_seconds": 900,
        "overdue": True,
    }


@pytest.mark.parametrize(
    ("span", "text"),
    [
        (timedelta(seconds=59), "0m"),
        (timedelta(minutes=45), "45m"),
        (timedelta(hours=2), "2h"),
        (timedelta(days=2, hours=4), "2d 4h"),
        (timedelta(days=1, minutes=1), "1d 1m"),
    ],
)
def test_span_text(span: timedelta, text: str) -> None:
    assert span_text(span) == text


def test_the_json_of_a_liveness_never_recorded_and_without_an_interval() -> None:
    assert Liveness(None, None, NOW).as_json() == {
        "last_good_pass": None,
        "expect_every_seconds": None,
        "overdue": False,
    }
    assert span_text(timedelta(seconds=119)) == "1m"
