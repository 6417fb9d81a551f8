"""`backfillctl stop`: the emergency stop of a spec, a downstream system or everything (`stop ...`), the stops in
force (`stop list`) and an owner's lift (`stop lift`).

`stop` is a command group whose default is the stop itself: `backfillctl stop NAME --reason …` stops, as it always
did, and `stop list` / `stop lift` are its other commands. The spellings before the group (`stop --list`,
`stop --lift NAME`) keep working and say on stderr, in one line, what to type instead.
"""

# No `from __future__ import annotations` here: typer reads every command's annotations at each start.
import logging
from typing import TYPE_CHECKING, Annotated

import typer
from typer.core import TyperCommand, TyperGroup

from controller.cli.app import app, duration, load_settings
from controller.cli.complete import spec_names, stop_ids
from controller.cli.output import out, utc_now
from controller.errors import ExitCode, UsageError

if TYPE_CHECKING:  # typer's own click (it vendors one)
    from typer._click import Context, HelpFormatter

log = logging.getLogger(__name__)
CREATE = "create"  # the default command: `stop NAME …` is `stop create NAME …`
DEPRECATED = {  # an old spelling → what to type instead (deprecations are data)
    "--list": "backfillctl stop list",
    "--lift": "backfillctl stop lift NAME|SYSTEM|#N --reason …",
}


class StopGroup(TyperGroup):
    """A group whose first argument, when it names none of its commands, belongs to its default command."""

    def parse_args(self, ctx: "Context", args: list[str]) -> list[str]:
        if not args or args[0] not in self.commands:
            args = [CREATE, *args]
        return super().parse_args(ctx, args)


class StopCommand(TyperCommand):
    """The default command's usage names the group (`backfillctl stop [OPTIONS] [NAME]`), as the user typed it."""

    def format_usage(self, ctx: "Context", formatter: "HelpFormatter") -> None:
        path = ctx.parent.command_path if ctx.parent is not None else ctx.command_path
        formatter.write_usage(path, " ".join(self.collect_usage_pieces(ctx)))


stop_app = typer.Typer(
    cls=StopGroup,
    help="Emergency stops: stop a spec, a downstream system or everything; list the stops; lift one.",
    no_args_is_help=False,
)
app.add_typer(stop_app, name="stop")

SOURCE_HELP = (
    "workflow: the reusable workflow's stop job, proven by its OIDC token (BACKFILLCTL_OIDC_TOKEN); unproven, the "
    "stop is recorded as cli."
)


def stop_targets(incomplete: str) -> list[str]:
    """At `backfillctl stop <TAB>`: the group's commands (`list`, `lift`) and the spec names."""
    return [c for c in ("list", "lift") if c.startswith(incomplete)] + spec_names(incomplete)


def deprecated(spelling: str) -> None:
    """One line on stderr (a log line: timed, and JSON under --log-format json): the old spelling still works."""
    log.warning("`stop %s` is deprecated and goes away in a later release: use `%s`", spelling, DEPRECATED[spelling])


