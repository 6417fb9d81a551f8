"""`backfillctl status`, `report` and `notify status`: what the store and Airflow say, read only."""

# No `from __future__ import annotations` here: typer reads every command's annotations at each start, and
# string annotations would be compiled and evaluated again each time (tens of ms); names imported only for
# type checking are quoted instead.
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from controller.cli.app import app, load_settings, notify_app
from controller.cli.output import out, status_rich, tty, utc_now, width
from controller.core.documents.escaping import plain
from controller.errors import ExitCode


class StatusFormat(StrEnum):
    text = "text"
    json = "json"


@app.command("status")
def status_command(
    name: Annotated[str | None, typer.Argument(metavar="NAME", help="Only this spec.")] = None,
    output: Annotated[StatusFormat, typer.Option("--format", help="Output format.")] = StatusFormat.text,
) -> int:
    """Per spec: phase, backfill id, runs by state, progress and ETA (read only).

    Without BACKFILLCTL_AIRFLOW_URL it shows what the store last recorded, and says so.
    """
    from rich.console import Console

    from controller.commands.status import status_view
    from controller.core.render import status

    settings = load_settings()
    if settings.airflow_url is None:
        sys.stderr.write("offline: BACKFILLCTL_AIRFLOW_URL is not set; showing what the store last recorded\n")
    view = status_view(settings, utc_now(), name)
    if output is StatusFormat.json:
        import json

        document = {
            "format_version": 1,
            "phases": status.phase_counts(view.rows),
            "specs": [r.as_json() for r in view.rows],
            "findings": [{"kind": k, "message": m} for k, m in status.spec_findings(view.rows)],
        }
        out(json.dumps(document, indent=2) + "\n")
    elif tty():
        console = Console(highlight=False)
        console.print(status.phase_line(view.rows), markup=False)
        console.print(status_rich(view.rows, console.width))
        for kind, message in status.spec_findings(view.rows):
            console.print(plain(f"! {kind}: {message}"), markup=False, style="red")
    else:
        out(status.status_report(view.rows, width()))
    return ExitCode.ERROR if view.incomplete else ExitCode.OK


class ReportFormat(StrEnum):
    markdown = "markdown"
    json = "json"
    html = "html"


@app.command()
def report(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The spec's name.")],
    output: Annotated[
        ReportFormat, typer.Option("--format", help="Output format (html: one self-contained page).")
    ] = ReportFormat.markdown,
    output_file: Annotated[
        Path | None, typer.Option("--output", metavar="FILE", help="Write the report to this file instead of stdout.")
    ] = None,
) -> int:
    """The change record of one spec: who, why, what ran, the outcome, a calendar of the range, the audit trail.

    With BACKFILLCTL_AIRFLOW_URL set, the calendar (markdown and html) has a cell for every run of the range.
    """
    from controller.commands import report as report_cmd

    settings = load_settings()
    if output is ReportFormat.json:
        text = report_cmd.json_report(settings, name, utc_now())
    elif output is ReportFormat.html:
        text = report_cmd.html_report(settings, name, utc_now())
    else:
        text = report_cmd.markdown_report(settings, name, utc_now())
    if output_file is None:
        out(text)
    else:
        _write_report(output_file, text)
    return ExitCode.OK


def _write_report(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise typer.BadParameter(f"cannot write {path}: {exc.strerror}", param_hint="--output") from None
    sys.stderr.write(f"wrote {path}\n")


@notify_app.command("status")
def notify_status(
    output: Annotated[StatusFormat, typer.Option("--format", help="Output format.")] = StatusFormat.text,
) -> int:
    """Undelivered notifications: pending, and failed (retried with backoff until delivered). Read only."""
    from controller.commands import notify as notify_cmd

    out(notify_cmd.status_render(notify_cmd.notify_status(load_settings()), json_format=output is StatusFormat.json))
    return ExitCode.OK
