"""What the CLI writes to stderr: under `--log-format json` one JSON object per line, whatever writes it (log
records with their tracebacks, the CLI's error reports and hints, usage errors, Python warnings, a thread's
uncaught exception, any other line); in text every log line starts with its UTC time. Secrets are redacted from
every object.

The commands run in-process (`controller.cli.main`) on the reconcile bench's fake Airflow.
"""

from __future__ import annotations

import logging
import sys
import threading
import traceback
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller import cli
from controller.adapters import logsetup
from controller.cli import main
from controller.commands.reconcile.reconciler import Reconciler
from controller.commands.runtime.session import Shutdown
from controller.commands.runtime.settings import Settings
from tests.commands.reconcile.harness import Bench, in_process
from tests.fakes.airflow import FakeAirflow
from tests.support.logcheck import TEXT_LINE, json_objects, message_of, reports

SECRET = "https://hooks.example/T0KEN-of-the-team"  # a webhook URL: its variable's name marks it secret


@pytest.fixture
def bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Bench]:
    b = Bench(tmp_path, fake=FakeAirflow())
    b.spec("fine")
    in_process(b, monkeypatch)
    monkeypatch.setenv("BACKFILLCTL_WEBHOOK_TEAM", SECRET)
    monkeypatch.setattr(Shutdown, "install", lambda self: None)  # --watch in-process: pytest keeps its signals
    yield b
    b.close()


