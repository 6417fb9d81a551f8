"""The test command's two tracks (scripts/test): the real scripts/test runs in a copy of the repo's layout whose
tools are stubs that log what they were asked and exit as the test says, so what runs, in which order, and which
failure fails the command are checked exactly, in a second, without the suite itself."""

from __future__ import annotations

import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LINES = ["3.1.8", "3.2.2", "3.4.0b2"]

# a stub logs its name and arguments, sleeps $STUB_SLEEP_<key> seconds, then exits with $STUB_FAIL_<key> (0 if
# unset); the key names the step
STUB = """#!/usr/bin/env bash
echo "{name} $*" >> "$STUB_LOG"
key=""
case "$*" in
  *"-m airflow and every_line"*) key="LINE_${{BACKFILLCTL_TEST_AIRFLOW_VERSION//./_}}" ;;
  *"-m not airflow"*) key="REST" ;;
  *"-m airflow"*) key="AIRFLOW" ;;
  *scripts/mutation*) key="MUTATION" ;;
esac
pause="STUB_SLEEP_$key"
sleep "${{!pause:-0}}"
var="STUB_FAIL_$key"
exit "${{!var:-0}}"
"""


def _stub(path: Path, name: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(STUB.format(name=name), encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


@pytest.fixture
def layout(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    shutil.copy(ROOT / "scripts" / "test", repo / "scripts" / "test")
    _stub(repo / "scripts" / "bootstrap", "bootstrap")
    for tool in ("pytest", "python", "ruff", "mypy", "lint-imports"):
        _stub(repo / ".venv" / "bin" / tool, tool)
    for tool in ("chromium", "prometheus"):  # present: the command installs neither
        _stub(tmp_path / "bin" / tool, tool)
    return repo


def environment(
    repo: Path, sleep: dict[str, int] | None = None, given: dict[str, str] | None = None, **fail: int
) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BACKFILLCTL_", "STUB_"))}
    env |= {"PATH": f"{repo.parent / 'bin'}:{env['PATH']}", "STUB_LOG": str(repo.parent / "calls.log")}
    env |= {f"STUB_FAIL_{key}": str(code) for key, code in fail.items()}
    env |= {f"STUB_SLEEP_{key}": str(seconds) for key, seconds in (sleep or {}).items()}
    return env | (given or {})


def run(
    repo: Path, *args: str, sleep: dict[str, int] | None = None, given: dict[str, str] | None = None, **fail: int
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    done = subprocess.run(
        [str(repo / "scripts" / "test"), *args],
        cwd=repo,
        env=environment(repo, sleep, given, **fail),
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    return done, calls_of(repo)


def calls_of(repo: Path) -> list[str]:
    log = repo.parent / "calls.log"
    calls = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return [_without_basetemp(call) for call in calls]


def _without_basetemp(call: str) -> str:
    head, found, tail = call.partition(" --basetemp=")
    return head + (" " + tail.split(" ", 1)[1] if found else "")


# one line's run (its release is in the environment, BACKFILLCTL_TEST_AIRFLOW_VERSION)
LINE = (
    "pytest -m airflow and every_line tests/adapters/airflow/test_contract.py "
    "tests/commands/reconcile/test_every_line_real.py"
)


LINT = [
    "bootstrap ",
    "ruff check controller tests bench scripts",
    "ruff format --check controller tests bench scripts",
    "mypy ",
    "lint-imports ",
]


AIRFLOW = "pytest -n 0 -p no:cacheprovider --durations=15 -m airflow"
REST = "pytest -n 0 -p no:cacheprovider --durations=15 -m not airflow"
MUTATION = "python scripts/mutation --threshold 90"
# a line's timing line: the stubs take no time, but a loaded machine's clock may turn a second during one
LINE_TIME = re.compile(r"^== Airflow (\S+): \d+ s$", re.MULTILINE)


def test_the_whole_suite_runs_each_track_in_order_and_passes(layout: Path) -> None:
    done, calls = run(layout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert calls[:5] == LINT
    tracks = calls[5:]
    assert [call for call in tracks if call in (AIRFLOW, LINE)] == [AIRFLOW, *[LINE] * len(LINES)]
    assert [call for call in tracks if call not in (AIRFLOW, LINE)] == [REST, MUTATION]
    assert "== the Airflow track's log\n== pytest -m airflow (Airflow 3.3.2)\n" in done.stdout
    log = done.stdout.split("== the Airflow track's log\n")[1]  # the lines ran on the Airflow track, after its tests
    assert LINE_TIME.findall(log) == LINES
    assert done.stdout.splitlines()[-1].startswith("== both tracks: ")
    assert done.stderr == ""  # no job-control notice from the Airflow track's process group


def test_each_track_runs_its_own_tests_in_its_own_temp_folder(layout: Path) -> None:
    log = layout.parent / "calls.log"
    done, _ = run(layout)
    assert done.returncode == 0
    pytests = [line for line in log.read_text(encoding="utf-8").splitlines() if line.startswith("pytest -n 0")]
    assert sorted(call.rsplit(" -m ", 1)[1] for call in pytests) == ["airflow", "not airflow"]
    folders = {call.split("--basetemp=")[1].split(" ")[0] for call in pytests}
    assert len(folders) == 2
    assert {Path(folder).name for folder in folders} == {"airflow", "rest"}
    assert not any(Path(folder).parent.exists() for folder in folders)  # the work folder is removed at the end


def test_a_failing_airflow_test_fails_the_command_and_the_other_lines_do_not_run(layout: Path) -> None:
    done, calls = run(layout, AIRFLOW=1)
    assert done.returncode == 1
    assert LINE not in calls
    assert MUTATION in calls  # the other track still runs whole
    assert done.stdout.rstrip().endswith(
        "pytest -m airflow failed (the Airflow track's log above); the other lines did not run"
    )


def test_a_failing_line_fails_the_command_and_stops_the_lines_after_it(layout: Path) -> None:
    done, calls = run(layout, LINE_3_2_2=1)
    assert done.returncode == 1
    assert calls.count(LINE) == 2  # 3.1.8, then 3.2.2 fails: 3.4.0b2 does not start
    assert LINE_TIME.findall(done.stdout) == ["3.1.8"]
    assert "== Airflow 3.2.2" not in done.stdout
    assert done.stdout.rstrip().endswith("every_line: failed on an Airflow line (the Airflow track's log above)")


def test_a_failing_test_of_the_rest_skips_mutation_testing_and_fails_the_command(layout: Path) -> None:
    done, calls = run(layout, REST=1)
    assert done.returncode == 1
    assert MUTATION not in calls
    assert calls.count(LINE) == 3
    assert done.stdout.rstrip().endswith("pytest -m 'not airflow' failed (above); mutation testing did not run")


def test_a_module_below_the_mutation_threshold_fails_the_command(layout: Path) -> None:
    done, _ = run(layout, MUTATION=1)
    assert done.returncode == 1
    assert done.stdout.rstrip().endswith("mutation testing failed (above)")


def test_no_lines_and_no_mutation_testing_when_the_environment_says_so(layout: Path) -> None:
    done, calls = run(layout, given={"BACKFILLCTL_TEST_LINES": "", "BACKFILLCTL_SKIP_MUTATION": "1"})
    assert done.returncode == 0
    assert calls[5:] in ([AIRFLOW, REST], [REST, AIRFLOW])


def test_an_interrupt_stops_both_tracks_and_removes_the_work_folder(layout: Path) -> None:
    """Ctrl-C reaches the terminal's foreground process group: the command and its foreground pytest; the Airflow
    track, a process group of its own, gets it from the command's trap."""
    script = launched(layout, "SIG_DFL", {"AIRFLOW": 30, "REST": 30})  # as a terminal's job starts, whatever CI's does
    try:
        deadline = time.monotonic() + 20
        while len([c for c in calls_of(layout) if c in (AIRFLOW, REST)]) < 2 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert sorted(c for c in calls_of(layout) if c in (AIRFLOW, REST)) == sorted([AIRFLOW, REST])
        started = time.monotonic()
        os.killpg(script.pid, signal.SIGINT)
        stdout, _ = script.communicate(timeout=20)
    finally:
        _stop_all(script, layout)
    assert script.returncode == 130
    assert time.monotonic() - started < 10  # not the stubs' 30 s
    assert LINE not in calls_of(layout)
    assert MUTATION not in calls_of(layout)
    log = (layout.parent / "calls.log").read_text(encoding="utf-8")
    work = Path(log.split("--basetemp=")[1].split(" ")[0]).parent
    assert not work.exists()
    alive = subprocess.run(["pgrep", "-f", str(layout)], capture_output=True, text=True, check=False).stdout
    assert alive == ""  # no stub (nor its sleep's parent) left running
    assert "== both tracks" not in stdout


def test_a_sigint_ignored_since_start_up_still_stops_the_airflow_track_on_sigterm(layout: Path) -> None:
    """A command started where SIGINT is ignored (a background job of a script, as some CI runners start it) cannot
    be interrupted, but SIGTERM still stops both tracks: the trap's SIGINT is ignored, its SIGTERM after 30 s is not."""
    script = launched(layout, "SIG_IGN", {"AIRFLOW": 60, "REST": 1})
    try:
        deadline = time.monotonic() + 20
        while MUTATION not in calls_of(layout) and time.monotonic() < deadline:  # waiting on the Airflow track
            time.sleep(0.1)
        started = time.monotonic()
        script.send_signal(signal.SIGTERM)
        stdout, _ = script.communicate(timeout=50)
    finally:
        _stop_all(script, layout)
    assert script.returncode == 143
    assert 29 < time.monotonic() - started < 45  # SIGINT ignored, then SIGTERM after 30 s, not the stub's 60 s
    assert LINE not in calls_of(layout)
    assert "== both tracks" not in stdout


def launched(layout: Path, sigint: str, sleep: dict[str, int]) -> subprocess.Popen[str]:
    """The command in a process group of its own (as a terminal's job), with SIGINT at `sigint` (`with_sigint`)."""
    return subprocess.Popen(
        [*with_sigint(sigint), str(layout / "scripts" / "test")],
        cwd=layout,
        env=environment(layout, sleep=sleep),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def with_sigint(disposition: str) -> list[str]:
    """A command prefix that sets SIGINT to `disposition` (SIG_DFL, SIG_IGN) and runs the rest in its place: what
    an exec'd program inherits, whatever this test process inherited (a job started in a script's background has
    SIGINT ignored, and so has all it starts)."""
    code = (
        f"import os, signal, sys; signal.signal(signal.SIGINT, signal.{disposition}); "
        "os.execv(sys.argv[1], sys.argv[1:])"
    )
    return [sys.executable, "-c", code]


def _stop_all(script: subprocess.Popen[str], layout: Path) -> None:
    """Whatever a failed assertion left running: the command's process group and its stubs."""
    if script.poll() is None:
        os.killpg(script.pid, signal.SIGKILL)
        script.communicate()
    subprocess.run(["pkill", "-KILL", "-f", str(layout)], check=False)


def test_pytest_arguments_run_one_pytest_over_them_on_two_workers(layout: Path) -> None:
    done, calls = run(layout, "-k", "spec")
    assert done.returncode == 0
    assert calls[5:] == ["pytest -n 2 -k spec", *[LINE] * len(LINES), MUTATION]


def test_the_lint_stage_fails_the_command_before_any_test(layout: Path) -> None:
    (layout / ".venv" / "bin" / "mypy").write_text("#!/usr/bin/env bash\nexit 1\n", encoding="utf-8")
    done, calls = run(layout)
    assert done.returncode == 1
    assert not any(call.startswith("pytest") for call in calls)
