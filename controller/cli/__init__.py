"""The command line (typer): parse → settings → one orchestration call → render → exit code.

`main` is the one top-level error handler: user mistakes and controller errors print a located message
and exit with the code from `controller.errors.ExitCode`; anything unexpected prints one line and the
path of a traceback file (no local variables, no secrets) and exits 3. It sets the command's logging up
first (`--log-format`): under JSON each of these reports is one JSON object on stderr, like every log line.

The application and its shared options are in `app`, what it writes in `output`; the commands, by what they
are about, in `specs` (validate, new, init), `reconcile` (plan, reconcile, evidence), `status` (status, report, notify
status), `audit` (audit, store) and `stop` (emergency stops).
"""

import logging
import os
import sys
from collections.abc import Iterator
from typing import Any, NoReturn

from controller.adapters.logsetup import json_logs
from controller.cli.quick import plain_reconcile, plain_validate, run_reconcile, run_validate
from controller.commands.runtime import collector
from controller.core.documents.escaping import plain_lines
from controller.errors import ControllerError, ExitCode

log = logging.getLogger(__name__)
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
    **dict.fromkeys(("plan", "reconcile", "evidence"), "reconcile"),
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
    from controller.commands.runtime.logs import logging_for

    with logging_for(_log_format(args), os.environ):
        return _run(args)


def _run(args: list[str]) -> int:
    try:
        done = _without_typer(args)
        return _typer_main(args) if done is None else done
    except KeyboardInterrupt:
        return _interrupted()
    except ControllerError as exc:
        _report_error(exc)
        return int(exc.exit_code)
    except Exception as exc:
        return _report_unexpected(exc)


def _without_typer(args: list[str]) -> int | None:
    """The commands answered without building typer's application (see `quick`); None: typer's to run."""
    quick, scheduled = plain_validate(args), plain_reconcile(args)
    if quick is not None:  # pre-commit's `validate FILE...`
        return run_validate(quick)
    if scheduled is not None:  # cron's `reconcile --once …`
        return run_reconcile(scheduled)
    if args == ["--version"]:  # what scripts ask first
        from controller import __version__

        sys.stdout.write(f"backfillctl {__version__}\n")
        return ExitCode.OK
    return None


def _typer_main(args: list[str]) -> int:
    import typer

    application = _application(_command(args))
    try:
        result = application(args=args, prog_name="backfillctl", standalone_mode=False)
    except typer.Exit as exc:
        return int(exc.exit_code)
    except typer.Abort:
        return _interrupted()
    except typer.TyperException as exc:  # click's usage and parameter errors, vendored by typer
        if json_logs():
            _report_usage(exc)
        else:
            exc.show()  # type: ignore[attr-defined]
        return int(getattr(exc, "exit_code", ExitCode.USAGE))
    if result == ExitCode.INTERRUPTED:  # typer's answer to Ctrl-C inside a command (no command returns it)
        return _interrupted()
    return int(result) if isinstance(result, int) else ExitCode.OK


def _root_options(args: list[str]) -> Iterator[tuple[str, str | None]]:
    """The options before the command, each with the value after it (`--log-format` is the one that has one)."""
    rest = iter(args)
    for arg in rest:
        if not arg.startswith("-"):
            return
        yield arg, next(rest, None) if arg == "--log-format" else None


def _command(args: list[str]) -> str | None:
    """The command the arguments name (None: none, e.g. `--help`: then every command is registered)."""
    seen = sum(1 + (value is not None) for _, value in _root_options(args))
    return args[seen] if seen < len(args) else None


def _log_format(args: list[str]) -> str:
    """`--log-format`'s value, read before typer runs: its usage errors are then logged in that format too (a
    value typer refuses leaves text)."""
    value = None
    for name, after in _root_options(args):
        if name == "--log-format":
            value = after
        elif name.startswith("--log-format="):
            value = name.partition("=")[2]
    return "json" if value == "json" else "text"


def _report_error(exc: ControllerError) -> None:
    if json_logs():
        extra = {"hint": exc.hint, "details": list(exc.details) or None, "exit_code": int(exc.exit_code)}
        log.error("%s", exc.message, extra=extra)
        return
    details = [f"  {line}" for line in exc.details]
    sys.stderr.write(plain_lines([f"error: {exc.message}", *details, *([f"  hint: {exc.hint}"] if exc.hint else [])]))


def _report_usage(exc: Exception) -> None:
    """A usage error as click shows it (usage, a pointer to --help, the message), as one JSON object."""
    ctx = getattr(exc, "ctx", None)
    extra: dict[str, object] = {"exit_code": int(getattr(exc, "exit_code", ExitCode.USAGE))}
    if ctx is not None:
        extra |= {"usage": ctx.get_usage(), "hint": f"Try '{ctx.command_path} {ctx.help_option_names[0]}' for help."}
    log.error("%s", exc.format_message(), extra=extra)  # type: ignore[attr-defined]


def _interrupted() -> int:
    if json_logs():
        log.error("interrupted", extra={"exit_code": int(ExitCode.INTERRUPTED)})
    else:
        sys.stderr.write("interrupted\n")
    return ExitCode.INTERRUPTED


def _report_unexpected(exc: Exception) -> int:
    import tempfile
    import traceback

    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    fd, path = tempfile.mkstemp(prefix="backfillctl-crash-", suffix=".log")
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text)
    message = f"unexpected error: {type(exc).__name__}; this is a bug in backfillctl."
    if json_logs():  # the traceback inside the object (redacted, no local variables), and in the file
        log.error("%s", message, exc_info=exc, extra={"crash_log": path, "exit_code": int(ExitCode.UNEXPECTED)})
    else:
        sys.stderr.write(f"{message}\n  details (traceback without local variables): {path}\n")
    return ExitCode.UNEXPECTED
