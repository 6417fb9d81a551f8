"""The command line (typer): parse → settings → one orchestration call → render → exit code.

`main` is the one top-level error handler: user mistakes and controller errors print a located message
and exit with the code from `controller.errors.ExitCode`; anything unexpected prints one line and the
path of a traceback file (no local variables, no secrets) and exits 3.
"""

from __future__ import annotations

import os
import sys
import tempfile
import traceback
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from controller import __version__
from controller.commands import validate as validate_cmd
from controller.commands.settings import Settings
from controller.core import render
from controller.core.scaffold import NewSpec
from controller.core.spec import ReprocessBehavior
from controller.errors import ControllerError, ExitCode

app = typer.Typer(
    name="backfillctl",
    help="Declarative, change-managed backfills for Apache Airflow 3.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
)


class ValidateFormat(StrEnum):
    text = "text"
    json = "json"
    github = "github"


def _settings() -> Settings:
    return Settings.from_env(os.environ)


def _now() -> datetime:
    return datetime.now(UTC)


def _out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def _print_version(value: bool) -> None:
    if value:
        _out(f"backfillctl {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", is_eager=True, callback=_print_version, help="Print the version and exit.")
    ] = False,
) -> None:
    """Declarative, change-managed backfills for Apache Airflow 3."""


@app.command()
def validate(
    paths: Annotated[
        list[Path] | None, typer.Argument(help="Spec files or folders (default: the specs folder).")
    ] = None,
    output: Annotated[ValidateFormat, typer.Option("--format", help="Output format.")] = ValidateFormat.text,
) -> int:
    """Check specs: YAML, schema, semantic rules and policy. Every file, every error, one report."""
    settings = _settings()
    result = validate_cmd.validate_paths(paths or [], settings.specs_dir, _now())
    renderers = {
        ValidateFormat.text: render.validation_text,
        ValidateFormat.json: render.validation_json,
        ValidateFormat.github: render.validation_github,
    }
    _out(renderers[output](result))
    return ExitCode.OK if result.ok else ExitCode.ERROR


@app.command()
def new(
    name: Annotated[str, typer.Argument(help="Spec name; also the file name (specs/NAME.yaml).")],
    dag_id: Annotated[str, typer.Option("--dag-id", help="The DAG to backfill.")],
    from_date: Annotated[str, typer.Option("--from", help="First logical date, e.g. 2025-01-01.")],
    to_date: Annotated[str, typer.Option("--to", help="Last logical date (inclusive).")],
    reprocess: Annotated[
        ReprocessBehavior, typer.Option("--reprocess", help="none | failed | completed.")
    ] = ReprocessBehavior.NONE,
    max_active_runs: Annotated[int, typer.Option("--max-active-runs", min=1)] = 1,
    ticket: Annotated[str, typer.Option("--ticket")] = "CHG-0000",
    approver: Annotated[list[str] | None, typer.Option("--approver", help="Repeat for each approver.")] = None,
    expected_runs: Annotated[int | None, typer.Option("--expected-runs", min=1)] = None,
) -> int:
    """Write a new spec that validates, with placeholders to fill in."""
    settings = _settings()
    spec = NewSpec(
        name,
        dag_id,
        from_date,
        to_date,
        reprocess,
        max_active_runs,
        settings.actor,
        ticket,
        tuple(approver or ["TODO-approver"]),
        expected_runs,
    )
    path, result = validate_cmd.create_spec(spec, settings.specs_dir, _now())
    _out(f"wrote {path}\n")
    if result.diagnostics:
        _out(render.validation_text(result))
    _out("next: fill in the TODO placeholders, then `backfillctl validate` and `backfillctl plan`\n")
    return ExitCode.OK if result.ok else ExitCode.ERROR


def main(argv: list[str] | None = None) -> int:
    """Entry point for the console script and `python -m controller`."""
    try:
        result = app(args=argv, prog_name="backfillctl", standalone_mode=False)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        sys.stderr.write("interrupted\n")
        return ExitCode.INTERRUPTED
    except ControllerError as exc:
        _report_error(exc)
        return int(exc.exit_code)
    except typer.TyperException as exc:  # click's usage and parameter errors, vendored by typer
        exc.show()  # type: ignore[attr-defined]
        return int(getattr(exc, "exit_code", ExitCode.USAGE))
    except Exception as exc:
        return _report_unexpected(exc)
    return int(result) if isinstance(result, int) else ExitCode.OK


def _report_error(exc: ControllerError) -> None:
    sys.stderr.write(f"error: {exc.message}\n")
    if exc.hint:
        sys.stderr.write(f"  hint: {exc.hint}\n")


def _report_unexpected(exc: Exception) -> int:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    fd, path = tempfile.mkstemp(prefix="backfillctl-crash-", suffix=".log")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    sys.stderr.write(
        f"unexpected error: {type(exc).__name__}; this is a bug in backfillctl.\n"
        f"  details (traceback without local variables): {path}\n"
    )
    return ExitCode.UNEXPECTED
