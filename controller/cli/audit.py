"""`backfillctl audit show|verify|export|adopt-key|rotate-key` and `store migrate|unlock`: the audit log, its key
and the store itself."""

# No `from __future__ import annotations` here: typer reads every command's annotations at each start, and
# string annotations would be compiled and evaluated again each time (tens of ms); names imported only for
# type checking are quoted instead.
import re
import sys
from datetime import timedelta
from enum import StrEnum
from typing import Annotated

import typer

from controller.cli.app import audit_app, load_settings, store_app
from controller.cli.complete import spec_names
from controller.cli.output import out, utc_now
from controller.core.audit.vocabulary import ACTIONS
from controller.core.documents.escaping import plain_lines
from controller.core.model.spec import parse_date
from controller.errors import ExitCode

SINCE_HELP = (
    "Only events at or after this time: YYYY-MM-DD (00:00 UTC), an RFC 3339 date-time with offset, "
    "or an age: 30m, 2h, 3d, 1w."
)
_AGE = re.compile(r"(\d+)([mhdw])")
_AGE_UNITS = {"m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


def _since(value: str | None) -> str | None:
    """The store's own time text (fixed width, UTC), so comparing texts compares times."""
    if value is None:
        return None
    age = _AGE.fullmatch(value.strip())
    try:
        moment = utc_now() - timedelta(**{_AGE_UNITS[age[2]]: int(age[1])}) if age else parse_date(value)
        return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    except (ValueError, OverflowError):
        raise typer.BadParameter(
            f"{value!r} is not a date, date-time or age; use e.g. 2025-01-31, 2025-01-31T12:00:00Z or 2h"
        ) from None


def _action(value: str | None) -> str | None:
    if value is not None and value not in ACTIONS:
        raise typer.BadParameter(f"{value!r} is not an audited action; use one of: {', '.join(ACTIONS)}")
    return value


class AuditFormat(StrEnum):
    text = "text"
    json = "json"


@audit_app.command("show")
def audit_show(
    spec: Annotated[
        str | None,
        typer.Option("--spec", metavar="NAME", help="Only events of this spec.", autocompletion=spec_names),
    ] = None,
    dag: Annotated[str | None, typer.Option("--dag", metavar="DAG_ID", help="Only events of this DAG.")] = None,
    action: Annotated[
        str | None,
        typer.Option("--action", metavar="ACTION", help=f"Only this action: {', '.join(ACTIONS)}.", callback=_action),
    ] = None,
    since: Annotated[str | None, typer.Option("--since", metavar="WHEN", help=SINCE_HELP, callback=_since)] = None,
    output: Annotated[AuditFormat, typer.Option("--format", help="One line per event, or one JSON object.")] = (
        AuditFormat.text
    ),
    limit: Annotated[
        int | None, typer.Option("--limit", min=1, metavar="N", help="Only the first N events that match.")
    ] = None,
    tail: Annotated[
        int | None,
        typer.Option("--tail", min=1, metavar="N", help="Only the last N events that match (still oldest first)."),
    ] = None,
) -> int:
    """Print audit events, oldest first."""
    from controller.adapters.store.audit_log import EventFilter
    from controller.commands.verbs import audit as audit_cmd
    from controller.core.render import audit as audit_render

    if limit is not None and tail is not None:
        raise typer.BadParameter("--limit is the first N, --tail the last N: give one", param_hint="--tail")
    line = audit_render.record_line if output is AuditFormat.text else audit_render.record_json
    where = EventFilter(spec, dag, action, since)
    settings = load_settings()
    printed = audit_cmd.print_events(settings, where, line, first=limit, last=tail)
    narrowed = any(f is not None for f in (dag, action, since, limit, tail))
    note = audit_cmd.spec_file_note(settings, spec, printed, narrowed=narrowed) if spec is not None else None
    if note is not None:
        sys.stderr.write(plain_lines([note]))
    return ExitCode.ERROR if printed.skipped else ExitCode.OK


def _head_hash(value: str | None) -> str | None:
    if value is not None and (len(value) != 64 or value.strip("0123456789abcdef")):  # sha256 as lowercase hex
        raise typer.BadParameter(
            f"{value!r} is not a hash: give the 64 lowercase hex digits that `audit verify` printed after 'hash'"
        )
    return value


@audit_app.command("verify")
def audit_verify(
    expect_head: Annotated[
        str | None,
        typer.Option(
            "--expect-head", metavar="HASH", help="A head hash saved earlier: detects truncation.", callback=_head_hash
        ),
    ] = None,
) -> int:
    """Recompute the hash chain; exit 1 at the first edited, missing, reordered or truncated record."""
    from controller.commands.verbs import audit as audit_cmd
    from controller.core.render import audit as audit_render

    result = audit_cmd.verify(load_settings(), expect_head)
    out(audit_render.verify_text(result))
    return ExitCode.OK if result.ok else ExitCode.ERROR


@audit_app.command("adopt-key")
def audit_adopt_key(
    expect_head: Annotated[
        str | None,
        typer.Option(
            "--expect-head",
            metavar="HASH",
            help="A head hash saved earlier: adopt only a chain that still holds it.",
            callback=_head_hash,
        ),
    ] = None,
) -> int:
    """Key an unkeyed audit chain with BACKFILLCTL_AUDIT_KEY (audited): the only way a chain becomes keyed."""
    from controller.commands.verbs import audit as audit_cmd
    from controller.core.render import audit as audit_render

    out(audit_render.key_record_text(audit_cmd.adopt_key(load_settings(), expect_head)))
    return ExitCode.OK


@audit_app.command("rotate-key")
def audit_rotate_key() -> int:
    """Rotate the chain's key: from the one in BACKFILLCTL_AUDIT_KEYS_PREVIOUS to BACKFILLCTL_AUDIT_KEY (audited)."""
    from controller.commands.verbs import audit as audit_cmd
    from controller.core.render import audit as audit_render

    out(audit_render.key_record_text(audit_cmd.rotate_key(load_settings())))
    return ExitCode.OK


class ExportFormat(StrEnum):
    jsonl = "jsonl"


@audit_app.command("export")
def audit_export(
    output: Annotated[
        ExportFormat, typer.Option("--format", help="One canonical JSON object per line.")
    ] = ExportFormat.jsonl,
    since: Annotated[str | None, typer.Option("--since", metavar="WHEN", help=SINCE_HELP, callback=_since)] = None,
    spec: Annotated[
        str | None,
        typer.Option("--spec", metavar="NAME", help="Only events of this spec.", autocompletion=spec_names),
    ] = None,
) -> int:
    """Stream every event as one canonical JSON object per line (for a central log platform)."""
    from controller.adapters.store.audit_log import EventFilter
    from controller.commands.verbs import audit as audit_cmd
    from controller.core.render import audit as audit_render

    printed = audit_cmd.print_events(load_settings(), EventFilter(spec=spec, since=since), audit_render.record_jsonl)
    return ExitCode.ERROR if printed.skipped else ExitCode.OK


@store_app.command("migrate")
def store_migrate() -> int:
    """Upgrade the store's schema to this version's newest.

    reconcile and store unlock create or upgrade the store when they open it; the read-only commands (plan,
    status, report, audit, notify status) never do: they refuse a missing or older store and name this command.
    """
    from controller.commands.verbs import audit as audit_cmd

    before, after = audit_cmd.migrate(load_settings())
    out(f"store schema at revision {after}" + (f" (was {before})" if before != after else " (already current)") + "\n")
    return ExitCode.OK


@store_app.command("unlock")
def store_unlock(
    lease_id: Annotated[str, typer.Argument(metavar="LEASE_ID", help="The exact lease id to release.")],
) -> int:
    """Release a stuck reconcile lease (audited)."""
    from controller.commands.verbs import audit as audit_cmd

    released = audit_cmd.unlock(load_settings(), lease_id)
    out(plain_lines([f"released the lease of {released.describe()}"]))
    return ExitCode.OK
