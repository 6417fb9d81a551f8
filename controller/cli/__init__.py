"""The command line (typer): parse → settings → one orchestration call → render → exit code.

`main` is the one top-level error handler: user mistakes and controller errors print a located message
and exit with the code from `controller.errors.ExitCode`; anything unexpected prints one line and the
path of a traceback file (no local variables, no secrets) and exits 3.

The application and its shared options are in `app`, what it writes in `output`; the commands, by what they
are about, in `specs` (validate, new, init), `reconcile` (plan, reconcile), `status` (status, report, notify
status), `audit` (audit, store) and `stop` (emergency stops).
"""

import os
import sys
from typing import Any, NoReturn

from controller.cli.quick import plain_validate, run_validate
from controller.commands import collector
from controller.core.documents.escaping import plain_lines
from controller.errors import ControllerError, ExitCode

__all__ = ["PassView", "app", "audit", "main", "reconcile", "specs", "status", "stop"]


def __getattr__(name: str) -> Any:
    """The typer application and its parts, imported when first asked for (a plain `validate` never is)."""
    if name not in __all__:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    _application()
    return globals()[name]


PARTS = ("specs", "reconcile", "status", "audit", "stop")  # in the order `backfillctl --help` lists them
HOMES = {  # a command → the module that registers it
    **dict.fromkeys(("validate", "new", "init"), "specs"),
    **dict.fromkeys(("plan", "reconcile"), "reconcile"),
    **dict.fromkeys(("status", "report", "notify"), "status"),
    **dict.fromkeys(("audit", "store"), "audit"),
    "stop": "stop",
}


def _application(command: str | None = None) -> Any:
    """The typer application with `command`'s module registered, or every command (the package's `app` is it,
    not its module): a pass under `--watch` or cron need not import what `init` or `audit` use."""
    from importlib import import_module

    # each module registers its commands on `app` (imported by name: `from controller.cli import specs` would
    # ask this module's `__getattr__` again)
    home = HOMES.get(command or "")
    parts = {name: import_module(f"controller.cli.{name}") for name in PARTS if home in (None, name)}
    from controller.cli.app import app
    from controller.cli.output import PassView

    # the order `--help` lists them, whichever command's module an earlier call in this process imported first
    app.registered_commands.sort(key=lambda c: PARTS.index(c.callback.__module__.rpartition(".")[2]))
    globals().update(parts, app=app, PassView=PassView)
    return app


def main(argv: list[str] | None = None) -> int:
    """One command, for a caller that goes on afterwards (the collector is given back as it was found)."""
    with collector.command():
        return _main(sys.argv[1:] if argv is None else argv)


def entry() -> NoReturn:
    """The console script and `python -m controller`: the process ends with the command."""
    # httpx's own command line (click, rich, pygments) is imported with httpx when click is installed: ~50 ms
    # a start for nothing; a None entry makes that import fail, and httpx falls back to a stub of it
    sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
    with collector.command(process_ends=True):
        code = _main(sys.argv[1:])
    sys.exit(code)


def _main(args: list[str]) -> int:
    quick = plain_validate(args)
    try:
        if quick is not None:  # pre-commit's `validate FILE...`: no typer to build (see `quick`)
            return run_validate(quick)
        if args == ["--version"]:  # what scripts ask first: no typer to build either
            from controller import __version__

            sys.stdout.write(f"backfillctl {__version__}\n")
            return ExitCode.OK
        return _typer_main(args)
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return ExitCode.INTERRUPTED
    except ControllerError as exc:
        _report_error(exc)
        return int(exc.exit_code)
    except Exception as exc:
        return _report_unexpected(exc)


def _typer_main(args: list[str]) -> int:
    import typer

    application = _application(_command(args))
    try:
        result = application(args=args, prog_name="backfillctl", standalone_mode=False)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        sys.stderr.write("interrupted\n")
        return ExitCode.INTERRUPTED
    except typer.TyperException as exc:  # click's usage and parameter errors, vendored by typer
        exc.show()  # type: ignore[attr-defined]
        return int(getattr(exc, "exit_code", ExitCode.USAGE))
    return int(result) if isinstance(result, int) else ExitCode.OK


def _command(args: list[str]) -> str | None:
    """The command the arguments name (None: none, e.g. `--help`: then every command is registered)."""
    rest = iter(args)
    for arg in rest:
        if arg == "--log-format":  # the one root option with a value after it
            next(rest, None)
        elif not arg.startswith("-"):
            return arg
    return None


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
