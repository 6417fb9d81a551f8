"""`backfillctl stop`: the emergency stop of a spec or a downstream system, its list and its lift."""

# No `from __future__ import annotations` here: typer reads every command's annotations at each start.
import os
import re
from datetime import timedelta
from typing import Annotated

import typer

from controller.cli.app import app, load_settings
from controller.cli.output import out, utc_now
from controller.errors import ExitCode, Refused, UsageError

_SPAN = re.compile(r"(\d+)([mhd])")
_UNITS = {"m": "minutes", "h": "hours", "d": "days"}


def _expires(value: str | None) -> str | None:
    if value is not None and not _SPAN.fullmatch(value.strip()):
        raise typer.BadParameter(f"{value!r} is not a duration; use e.g. 30m, 4h or 2d")
    return value


@app.command("stop")
def stop_command(
    name: Annotated[str | None, typer.Argument(metavar="NAME", help="The spec to stop.")] = None,
    downstream: Annotated[
        str | None, typer.Option("--downstream", metavar="SYSTEM", help="Stop every spec listing this system.")
    ] = None,
    reason: Annotated[str | None, typer.Option("--reason", metavar="TEXT", help="Why (required to stop).")] = None,
    expires: Annotated[
        str | None,
        typer.Option(
            "--expires", metavar="DURATION", help="Lift itself after this long: 30m, 4h, 2d.", callback=_expires
        ),
    ] = None,
    show: Annotated[bool, typer.Option("--list", help="List the stops in force.")] = False,
    lift: Annotated[
        str | None, typer.Option("--lift", metavar="NAME", help="Lift the stop of this spec, system or #id.")
    ] = None,
    owners: Annotated[
        str | None, typer.Option("--owners", metavar="SYSTEM", hidden=True, help="Print the system's owners.")
    ] = None,
    source: Annotated[
        str, typer.Option("--source", hidden=True, help="workflow: the reusable workflow's stop job (GitHub Actions).")
    ] = "cli",
) -> int:
    """Stop a spec or every spec of a downstream system at once: its running backfills are paused now, and
    nothing is created, unpaused or next-chunked for it until an owner lifts it, it expires, or a reviewed
    `resume: "stop #N: …"` names it. The actor is BACKFILLCTL_ACTOR: only as trustworthy as the store credentials."""
    from controller.adapters.store import Store
    from controller.commands import stop as stops
    from controller.core.plan.stops import EmergencyStopKind, StopSource

    settings = load_settings()
    if source not in ("cli", "workflow") or (source == "workflow" and os.environ.get("GITHUB_ACTIONS") != "true"):
        raise UsageError(f"--source {source}: only the reusable workflow's stop job (GitHub Actions) may say workflow")
    if owners is not None:
        out("\n".join(stops.system_owners(settings, owners)) + "\n")
        return ExitCode.OK
    if show:
        with Store(settings.store_url, read_only=True) as store:
            out("\n".join(stops.list_lines(store.stops())) + "\n")
        return ExitCode.OK
    if lift is not None:
        return _lift(settings, lift, reason or "lifted by an owner")
    if (name is None) == (downstream is None):
        raise UsageError(
            "stop needs one target: a spec NAME or --downstream SYSTEM",
            hint='e.g. backfillctl stop --downstream warehouse --reason "CPU at 95%" --expires 4h',
        )
    if not reason or len(reason.strip()) < 3:
        raise UsageError("stop needs --reason: say why, for the owners and the audit log", hint='--reason "CPU at 95%"')
    kind, target = (EmergencyStopKind.SPEC, name) if name is not None else (EmergencyStopKind.DOWNSTREAM, downstream)
    until = None
    if expires is not None:
        span = _SPAN.fullmatch(expires.strip())
        assert span is not None  # checked by the option's callback
        until = utc_now() + timedelta(**{_UNITS[span[2]]: int(span[1])})
    result = stops.stop_with_settings(settings, kind, str(target), reason, StopSource(source), until)
    for line in stops.result_lines(result):
        out(line + "\n")
    return ExitCode.ERROR if result.failed else ExitCode.OK


def _lift(settings: "object", name: str, reason: str) -> int:
    from controller.commands import stop as stops

    try:
        lifted = stops.lift_with_settings(settings, name, reason)  # type: ignore[arg-type]
    except Refused:
        raise
    out(f"lifted stop #{lifted.id} of {lifted.kind.value} {lifted.target} (by {load_settings().actor}: {reason})\n")
    out("the next reconcile pass resumes what it paused\n")
    return ExitCode.OK
