"""Load guards (pure, table-driven): windows across midnight, DST and week ends, freezes, the scheduler, budgets."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from controller.core.model.guards import (
    Budget,
    Freeze,
    Guard,
    GuardKind,
    SchedulerGuard,
    SchedulerHealth,
    Window,
    valid_timezone,
)
from controller.core.rules.guards import (
    BudgetLoad,
    Claim,
    Stop,
    active_freeze,
    admit,
    guard_stop,
    in_windows,
    next_opening,
    scheduler_problem,
)

BERLIN = "Europe/Berlin"
WEEKNIGHTS = Window(("mon", "tue", "wed", "thu", "fri"), "20:00", "06:00", BERLIN)
WEEKEND = Window(("sat", "sun"), "00:00", "24:00", BERLIN)
DAILY = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
YEAR_END = Freeze(datetime(2026, 12, 28, tzinfo=UTC), datetime(2027, 1, 4, tzinfo=UTC), "year-end close")


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


WINDOW_CASES = [
    # (windows, now, open?, the stop's detail when closed)
    ([WEEKNIGHTS], "2026-12-01T13:00+01:00", False, "until 20:00 Europe/Berlin"),  # Tue afternoon
    ([WEEKNIGHTS], "2026-12-01T19:59+01:00", False, "until 20:00 Europe/Berlin"),
    ([WEEKNIGHTS], "2026-12-01T20:00+01:00", True, None),  # opens inclusive
    ([WEEKNIGHTS], "2026-12-02T05:59+01:00", True, None),  # across midnight: Tuesday's window, Wednesday morning
    ([WEEKNIGHTS], "2026-12-02T06:00+01:00", False, "until 20:00 Europe/Berlin"),  # closes exclusive
    ([WEEKNIGHTS], "2026-12-05T05:00+01:00", True, None),  # Friday's window runs into Saturday
    ([WEEKNIGHTS], "2026-12-05T12:00+01:00", False, "until Mon 20:00 Europe/Berlin"),  # week end: next is Monday
    ([WEEKNIGHTS], "2026-12-07T04:00+01:00", False, "until 20:00 Europe/Berlin"),  # no Sunday window into Monday
    ([WEEKNIGHTS, WEEKEND], "2026-12-05T12:00+01:00", True, None),
    ([WEEKNIGHTS, WEEKEND], "2026-12-06T23:59+01:00", True, None),  # end 24:00
    ([WEEKNIGHTS, WEEKEND], "2026-12-07T00:00+01:00", False, "until 20:00 Europe/Berlin"),  # 24:00 is exclusive
    # the same wall times in another zone are other instants: 20:00 in Berlin is 19:00 UTC in winter
    ([WEEKNIGHTS], "2026-12-01T19:30+00:00", True, None),
    ([Window(("tue",), "20:00", "21:00", "UTC")], "2026-12-01T19:30+00:00", False, "until 20:00 UTC"),
    # spring forward (Berlin, 2026-03-29 02:00 CET → 03:00 CEST): 02:30 does not exist and opens at 03:30 CEST
    ([Window(DAILY, "02:30", "04:00", BERLIN)], "2026-03-29T03:15+02:00", False, "until 03:30 Europe/Berlin"),
    ([Window(DAILY, "02:30", "04:00", BERLIN)], "2026-03-29T03:30+02:00", True, None),
    ([WEEKEND], "2026-03-29T23:59+02:00", True, None),  # a 23-hour Sunday still ends at local midnight
    ([Window(("sat",), "20:00", "06:00", BERLIN)], "2026-03-29T05:59+02:00", True, None),  # 9 real hours long
    ([Window(("sat",), "20:00", "06:00", BERLIN)], "2026-03-29T06:00+02:00", False, "until Sat 20:00 Europe/Berlin"),
    # fall back (Berlin, 2026-10-25 03:00 CEST → 02:00 CET): the night window is 11 real hours long
    ([Window(("sat",), "20:00", "06:00", BERLIN)], "2026-10-25T05:59+01:00", True, None),
    ([Window(("sat",), "20:00", "06:00", BERLIN)], "2026-10-25T06:00+01:00", False, "until Sat 20:00 Europe/Berlin"),
    ([Window(("sat",), "20:00", "06:00", BERLIN)], "2026-10-24T19:59+02:00", False, "until 20:00 Europe/Berlin"),
    # New York's DST change is on another day than Berlin's
    ([Window(DAILY, "01:00", "02:00", "America/New_York")], "2026-03-08T01:30-05:00", True, None),
    (
        [Window(DAILY, "01:00", "02:00", "America/New_York")],
        "2026-03-08T03:00-04:00",
        False,
        "until Mon 01:00 America/New_York",
    ),
]


@pytest.mark.parametrize(("windows", "now", "is_open", "detail"), WINDOW_CASES)
def test_windows(windows: list[Window], now: str, is_open: bool, detail: str | None) -> None:
    assert in_windows(windows, at(now)) is is_open
    stop = guard_stop(windows, [], at(now))
    assert stop == (None if is_open else Stop(Guard(GuardKind.WINDOW), detail or ""))


def test_next_opening_is_the_earliest_instant_of_all_windows() -> None:
    now = at("2026-12-04T21:00+01:00")  # Friday night, inside the weeknight window
    opening = next_opening([WEEKNIGHTS, WEEKEND], now)
    assert opening == (at("2026-12-05T00:00+01:00"), WEEKEND)


def test_no_windows_means_always() -> None:
    assert guard_stop([], [], at("2026-12-01T13:00+01:00")) is None


def test_freeze_overrides_an_open_window_and_ends_exclusively() -> None:
    inside = at("2026-12-29T21:00+01:00")  # a Tuesday night: the window is open
    assert in_windows([WEEKNIGHTS], inside)
    assert guard_stop([WEEKNIGHTS], [YEAR_END], inside) == Stop(
        Guard(GuardKind.FREEZE, "year-end close"), "until 2027-01-04T00:00:00Z"
    )
    assert guard_stop([], [YEAR_END], datetime(2026, 12, 28, tzinfo=UTC)) is not None  # from is inclusive
    assert guard_stop([], [YEAR_END], datetime(2027, 1, 4, tzinfo=UTC)) is None  # to is exclusive
    assert guard_stop([], [YEAR_END], inside).paused == "paused by freeze 'year-end close' until 2027-01-04T00:00:00Z"  # type: ignore[union-attr]


def test_overlapping_freezes_report_the_one_that_ends_last() -> None:
    longer = Freeze(datetime(2026, 12, 30, tzinfo=UTC), datetime(2027, 1, 10, tzinfo=UTC), "migration")
    assert active_freeze([YEAR_END, longer], datetime(2027, 1, 1, tzinfo=UTC)) == longer
    assert active_freeze([YEAR_END, longer], datetime(2026, 12, 29, tzinfo=UTC)) == YEAR_END


def test_freeze_then_scheduler_then_window() -> None:
    closed = at("2026-12-01T13:00+01:00")
    assert guard_stop([WEEKNIGHTS], [], closed, "scheduler status 'unhealthy'") == Stop(
        Guard(GuardKind.SCHEDULER), "(scheduler status 'unhealthy')"
    )
    stop = guard_stop([WEEKNIGHTS], [], closed)
    assert stop is not None
    assert (stop.paused, stop.queued) == (
        "paused by window until 20:00 Europe/Berlin",
        "queued by window until 20:00 Europe/Berlin",
    )


NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("health", "guard", "problem"),
    [
        (SchedulerHealth("healthy", NOW), SchedulerGuard(True), None),
        (SchedulerHealth("unhealthy", NOW), SchedulerGuard(True), "scheduler status 'unhealthy'"),
        (SchedulerHealth(None, None), SchedulerGuard(True), "scheduler status 'unknown'"),
        (SchedulerHealth("healthy", None), SchedulerGuard(True, 60), "scheduler reports no heartbeat"),
        (SchedulerHealth("healthy", datetime(2026, 12, 1, 11, 59, tzinfo=UTC)), SchedulerGuard(True, 60), None),
        (
            SchedulerHealth("healthy", datetime(2026, 12, 1, 11, 58, 29, tzinfo=UTC)),
            SchedulerGuard(True, 60),
            "scheduler heartbeat 91 s old (limit 60 s)",
        ),
    ],
)
def test_scheduler_problem(health: SchedulerHealth, guard: SchedulerGuard, problem: str | None) -> None:
    assert scheduler_problem(health, guard, NOW) == problem


def test_timezones() -> None:
    assert valid_timezone("Europe/Berlin")
    assert valid_timezone("UTC")
    assert not valid_timezone("Europe/Berlim")
    assert not valid_timezone("../etc/passwd")


WAREHOUSE = {"warehouse": Budget("warehouse", 8), "api": Budget("api", 2)}


def test_admission_in_queue_order_without_starvation() -> None:
    holding = [Claim("a", ("warehouse",), 3), Claim("b", ("warehouse", "other"), 3)]
    asking = [
        Claim("c", ("warehouse",), 4),  # 6 + 4 > 8: waits
        Claim("d", ("warehouse",), 1),  # would fit, but c waits first: never starves c
        Claim("e", ("api",), 2),  # another budget: admitted
        Claim("f", ("api",), 1),  # api is full now
        Claim("g", ("unbudgeted",), 50),  # lists no budgeted system
    ]
    result = admit(WAREHOUSE, holding, asking)
    assert {name: (a.admitted, a.budget, a.reason) for name, a in result.items()} == {
        "c": (False, "warehouse", "waiting for warehouse budget (6 of 8 in use by a, b)"),
        "d": (False, "warehouse", "waiting for warehouse budget (6 of 8 in use by a, b; c waits first)"),
        "e": (True, "", ""),
        "f": (False, "api", "waiting for api budget (2 of 2 in use by e)"),
        "g": (True, "", ""),
    }


def test_admission_fills_a_budget_exactly() -> None:
    budgets = {"w": Budget("w", 4)}
    asking = [Claim("x", ("w",), 2), Claim("y", ("w",), 2), Claim("z", ("w",), 2)]
    result = admit(budgets, [], asking)
    assert [result[n].admitted for n in "xyz"] == [True, True, False]
    assert result["z"].reason == "waiting for w budget (4 of 4 in use by x, y)"


def test_a_waiting_spec_blocks_every_budget_it_lists() -> None:
    budgets = {"w": Budget("w", 4), "api": Budget("api", 4)}
    holding = [Claim("a", ("w",), 3)]
    asking = [Claim("b", ("w", "api"), 2), Claim("c", ("api",), 1)]
    result = admit(budgets, holding, asking)
    assert result["b"].reason == "waiting for w budget (3 of 4 in use by a)"
    assert result["c"].reason == "waiting for api budget (0 of 4 in use; b waits first)"


def test_a_weekly_window_whose_opening_passed_today_opens_next_week() -> None:
    tuesdays = Window(("tue",), "09:00", "10:00", "UTC")
    now = at("2026-12-01T11:00+00:00")  # a Tuesday, after today's opening
    assert next_opening([tuesdays], now) == (at("2026-12-08T09:00+00:00"), tuesdays)
    assert guard_stop([tuesdays], [], now) == Stop(Guard(GuardKind.WINDOW), "until Tue 09:00 UTC")


def test_a_window_that_ends_where_it_starts_lasts_a_day() -> None:
    daily = Window(("tue",), "12:00", "12:00", "UTC")
    assert in_windows([daily], at("2026-12-02T11:59+00:00"))  # Wednesday before noon: still Tuesday's window
    assert not in_windows([daily], at("2026-12-02T12:00+00:00"))


def test_a_window_without_days_never_opens() -> None:
    never = Window((), "00:00", "24:00", "UTC")
    assert guard_stop([never], [], NOW) == Stop(Guard(GuardKind.WINDOW), "(no window opens within a week)")


def test_a_heartbeat_exactly_at_the_limit_is_healthy() -> None:
    beat = SchedulerHealth("healthy", datetime(2026, 12, 1, 11, 59, tzinfo=UTC))
    assert scheduler_problem(beat, SchedulerGuard(True, 60), NOW) is None


def test_every_later_waiter_names_the_first_one() -> None:
    budgets = {"w": Budget("w", 2)}
    result = admit(
        budgets, [Claim("a", ("w",), 2)], [Claim("b", ("w",), 1), Claim("c", ("w",), 1), Claim("d", ("w",), 1)]
    )
    assert [result[n].reason for n in "bcd"] == [
        "waiting for w budget (2 of 2 in use by a)",
        "waiting for w budget (2 of 2 in use by a; b waits first)",
        "waiting for w budget (2 of 2 in use by a; b waits first)",
    ]


def test_budget_load_lines() -> None:
    assert BudgetLoad("w", 4, ()).text() == "w budget 4: no unfinished spec (0 requested; at most 4 at once)"
    assert BudgetLoad("w", 4, (("a", 3), ("b", 2))).as_json() == {
        "name": "w",
        "max_active_runs": 4,
        "requested": 5,
        "specs": [{"spec": "a", "max_active_runs": 3}, {"spec": "b", "max_active_runs": 2}],
    }


def test_the_next_opening_at_an_opening_instant_is_the_one_after() -> None:
    opens = at("2026-12-01T20:00+01:00")
    assert next_opening([WEEKNIGHTS], opens) == (at("2026-12-02T20:00+01:00"), WEEKNIGHTS)


# --- the guard's stored text ------------------------------------------------------------------------------

GUARD_TEXTS = [
    # every guard as bindings, plans and audit records store it (byte-identical to the releases before Guard)
    (Guard(GuardKind.WINDOW), "window"),
    (Guard(GuardKind.SCHEDULER), "scheduler guard"),
    (Guard(GuardKind.FREEZE, "year-end close"), "freeze 'year-end close'"),
    (Guard(GuardKind.FREEZE, "Bob's close"), 'freeze "Bob\'s close"'),
    (Guard(GuardKind.ANALYSIS, "warehouse"), "analysis warehouse"),
    (Guard(GuardKind.BUDGET, "warehouse"), "budget warehouse"),
    (Guard(GuardKind.STOP), "stop"),
    (Guard(GuardKind.HALT), "halt"),
    (Guard(GuardKind.CODE_CHANGED), "code-changed"),
]


@pytest.mark.parametrize(("guard", "text"), GUARD_TEXTS, ids=[t for _, t in GUARD_TEXTS])
def test_a_guard_reads_back_from_its_stored_text(guard: Guard, text: str) -> None:
    assert (str(guard), Guard.from_text(text)) == (text, guard)


def test_every_guard_kind_has_a_stored_text() -> None:
    assert {g.kind for g, _ in GUARD_TEXTS} == set(GuardKind)


@given(st.text(min_size=1))
def test_any_freeze_reason_round_trips(reason: str) -> None:
    guard = Guard(GuardKind.FREEZE, reason)
    assert Guard.from_text(str(guard)) == guard


@pytest.mark.parametrize(
    "text", ["", "freeze", "freeze year-end", "freeze 3", "analysis", "budget", "paused", "Window"]
)
def test_a_text_no_release_wrote_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="not a guard: "):
        Guard.from_text(text)
