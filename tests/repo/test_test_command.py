"""The test command's two tracks (scripts/test): the real scripts/test runs in a copy of the repo's layout whose
tools are stubs that log what they were asked and exit as the test says, so what runs, in which order, and which
failure fails the command are checked exactly, in a second, without the suite itself."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
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


def run(
    repo: Path, *args: str, sleep: dict[str, int] | None = None, **fail: int
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    log = repo.parent / "calls.log"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("BACKFILLCTL_", "STUB_"))}
    env |= {"PATH": f"{repo.parent / 'bin'}:{env['PATH']}", "STUB_LOG": str(log)}
    env |= {f"STUB_FAIL_{key}": str(code) for key, code in fail.items()}
    env |= {f"STUB_SLEEP_{key}": str(seconds) for key, seconds in (sleep or {}).items()}
    done = subprocess.run(
        [str(repo / "scripts" / "test"), *args], cwd=repo, env=env, capture_output=True, text=True, check=False
    )
    calls = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return done, [_without_basetemp(call) for call in calls]


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


def test_the_whole_suite_runs_each_track_in_order_and_passes(layout: Path) -> None:
    done, calls = run(layout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert calls[:5] == LINT
    tracks = calls[5:]
    assert [call for call in tracks if call == "pytest -n 0 --durations=15 -m airflow"] == [
        "pytest -n 0 --durations=15 -m airflow"
    ]
    assert [call for call in tracks if call == LINE] == [LINE] * len(LINES)  # the other lines, once
    rest = [call for call in tracks if call not in ("pytest -n 0 --durations=15 -m airflow", LINE)]
    assert rest == ["pytest -n 0 --durations=15 -m not airflow", "python scripts/mutation --threshold 90"]
    assert "== the Airflow track's log\n== pytest -m airflow (Airflow 3.3.2)\n" in done.stdout
    assert [line for line in done.stdout.splitlines() if line.startswith("== Airflow ")] == [
        f"== Airflow {v}: 0 s" for v in LINES
    ]


def _lines_ran_in_the_airflow_track(stdout: str) -> bool:
    return stdout.index("== Airflow 3.1.8: ") > stdout.index("== the Airflow track's log")


def test_the_track_that_ends_first_runs_the_other_lines(layout: Path) -> None:
    slow_airflow, _ = run(layout, sleep={"AIRFLOW": 2})
    assert slow_airflow.returncode == 0
    assert not _lines_ran_in_the_airflow_track(slow_airflow.stdout)
    slow_mutation, _ = run(layout, sleep={"MUTATION": 2})
    assert slow_mutation.returncode == 0
    assert _lines_ran_in_the_airflow_track(slow_mutation.stdout)


def test_each_track_runs_its_own_tests_in_its_own_temp_folder(layout: Path) -> None:
    log = layout.parent / "calls.log"
    done, _ = run(layout)
    assert done.returncode == 0
    pytests = [
        line for line in log.read_text(encoding="utf-8").splitlines() if line.startswith("pytest -n 0 --durations=15")
    ]
    assert sorted(call.rsplit(" -m ", 1)[1] for call in pytests) == ["airflow", "not airflow"]
    folders = {call.split("--basetemp=")[1].split(" ")[0] for call in pytests}
    assert len(folders) == 2
    assert {Path(folder).name for folder in folders} == {"airflow", "rest"}
    assert not any(Path(folder).parent.exists() for folder in folders)  # the work folder is removed at the end


def test_a_failing_airflow_test_fails_the_command(layout: Path) -> None:
    done, calls = run(layout, AIRFLOW=1)
    assert done.returncode == 1
    assert calls.count(LINE) == 3  # the other lines still run, once
    assert "python scripts/mutation --threshold 90" in calls  # the other track still runs whole
    assert done.stdout.rstrip().endswith("pytest -m airflow failed (the Airflow track's log above)")


def test_a_failing_line_fails_the_command_and_stops_the_lines_after_it(layout: Path) -> None:
    done, calls = run(layout, LINE_3_2_2=1)
    assert done.returncode == 1
    assert calls.count(LINE) == 2  # 3.1.8, then 3.2.2 fails: 3.4.0b2 does not start
    assert "== Airflow 3.1.8: 0 s" in done.stdout
    assert "== Airflow 3.2.2" not in done.stdout
    assert done.stdout.rstrip().endswith("every_line: failed on an Airflow line (above)")


def test_a_failing_test_of_the_rest_skips_mutation_testing_and_fails_the_command(layout: Path) -> None:
    done, calls = run(layout, REST=1)
    assert done.returncode == 1
    assert not any("scripts/mutation" in call for call in calls)
    assert calls.count(LINE) == 3
    assert done.stdout.rstrip().endswith("pytest -m 'not airflow' failed (above); mutation testing did not run")


def test_a_module_below_the_mutation_threshold_fails_the_command(layout: Path) -> None:
    done, _ = run(layout, MUTATION=1)
    assert done.returncode == 1
    assert done.stdout.splitlines()[-1].startswith("== both tracks: ")  # scripts/mutation tells its own failure


def test_pytest_arguments_run_one_pytest_over_them_on_two_workers(layout: Path) -> None:
    done, calls = run(layout, "-k", "spec")
    assert done.returncode == 0
    assert calls[5:] == ["pytest -n 2 -k spec", *[LINE] * len(LINES), "python scripts/mutation --threshold 90"]


def test_the_lint_stage_fails_the_command_before_any_test(layout: Path) -> None:
    (layout / ".venv" / "bin" / "mypy").write_text("#!/usr/bin/env bash\nexit 1\n", encoding="utf-8")
    done, calls = run(layout)
    assert done.returncode == 1
    assert not any(call.startswith("pytest") for call in calls)
