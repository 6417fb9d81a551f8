"""`backfillctl status`, `report` and `notify status`: what the store and Airflow say, read only."""

# No `from __future__ import annotations` here: typer reads every command's annotations at each start, and
# string annotations would be compiled and evaluated again each time (tens of ms); names imported only for
# type checking are quoted instead.
import sys
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from controller.cli.app import app, duration, load_settings, notify_app
from controller.cli.complete import spec_names
from controller.cli.output import out, status_rich, tty, utc_now, width
from controller.core.documents.escaping import plain
from controller.errors import ExitCode

if TYPE_CHECKING:
    from controller.commands.runtime.settings import Settings


class StatusFormat(StrEnum):
    text = "text"
    json = "json"


@app.command("status")
def status_command(
    name: Annotated[
        str | None, typer.Argument(metavar="NAME", help="Only this spec.", autocompletion=spec_names)
    ] = None,
    output: Annotated[StatusFormat, typer.Option("--format", help="Output format.")] = StatusFormat.text,
    expect_every: Annotated[
        str | None,
        typer.Option(
            "--expect-every",
            callback=duration,
            metavar="DURATION",
            help="Warn (exit 1) when the last good reconcile pass is older than twice this (30m, 1h); default: "
            "the policy's liveness.expect_every.",
        ),
    ] = None,
    allow_stale: Annotated[
        bool,
        typer.Option(
            "--allow-stale",
            help="Exit 0 with what the store last recorded (Airflow unreachable, or offline JSON): every row "
            "still says stale.",
        ),
    ] = False,
) -> int:
    """Per spec: phase, backfill id, runs by state, progress and ETA (read only).

    Without BACKFILLCTL_AIRFLOW_URL it shows what the store last recorded, and says so.
    """
    from rich.console import Console

    from controller.commands.verbs.status import status_view
    from controller.core.model.policy import parse_span
    from controller.core.render import status

    settings = load_settings()
    if settings.airflow_url is None:
        sys.stderr.write("offline: BACKFILLCTL_AIRFLOW_URL is not set; showing what the store last recorded\n")
    view = status_view(settings, utc_now(), name, expect_every=parse_span(expect_every))
    if view.outage is not None:
        sys.stderr.write(
            plain(f"warning: Airflow is unreachable ({view.outage}); showing what the store last recorded") + "\n"
        )
    overdue = None if view.liveness is None else view.liveness.warning()
    if overdue is not None:
        sys.stderr.write(plain(f"warning: {overdue}") + "\n")
    if output is StatusFormat.json:
        import json

        document = {
            "format_version": 1,
            "phases": status.phase_counts(view.rows),
            "specs": [r.as_json() for r in view.rows],
            "findings": [{"kind": k, "message": m} for k, m in status.spec_findings(view.rows)],
            "stale": any(r.stale for r in view.rows),
        }
        if view.liveness is not None:
            document["liveness"] = view.liveness.as_json()
        out(json.dumps(document, indent=2) + "\n")
    elif tty():
        console = Console(highlight=False)
        console.print(status.phase_line(view.rows), markup=False)
        console.print(status_rich(view.rows, console.width))
        for kind, message in status.spec_findings(view.rows):
            console.print(plain(f"! {kind}: {message}"), markup=False, style="red")
    else:
        out(status.status_report(view.rows, width()))
    # stale rows are no live answer: a script exits 1 on them unless it says it may (`--allow-stale`)
    stale = any(r.stale for r in view.rows) and (view.outage is not None or output is StatusFormat.json)
    return ExitCode.ERROR if view.incomplete or overdue is not None or (stale and not allow_stale) else ExitCode.OK


class ReportFormat(StrEnum):
    text = "text"
    markdown = "markdown"
    json = "json"
    html = "html"


@app.command()
def report(
    name: Annotated[str, typer.Argument(metavar="NAME", help="The spec's name.", autocompletion=spec_names)],
    output: Annotated[
        ReportFormat | None,
        typer.Option(
            "--format",
            help="Output format (default: text on a terminal, markdown when piped or written to a file; html: one "
            "self-contained page).",
        ),
    ] = None,
    output_file: Annotated[
        Path | None, typer.Option("--output", metavar="FILE", help="Write the report to this file instead of stdout.")
    ] = None,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Re-read Airflow and check the finished spec's version coverage: exit 0 when every interval's "
            "latest run succeeded on the target DAG version, 1 when not (the intervals are listed). Text, or json.",
        ),
    ] = False,
) -> int:
    """The change record of one spec: who, why, what ran, the outcome, a calendar of the range, the audit trail.

    With BACKFILLCTL_AIRFLOW_URL set, the calendar (markdown and html) has a cell for every run of the range.
    """
    from controller.commands.verbs import report as report_cmd
    from controller.core.render.report_text import report_text

    settings = load_settings()
    if check:
        return _check(settings, name, output, output_file)
    if output is None:
        output = ReportFormat.text if output_file is None and tty() else ReportFormat.markdown
    if output is ReportFormat.json:
        text = report_cmd.json_report(settings, name, utc_now())
    elif output is ReportFormat.html:
        text = report_cmd.html_report(settings, name, utc_now())
    else:
        text = report_cmd.markdown_report(settings, name, utc_now())
        text = report_text(text) if output is ReportFormat.text else text
    if output_file is None:
        out(text)
    else:
        _write_report(output_file, text)
    return ExitCode.OK


def _check(settings: "Settings", name: str, output: ReportFormat | None, output_file: Path | None) -> int:
    """`report NAME --check`: the coverage verdict (text or json) and its exit code, 1 when it does not hold."""
    from controller.commands.verbs import report as report_cmd
    from controller.commands.verbs.status import report_document

    if output in (ReportFormat.markdown, ReportFormat.html):
        raise typer.BadParameter("--check writes text or json", param_hint="--format")
    record = report_document(settings, name, utc_now())
    text, document, holds = report_cmd.coverage_check(settings, record)
    shown = document if output is ReportFormat.json else text
    if output_file is None:
        out(shown)
    else:
        _write_report(output_file, shown)
    return ExitCode.OK if holds else ExitCode.ERROR


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
    from controller.commands.loop import notify as notify_cmd

    out(notify_cmd.status_render(notify_cmd.notify_status(load_settings()), json_format=output is StatusFormat.json))
    return ExitCode.OK
