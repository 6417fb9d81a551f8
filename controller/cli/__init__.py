"""The command line (typer): parse → settings → one orchestration call → render → exit code.

`main` is the one top-level error handler: user mistakes and controller errors print a located message
and exit with the code from `controller.errors.ExitCode`; anything unexpected prints one line and the
path of a traceback file (no local variables, no secrets) and exits 3.

The application and its shared options are in `app`, what it writes in `output`; the commands, by what they
are about, in `specs` (validate, new, init), `reconcile` (plan, reconcile), `status` (status, report, notify
status) and `audit` (audit, store).
"""

import os
import sys

import typer

# isort: off
# each module registers its commands on `app`, in the order `backfillctl --help` lists them
from controller.cli import specs, reconcile, status, audit, stop

# isort: on
from controller.cli.app import app
from controller.cli.output import PassView
from controller.core.documents.escaping import plain_lines
from controller.errors import ControllerError, ExitCode

__all__ = ["PassView", "app", "audit", "main", "reconcile", "specs", "status", "stop"]


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
    details = [f"  {line}" for line in exc.details]
    sys.stderr.write(plain_lines([f"error: {exc.message}", *details, *([f"  hint: {exc.hint}"] if exc.hint else [])]))


def _report_unexpected(exc: Exception) -> int:
    import tempfile
    import traceback

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    fd, path = tempfile.mkstemp(prefix="backfillctl-crash-", suffix=".log")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    sys.stderr.write(
        f"unexpected error: {type(exc).__name__}; this is a bug in backfillctl.\n"
        f"  details (traceback without local variables): {path}\n"
    )
    return ExitCode.UNEXPECTED
