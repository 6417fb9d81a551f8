"""The typer application: its options, the root callback, the sub-command groups, and what commands share.

The commands register themselves on `app` (and on `notify_app`, `audit_app`, `store_app`, `evidence_app`) in the modules
beside this one; `controller.cli.main` imports them all before it runs the application.
"""

# No `from __future__ import annotations` here: typer reads every command's annotations at each start, and
# string annotations would be compiled and evaluated again each time (tens of ms); names imported only for
# type checking are quoted instead.
import os
import re
from collections.abc import Callable
from enum import StrEnum
from typing import Annotated

import typer

from controller import __version__
from controller.cli.output import out
from controller.commands.runtime.settings import Settings

app = typer.Typer(
    name="backfillctl",
    help="Declarative, change-managed backfills for Apache Airflow 3.",
    no_args_is_help=True,
    add_completion=True,  # --install-completion / --show-completion: measured, --help stays about 0.15 s
    pretty_exceptions_enable=False,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
)


def _argument_metavar_only(self: typer.core.TyperArgument, ctx: object) -> str | None:
    return None


def _usage_name(self: typer.core.TyperArgument) -> str:
    name = self.display_name_raw if self.required else f"[{self.display_name_raw}]"
    return name + ("..." if self.nargs != 1 else "")


# an argument's help shows its metavar (`[PATH]...`), not the Python type typer adds after it (`<list[Path]>`),
# and the usage line names a required argument as click does (`NAME`), not in braces (`{NAME}`)
typer.core.TyperArgument.display_type_rich = _argument_metavar_only  # type: ignore[method-assign,assignment]
typer.core.TyperArgument._usage_display_name = _usage_name  # type: ignore[method-assign]


def load_settings() -> Settings:
    return Settings.from_env(os.environ)


def _print_version(value: bool) -> None:
    if value:
        out(f"backfillctl {__version__}\n")
        raise typer.Exit(0)


DAY = 86_400.0
LOCK_WAIT = (0, DAY)  # `reconcile --lock-timeout`: the seconds it may wait for the lease


def seconds_within(low: float, high: float) -> Callable[[float | None], float | None]:
    """A callback refusing seconds outside [low, high]: infinity, and NaN too (it fails every comparison)."""

    def check(value: float | None) -> float | None:
        if value is not None and not low <= value <= high:
            raise typer.BadParameter(f"{value:g} is not between {low:.0f} and {high:.0f} seconds")
        return value

    return check


DURATION = re.compile(r"[1-9][0-9]{0,4}[mhd]")  # 30m, 4h, 2d: what --expires and --expect-every take


def duration(value: str | None) -> str | None:
    """A callback refusing what is not a duration such as 30m, 4h or 2d."""
    if value is not None and not DURATION.fullmatch(value.strip()):
        raise typer.BadParameter(f"{value!r} is not a duration; use e.g. 30m, 4h or 2d")
    return None if value is None else value.strip()


class LogFormat(StrEnum):
    text = "text"
    json = "json"


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", is_eager=True, callback=_print_version, help="Print the version and exit.")
    ] = False,
    log_format: Annotated[
        LogFormat | None,
        typer.Option("--log-format", help="Log lines as text (default) or JSON objects (one per line, on stderr)."),
    ] = None,
) -> None:
    """Declarative, change-managed backfills for Apache Airflow 3."""
    # `controller.cli.main` read --log-format before typer ran (its usage errors are logged in that format too)


notify_app = typer.Typer(help="Webhook notifications of backfill events.", no_args_is_help=True)
audit_app = typer.Typer(help="Read and check the audit log; adopt or rotate its key.", no_args_is_help=True)
store_app = typer.Typer(help="Manage the store: schema migrations and stuck leases.", no_args_is_help=True)
evidence_app = typer.Typer(
    help="The evidence of merged changes that reconcile's approval gate reads: which commits need it, check one.",
    no_args_is_help=True,
)
app.add_typer(notify_app, name="notify")
app.add_typer(audit_app, name="audit")
app.add_typer(store_app, name="store")
app.add_typer(evidence_app, name="evidence")
