"""The most runs a day a timetable summary allows: what sizes a dry run's first part."""

from __future__ import annotations

from datetime import timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.rules.chunks import FIRST_SPAN, TARGET_RUNS, first_span
from controller.core.rules.run_density import runs_a_day_at_most


@pytest.mark.parametrize(
    ("summary", "most"),
    [
        ("0 0 * * *", 1),
        ("0 * * * *", 24),
        ("* * * * *", 1440),
        ("*/15 * * * *", 96),
        ("0,30 9-17 * * 1-5", 18),
        ("5/20 */6 * * *", 12),  # minutes 5, 25, 45; hours 0, 6, 12, 18
        ("0 0 1 */3 *", 1),  # day fields leave days out: a bound, not a count
        ("@daily", 1),
        ("@hourly", 24),
        ("0 0 * * *, 0 12 * * *", 2),  # MultipleCronTriggerTimetable joins its crons with ", "
        ("Asset or 0 * * * *", 24),
        ("1 day, 0:00:00", 1),
        ("2 days, 0:00:00", 0.5),
        ("0:30:00", 48),
        ("6:00:00.500000", 86400 / 21600.5),
    ],
)
def test_a_cron_a_preset_or_a_timedelta_bounds_the_runs_a_day(summary: str, most: float) -> None:
    assert runs_a_day_at_most(summary) == pytest.approx(most)


@pytest.mark.parametrize(
    "summary",
    [
        None,
        "None",
        "@once",
        "@continuous",
        "Asset",
        "relativedelta(months=+1)",
        "0 0 * * * *",  # six fields: not read
        "H 0 * * *",
        "*/0 * * * *",
        "30-10 * * * *",
        "0:00:00",
        "0 0 * * *, MyTimetable",  # one part unknown: the whole is
    ],
)
def test_a_summary_it_cannot_read_leaves_the_rate_unknown(summary: str | None) -> None:
    assert runs_a_day_at_most(summary) is None


def test_the_first_part_holds_the_target_at_the_bound_and_the_fixed_span_without_one() -> None:
    assert first_span(1) == timedelta(days=TARGET_RUNS)
    assert first_span(1440) == timedelta(days=TARGET_RUNS / 1440)
    assert first_span(24, target=51) == timedelta(days=51 / 24)
    assert first_span(None) == first_span(0) == FIRST_SPAN


@given(st.text(max_size=40))
def test_any_summary_is_a_positive_bound_or_unknown(summary: str) -> None:
    most = runs_a_day_at_most(summary)
    assert most is None or most > 0