def test_an_unexpected_error_in_the_watch_loop_is_one_json_object_with_its_traceback_redacted(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def broken(self: Reconciler, **_kw: object) -> None:
        raise RuntimeError(f"a bug met {SECRET}")

    monkeypatch.setattr(Reconciler, "run_once", broken)
    assert main(["--log-format", "json", "reconcile", "--watch", "--interval", "1"]) == 3
    out, err = capsys.readouterr()
    *_, crash = json_objects(err)
    assert (crash["level"], crash["event"], crash["error"], crash["exit_code"]) == (
        "error",
        "unexpected error: RuntimeError; this is a bug in backfillctl.",
        "RuntimeError",
        3,
    )
    assert crash["exc_info"].startswith("Traceback (most recent call last):\n")
    assert crash["exc_info"].endswith("RuntimeError: a bug met [secure]")
    assert Path(crash["crash_log"]).read_text().endswith(f"RuntimeError: a bug met {SECRET}\n")  # the file: as raised
    assert SECRET not in out + err
    Path(crash["crash_log"]).unlink()


def test_a_record_with_an_exception_carries_its_traceback_as_one_redacted_string(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with logsetup.session("json", secrets=["hunter2-secret"]):
        try:
            raise ValueError("the server echoed hunter2-secret")
        except ValueError:
            logging.getLogger("controller.test").exception("pass error: %s", "x")
    (line,) = json_objects(capsys.readouterr().err)
    assert (line["event"], line["error"]) == ("pass error: x", "ValueError")
    assert line["exc_info"].startswith("Traceback (most recent call last):\n")
    assert line["exc_info"].endswith("ValueError: the server echoed [secure]")


def test_the_cli_error_and_its_hint_are_one_json_object_without_the_secret(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BACKFILLCTL_STORE_URL", "postgresql://ops:CANARY-5ecret@127.0.0.1:abc/x")
    assert main(["--log-format", "json", "reconcile", "--once"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    (report,) = json_objects(err)
    assert report == {
        "event": "BACKFILLCTL_STORE_URL='postgresql://ops:***@127.0.0.1:abc/x' has a port that is not a number from 1 "
        "to 65535",
        "exit_code": 1,
        "hint": "use sqlite:///path/to/state.db or postgresql://USER@HOST:5432/DBNAME; percent-encode an @ / ? # in "
        "the user name or password (%40 %2F %3F %23)",
        "level": "error",
        "logger": "controller.cli",
        "time": report["time"],
    }


@pytest.mark.parametrize(
    ("args", "event", "usage", "hint"),
    [
        (
            ["--log-format", "json", "reconcile", "--interval", "0"],
            "Invalid value for '--interval': 0 is not between 1 and 86400 seconds",
            "Usage: backfillctl reconcile [OPTIONS]",
            "Try 'backfillctl reconcile --help' for help.",
        ),
        (
            ["--log-format", "json", "reconcile", "--once", "--watch"],
            "Invalid value: --once cannot be combined with --watch or --until-complete",
            "Usage: backfillctl reconcile [OPTIONS]",
            "Try 'backfillctl reconcile --help' for help.",
        ),
        (
            ["--log-format=json", "nosuch"],
            "No such command 'nosuch'.",
            "Usage: backfillctl [OPTIONS] COMMAND [ARGS]...",
            "Try 'backfillctl --help' for help.",
        ),
    ],
    ids=["option-value", "in-the-command", "before-the-command"],
)
def test_a_usage_error_is_one_json_object_with_exit_2(
    bench: Bench, capsys: pytest.CaptureFixture[str], args: list[str], event: str, usage: str, hint: str
) -> None:
    assert main(args) == 2
    (report,) = json_objects(capsys.readouterr().err)
    assert (report["level"], report["event"], report["usage"], report["hint"], report["exit_code"]) == (
        "error",
        event,
        usage,
        hint,
        2,
    )


def test_a_value_typer_refuses_for_log_format_itself_leaves_clicks_text(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--log-format", "yaml", "plan"]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "Error: Invalid value for '--log-format': Value error, 'yaml' is not one of 'text', 'json'."
    )


def _warning_on_load(monkeypatch: pytest.MonkeyPatch) -> None:
    """The settings warn while they load, as a library could (pytest's `error` filter set aside for it)."""
    load = Settings.from_env

    def warned(env: object) -> Settings:
        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn(f"an old setting near {SECRET}", UserWarning, stacklevel=1)
        return load(env)  # type: ignore[arg-type]

    monkeypatch.setattr(Settings, "from_env", staticmethod(warned))


def test_a_python_warning_is_one_json_object(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _warning_on_load(monkeypatch)
    assert main(["--log-format", "json", "reconcile", "--once"]) == 0
    warned = [o for o in json_objects(capsys.readouterr().err) if o["logger"] == "py.warnings"]
    assert [(o["level"], "UserWarning: an old setting near [secure]" in o["event"]) for o in warned] == [
        ("warning", True)
    ]


def test_a_python_warning_is_one_text_log_line_with_its_time(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    _warning_on_load(monkeypatch)
    assert main(["reconcile", "--once"]) == 0
    lines = [message_of(line) for line in capsys.readouterr().err.splitlines()]
    assert [("UserWarning: an old setting near [secure]" in line) for line in lines] == [True, False]  # then NOT_GIT


def test_an_uncaught_exception_in_a_thread_is_one_json_object(capsys: pytest.CaptureFixture[str]) -> None:
    def fail() -> None:
        raise OSError("the status page's socket broke")

    with logsetup.session("json"):
        worker = threading.Thread(target=fail, name="backfillctl-status")
        worker.start()
        worker.join()
    (line,) = json_objects(capsys.readouterr().err)
    assert (line["level"], line["event"], line["error"]) == (
        "error",
        "unexpected error in thread backfillctl-status",
        "OSError",
    )
    assert line["exc_info"].endswith("OSError: the status page's socket broke")


def test_lines_written_to_stderr_are_json_objects_with_their_hints_and_details(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with logsetup.session("json", secrets=[SECRET]):
        print(f"error: the receiver {SECRET} refused\n  hint: check it\n  seq 4\n", file=sys.stderr)
        print("stuck: b is queued", end="", file=sys.stderr)  # no newline: said when the command ends
    assert [
        (o["level"], o["event"], o.get("hint"), o.get("details")) for o in json_objects(capsys.readouterr().err)
    ] == [
        ("error", "error: the receiver [secure] refused", "check it", ["seq 4"]),
        ("warning", "stuck: b is queued", None, None),
    ]


def test_a_pass_error_line_is_a_json_object(bench: Bench, capsys: pytest.CaptureFixture[str]) -> None:
    bench.spec("typo", dag="demo_dayly")
    assert main(["--log-format", "json", "reconcile", "--once"]) == 1
    said = [(level, event) for level, event, _ in reports(capsys.readouterr().err) if level == "error"]
    assert said == [("error", "error: typo: DAG demo_dayly does not exist in Airflow; did you mean demo_daily?")]


def test_interrupted_is_a_json_object_with_exit_130(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def interrupted(self: Reconciler, **_kw: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(Reconciler, "run_once", interrupted)
    assert main(["--log-format", "json", "reconcile", "--once"]) == 130
    *_, last = json_objects(capsys.readouterr().err)
    assert (last["event"], last["exit_code"]) == ("interrupted", 130)


def test_text_log_lines_carry_their_utc_time(bench: Bench, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["reconcile", "--once"]) == 0
    (line,) = capsys.readouterr().err.splitlines()
    assert TEXT_LINE.fullmatch(line), line
    assert message_of(line).startswith("not in a git repository: the spec files are applied as they are on disk")


def test_main_leaves_logging_as_it_found_it(bench: Bench, capsys: pytest.CaptureFixture[str]) -> None:
    logger = logging.getLogger("controller")
    before = (list(logger.handlers), logger.level, logger.propagate, sys.stderr, threading.excepthook)
    assert main(["--log-format", "json", "reconcile", "--once"]) == 0
    assert (list(logger.handlers), logger.level, logger.propagate, sys.stderr, threading.excepthook) == before
    assert cli.json_logs() is False


def test_a_traceback_a_library_prints_line_by_line_is_one_json_object(capsys: pytest.CaptureFixture[str]) -> None:
    with logsetup.session("json", secrets=[SECRET]):
        print("serving on 127.0.0.1:9", file=sys.stderr)
        try:
            raise ConnectionResetError(f"reset by {SECRET}")
        except ConnectionResetError:
            traceback.print_exc()  # as http.server's handle_error does: a write per line
        print("still serving", file=sys.stderr)
    said = json_objects(capsys.readouterr().err)
    assert [(o["level"], o["event"]) for o in said] == [
        ("info", "serving on 127.0.0.1:9"),
        ("error", "ConnectionResetError: reset by [secure]"),
        ("info", "still serving"),
    ]
    assert said[1]["exc_info"].startswith("Traceback (most recent call last):\n  File ")
    assert said[1]["exc_info"].endswith("\nConnectionResetError: reset by [secure]")


def test_a_repeating_reconcile_says_an_error_again_only_when_it_changed(capsys: pytest.CaptureFixture[str]) -> None:
    """--until-complete as --watch: the same error every pass is one line, a new one is said."""
    from controller.cli.output import PassView  # noqa: PLC0415
    from controller.commands.reconcile.reconciler import PassResult  # noqa: PLC0415
    from controller.core.plan.values import Plan  # noqa: PLC0415

    view = PassView(dry_run=False, mode="text", watch=True)
    for errors in (["a: DAG missing"], ["a: DAG missing"], ["a: DAG missing", "b: refused"], ["a: DAG missing"]):
        view.show(PassResult(Plan(()), errors=errors))
    said = [line.split(" ", 1)[1] for line in capsys.readouterr().err.splitlines()]
    assert said == ["error: a: DAG missing", "error: a: DAG missing", "error: b: refused", "error: a: DAG missing"]
