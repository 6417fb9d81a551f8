"""The collector is off through a command and each of its passes, collects between passes, and is given back as
it was found, except by the console script, whose process ends with the command."""

from __future__ import annotations

import gc
import subprocess
import sys
from collections.abc import Iterator

import pytest

import controller.cli as cli
from controller.commands.runtime import collector


@pytest.fixture(autouse=True)
def _collector_on() -> Iterator[None]:
    gc.enable()
    yield
    gc.enable()


def test_a_command_runs_with_it_off_and_between_passes_it_is_on_and_has_collected() -> None:
    seen: list[tuple[str, bool]] = []
    with collector.command():
        seen.append(("start-up", gc.isenabled()))
        with collector.Passes() as passes:
            for n in (1, 2):
                seen.append((f"pass {n}", gc.isenabled()))
                with passes.between():
                    seen.append((f"after pass {n}", gc.isenabled()))
                    cycle: list[object] = []
                    cycle.append(cycle)
                    count = gc.get_count()[0]
            seen.append(("after the passes", gc.isenabled()))
        seen.append(("after the loop", gc.isenabled()))
    assert seen == [
        ("start-up", False),
        ("pass 1", False),
        ("after pass 1", True),
        ("pass 2", False),
        ("after pass 2", True),
        ("after the passes", False),
        ("after the loop", False),
    ]
    assert count < 700  # the young generation was collected when the wait began (700: the default threshold)
    assert gc.isenabled()


def test_a_command_that_fails_gives_it_back() -> None:
    seen: list[bool] = []

    def command() -> None:
        with collector.command():
            seen.append(gc.isenabled())
            raise RuntimeError("the command failed")

    with pytest.raises(RuntimeError, match="the command failed"):
        command()
    assert (seen, gc.isenabled()) == ([False], True)


def test_a_caller_that_had_it_off_finds_it_off_and_no_wait_turns_it_on() -> None:
    gc.disable()
    with collector.command(), collector.Passes() as passes, passes.between():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_passes_outside_a_command_leave_it_as_found() -> None:
    with collector.Passes() as passes:
        assert not gc.isenabled()
        with passes.between():
            assert gc.isenabled()
    assert gc.isenabled()


def test_main_runs_the_command_with_it_off_and_gives_it_back(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[bool] = []

    def command(args: list[str]) -> int:
        seen.append(gc.isenabled())
        return 0

    monkeypatch.setattr(cli, "_main", command)
    assert cli.main(["--version"]) == 0
    assert (seen, gc.isenabled()) == ([False], True)


def test_the_console_scripts_process_ends_with_the_collector_still_off() -> None:
    """What the process does after its command is exit: a collection then would only free what exit frees, and
    the exit's own collection skips what is frozen."""
    probe = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: print('collector on at exit:', gc.isenabled(), 'frozen:', gc.get_freeze_count() > 0))"
        "\n"
        "sys.argv = ['backfillctl', '--version']\n"
        "from controller.cli import entry\n"
        "entry()\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout.splitlines()[1:]) == (0, ["collector on at exit: False frozen: True"])
