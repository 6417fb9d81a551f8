"""`alongside`: two reads at once, whose failures surface as if they had run in order, after both finished."""

from __future__ import annotations

import threading

import pytest

from controller.commands.runtime.concurrency import alongside


def test_both_run_at_once_and_their_results_come_back_in_order() -> None:
    both = threading.Barrier(2, timeout=3)  # broken (an error) unless the two wait at the same time

    def first() -> str:
        both.wait()
        return "first"

    def second() -> int:
        both.wait()
        return 2

    assert alongside(first, second) == ("first", 2)


def test_the_firsts_error_is_raised_only_after_the_second_finished() -> None:
    finished: list[str] = []
    release = threading.Event()

    def first() -> None:
        raise ValueError("the dry run failed")

    def second() -> None:
        release.wait(3)
        finished.append("range read")

    threading.Timer(0.2, release.set).start()
    with pytest.raises(ValueError, match=r"^the dry run failed$"):
        alongside(first, second)
    assert finished == ["range read"]


def test_the_seconds_error_is_raised_when_the_first_succeeds() -> None:
    def second() -> None:
        raise KeyError("details")

    with pytest.raises(KeyError, match="details"):
        alongside(lambda: "ok", second)


def test_when_both_fail_the_firsts_error_wins() -> None:
    def first() -> None:
        raise ValueError("first")

    def second() -> None:
        raise KeyError("second")

    with pytest.raises(ValueError, match=r"^first$"):
        alongside(first, second)