@stop_app.command(CREATE, cls=StopCommand, hidden=True)
def stop_command(
    name: Annotated[
        str | None, typer.Argument(metavar="NAME", help="The spec to stop.", autocompletion=stop_targets)
    ] = None,
    downstream: Annotated[
        str | None, typer.Option("--downstream", metavar="SYSTEM", help="Stop every spec listing this system.")
    ] = None,
    everything: Annotated[
        bool, typer.Option("--all", help="Stop everything: pause every managed backfill now (on-call).")
    ] = False,
    reason: Annotated[str | None, typer.Option("--reason", metavar="TEXT", help="Why (required to stop).")] = None,
    expires: Annotated[
        str | None,
        typer.Option(
            "--expires", metavar="DURATION", help="Lift itself after this long: 30m, 4h, 2d.", callback=duration
        ),
    ] = None,
    show: Annotated[bool, typer.Option("--list", hidden=True, help="Deprecated: `stop list`.")] = False,
    lift: Annotated[
        str | None,
        typer.Option("--lift", metavar="NAME", hidden=True, help="Deprecated: `stop lift`.", autocompletion=stop_ids),
    ] = None,
    owners: Annotated[
        str | None, typer.Option("--owners", metavar="SYSTEM", hidden=True, help="Print the system's owners.")
    ] = None,
    source: Annotated[str, typer.Option("--source", hidden=True, help=SOURCE_HELP)] = "cli",
) -> int:
    """Stop a spec, every spec of a downstream system, or everything (--all) at once: its running backfills are
    paused now, and nothing is created, unpaused or next-chunked for it until an owner lifts it (`backfillctl stop
    lift`), it expires, or a reviewed `resume: "stop #N: …"` names it. `backfillctl stop list` shows the stops in
    force. The actor is BACKFILLCTL_ACTOR: only as trustworthy as the store credentials (the stop workflow's is
    proven by its OIDC token). With the store down, pause in Airflow instead (docs/operations.md): the next pass
    keeps it."""
    from controller.commands.verbs import stop as stops
    from controller.core.model.policy import parse_span
    from controller.core.model.stops import EVERYTHING, EmergencyStopKind, StopSource

    _check_source(source)
    settings = load_settings()
    if owners is not None:
        out("\n".join(stops.system_owners(settings, owners)) + "\n")
        return ExitCode.OK
    if show:
        deprecated("--list")
        return _list()
    if lift is not None:
        deprecated("--lift")
        return _lift(lift, reason)
    if [name is not None, downstream is not None, everything].count(True) != 1:
        raise UsageError(
            "stop needs one target: a spec NAME, --downstream SYSTEM or --all",
            hint='e.g. backfillctl stop --downstream warehouse --reason "CPU at 95%" --expires 4h',
        )
    if not reason or len(reason.strip()) < 3:
        raise UsageError("stop needs --reason: say why, for the owners and the audit log", hint='--reason "CPU at 95%"')
    kind, target = (
        (EmergencyStopKind.SPEC, name)
        if name is not None
        else (EmergencyStopKind.DOWNSTREAM, downstream)
        if downstream is not None
        else (EmergencyStopKind.ALL, EVERYTHING)
    )
    span = parse_span(expires)  # the option's callback checked the shape
    until = None if span is None else utc_now() + span
    result = stops.stop_with_settings(settings, kind, str(target), reason, StopSource(source), until)
    for line in stops.result_lines(result):
        out(line + "\n")
    return ExitCode.ERROR if result.failed else ExitCode.OK


@stop_app.command("list")
def list_command() -> int:
    """The stops in force: id, what it stops, why, who (and from where), when, and until when."""
    return _list()


@stop_app.command("lift")
def lift_command(
    name: Annotated[
        str, typer.Argument(metavar="NAME|SYSTEM|#N", help="The stop's spec, system or id.", autocompletion=stop_ids)
    ],
    reason: Annotated[str | None, typer.Option("--reason", metavar="TEXT", help="Why it is lifted.")] = None,
    source: Annotated[str, typer.Option("--source", hidden=True, help=SOURCE_HELP)] = "cli",
) -> int:
    """Lift a stop in force (an owner of what it stops; on-call may stop, never lift): the next reconcile pass
    resumes what it paused."""
    _check_source(source)
    return _lift(name, reason)


def _check_source(source: str) -> None:
    if source not in ("cli", "workflow"):  # a workflow stop is proven by its token, never by the environment
        raise UsageError(f"--source {source}: the source is cli or workflow")


def _list() -> int:
    from controller.commands.runtime.session import open_store
    from controller.commands.verbs import stop as stops

    with open_store(load_settings(), read_only=True) as store:
        out("\n".join(stops.list_lines(store.stops())) + "\n")
    return ExitCode.OK


def _lift(name: str, reason: str | None) -> int:
    from controller.commands.verbs import stop as stops

    settings = load_settings()
    why = reason or "lifted by an owner"
    lifted = stops.lift_with_settings(settings, name, why)
    out(f"lifted stop #{lifted.id} of {lifted.kind.value} {lifted.target} (by {settings.actor}: {why})\n")
    out("the next reconcile pass resumes what it paused\n")
    return ExitCode.OK
