"""The command line (typer): parse → settings → one orchestration call → render → exit code.

`main` is the one top-level error handler: user mistakes and controller errors print a located message
and exit with the code from `controller.errors.ExitCode`; anything unexpected prints one line and the
path of a traceback file (no local variables, no secrets) and exits 3.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import traceback
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.live import Live
from rich.table import Table

from controller import __version__
from controller.adapters.store import EventFilter
from controller.commands import audit as audit_cmd
from controller.commands import validate as validate_cmd
from controller.commands.reconcile import PassResult
from controller.commands.session import Stop, open_reconciler
from controller.commands.settings import Settings
from controller.core import audit_render, plan_render, render, status
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
    base: Annotated[str | None, typer.Option("--base", help="Compare with this git ref (e.g. origin/main).")] = None,
    pr_reviews: Annotated[
        Path | None, typer.Option("--pr-reviews", help="JSON of the PR's reviews (GitHub API).")
    ] = None,
    pr_author: Annotated[str | None, typer.Option("--pr-author", help="Login of the PR's author.")] = None,
    head_sha: Annotated[str | None, typer.Option("--head-sha", help="Approvals must be of this commit.")] = None,
) -> int:
    """Check specs: YAML, schema, semantic rules, policy, and with --base / --pr-reviews the PR rules.

    With BACKFILLCTL_AIRFLOW_URL set, also each spec's DAG: it exists, its schedule can be backfilled, and a
    partitioned DAG's range does not reach past now.
    """
    settings = _settings()
    checks = validate_cmd.GitChecks(base, pr_reviews, pr_author, head_sha)
    now = _now()
    result = validate_cmd.validate_paths(paths or [], settings.specs_dir, now, checks=checks)
    if settings.airflow_url and result.loaded:  # with Airflow configured, check each spec's DAG too
        from controller.commands.reconcile import make_client  # noqa: PLC0415 - only validate with Airflow needs httpx

        with make_client(settings) as client:
            result = validate_cmd.check_dags(result, lambda dag_id: client.dag(dag_id, with_tasks=False), now)
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
    from_date: Annotated[
        str, typer.Option("--from", help="First logical date (partition date for a partitioned DAG), e.g. 2025-01-01.")
    ],
    to_date: Annotated[str, typer.Option("--to", help="Last logical date or partition date (inclusive).")],
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


class PlanFormat(StrEnum):
    text = "text"
    markdown = "markdown"
    json = "json"


@app.command()
def plan(
    output: Annotated[PlanFormat, typer.Option("--format", help="Output format.")] = PlanFormat.text,
    detailed_exitcode: Annotated[
        bool, typer.Option("--detailed-exitcode", help="Exit 4 when there are changes.")
    ] = False,
) -> int:
    """Compare the specs with Airflow and print what reconcile would do (read only)."""
    with open_reconciler(_settings()) as reconciler:
        result, _specs, _world = reconciler.plan()
    renderers = {
        PlanFormat.text: plan_render.plan_text,
        PlanFormat.markdown: plan_render.plan_markdown,
        PlanFormat.json: plan_render.plan_json,
    }
    _out(renderers[output](result))
    if any(i.error for i in result.items):
        return ExitCode.ERROR
    return ExitCode.CHANGES if detailed_exitcode and result.changes else ExitCode.OK


@app.command()
def reconcile(
    once: Annotated[bool, typer.Option("--once", help="One pass (the default).")] = False,
    watch: Annotated[bool, typer.Option("--watch", help="Keep reconciling until SIGTERM/SIGINT.")] = False,
    interval: Annotated[float, typer.Option("--interval", min=1.0, help="Seconds between passes.")] = 30.0,
    until_complete: Annotated[
        bool, typer.Option("--until-complete", help="Repeat until every spec is finished, paused or blocked.")
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; change nothing.")] = False,
    plan_checksum: Annotated[str | None, typer.Option("--plan-checksum", help="Refuse if the plan differs.")] = None,
    wait_lock: Annotated[bool, typer.Option("--wait-lock", help="Wait for another reconciler to finish.")] = False,
) -> int:
    """Make Airflow's backfills match the specs, auditing every action."""
    if once and (watch or until_complete):
        raise typer.BadParameter("--once cannot be combined with --watch or --until-complete")
    stop = Stop()
    if watch or until_complete:
        stop.install()
    shown = [""]
    live_view = Live(Table(), refresh_per_second=2, transient=False) if (watch or until_complete) and _tty() else None
    with (
        open_reconciler(_settings(), lease=not dry_run, wait_lock=wait_lock) as reconciler,
        live_view or contextlib.nullcontext(),
    ):
        while True:
            result = reconciler.run_once(dry_run=dry_run, plan_checksum=plan_checksum)
            if live_view is not None:
                live_view.update(_status_table(status.status_rows(result.current, {})))
            mode = "rich" if live_view is not None else ("text" if watch or until_complete else "once")
            _report_pass(result, dry_run, mode, shown)
            plan_checksum = None  # a reviewed plan gates the first pass only
            if dry_run or stop.requested or not (watch or until_complete) or (until_complete and result.settled):
                return _pass_exit(result)
            stop.wait(interval)
            if stop.requested:
                return _pass_exit(result)
            reconciler.heartbeat()


def _report_pass(result: PassResult, dry_run: bool, mode: str, shown: list[str]) -> None:
    """once: the plan; text: the status table whenever it moved; rich: the live view shows the table."""
    if dry_run or mode == "once":
        _out(plan_render.plan_text(result.plan))
    for item, outcome in result.applied:
        _out(f"{plan_render.SYMBOLS[item.kind]} {item.kind.value} {item.spec}: {outcome}\n")
    table = status.status_text(status.status_rows(result.current, {}))
    if mode == "text" and table != shown[0]:
        _out(f"[{_now().strftime('%H:%M:%S')}]\n{table}")
        shown[0] = table
    for line in result.refused:
        sys.stderr.write(f"refused: {line}\n")
    for line in result.errors:
        sys.stderr.write(f"error: {line}\n")


def _pass_exit(result: PassResult) -> int:
    if result.refused:
        return ExitCode.REFUSED
    return ExitCode.ERROR if result.errors else ExitCode.OK


def _tty() -> bool:
    return sys.stdout.isatty()


def _status_table(rows: list[status.StatusRow]) -> Table:
    colours = {
        "Succeeded": "green",
        "CompletedWithFailures": "yellow",
        "Cancelled": "magenta",
        "Blocked": "red",
        "Orphaned": "red",
        "Running": "cyan",
        "Paused": "blue",
    }
    table = Table(title=f"backfillctl status {_now().strftime('%H:%M:%S')}")
    for column in (
        "spec",
        "DAG",
        "phase",
        "backfill",
        "ok",
        "failed",
        "running",
        "queued",
        "total",
        "done",
        "ETA",
        "note",
    ):
        table.add_column(
            column, justify="right" if column in ("ok", "failed", "running", "queued", "total", "done") else "left"
        )
    for r in rows:
        phase = f"[{colours[r.phase]}]{r.phase}[/]" if r.phase in colours else r.phase
        table.add_row(
            r.spec,
            r.dag_id,
            phase,
            str(r.backfill_id or "-"),
            str(r.success),
            str(r.failed),
            str(r.running),
            str(r.queued),
            str(r.total),
            f"{r.progress:.0f}%",
            status.eta_text(r.eta_seconds),
            r.note,
        )
    return table


class StatusFormat(StrEnum):
    text = "text"
    json = "json"


@app.command("status")
def status_command(
    name: Annotated[str | None, typer.Argument(help="Only this spec.")] = None,
    output: Annotated[StatusFormat, typer.Option("--format")] = StatusFormat.text,
) -> int:
    """Per spec: phase, backfill id, runs by state, progress and ETA (read only).

    Without BACKFILLCTL_AIRFLOW_URL it shows what the store last recorded, and says so.
    """
    settings = _settings()
    failed = False
    if settings.airflow_url is None:
        specs = validate_cmd.validate_paths([], settings.specs_dir, _now()).specs
        sys.stderr.write("offline: BACKFILLCTL_AIRFLOW_URL is not set; showing what the store last recorded\n")
        all_rows = status.stored_rows(specs, audit_cmd.stored_bindings(settings))
    else:
        with open_reconciler(settings) as reconciler:
            current, _specs, _world = reconciler.plan(with_dry_runs=False)
            all_rows = status.status_rows(current, reconciler.store.bindings())
        failed = any(i.error for i in current.items)
    rows = [r for r in all_rows if name is None or r.spec == name]
    if name is not None and not rows:
        raise typer.BadParameter(f"no spec named {name!r}")
    if output is StatusFormat.json:
        _out(json.dumps({"format_version": 1, "specs": [r.as_json() for r in rows]}, indent=2) + "\n")
    elif _tty():
        Console().print(_status_table(rows))
    else:
        _out(status.status_text(rows))
    return ExitCode.ERROR if failed else ExitCode.OK


class ReportFormat(StrEnum):
    markdown = "markdown"
    json = "json"


@app.command()
def report(
    name: Annotated[str, typer.Argument(help="The spec's name.")],
    output: Annotated[ReportFormat, typer.Option("--format")] = ReportFormat.markdown,
) -> int:
    """The change record of one spec: who, why, what ran, the outcome, and its audit trail."""
    settings = _settings()
    result = validate_cmd.validate_paths([], settings.specs_dir, _now())
    spec = next((s for s in result.specs if s.name == name), None)
    if spec is None:
        raise typer.BadParameter(f"no spec named {name!r} under {settings.specs_dir}")
    stored, events = audit_cmd.spec_record(settings, name)
    document = status.report_json(spec, stored, events)
    _out(
        json.dumps(document, indent=2) + "\n"
        if output is ReportFormat.json
        else status.report_markdown(document, events)
    )
    return ExitCode.OK


audit_app = typer.Typer(help="Read and check the audit log.", no_args_is_help=True)
store_app = typer.Typer(help="Manage the store: schema migrations and stuck leases.", no_args_is_help=True)
app.add_typer(audit_app, name="audit")
app.add_typer(store_app, name="store")


class AuditFormat(StrEnum):
    text = "text"
    json = "json"


@audit_app.command("show")
def audit_show(
    spec: Annotated[str | None, typer.Option("--spec", help="Only events of this spec.")] = None,
    dag: Annotated[str | None, typer.Option("--dag", help="Only events of this DAG.")] = None,
    action: Annotated[str | None, typer.Option("--action", help="Only this action (create, pause, …).")] = None,
    since: Annotated[str | None, typer.Option("--since", help="Only events at or after this UTC time.")] = None,
    output: Annotated[AuditFormat, typer.Option("--format")] = AuditFormat.text,
) -> int:
    """Print audit events, oldest first."""
    line = audit_render.record_line if output is AuditFormat.text else audit_render.record_json
    for record in audit_cmd.show(_settings(), EventFilter(spec, dag, action, since)):
        _out(line(record) + "\n")
    return ExitCode.OK


@audit_app.command("verify")
def audit_verify(
    expect_head: Annotated[
        str | None, typer.Option("--expect-head", help="A head hash saved earlier: detects truncation.")
    ] = None,
) -> int:
    """Recompute the hash chain; exit 1 at the first edited, missing, reordered or truncated record."""
    result = audit_cmd.verify(_settings(), expect_head)
    _out(audit_render.verify_text(result))
    return ExitCode.OK if result.ok else ExitCode.ERROR


class ExportFormat(StrEnum):
    jsonl = "jsonl"


@audit_app.command("export")
def audit_export(
    output: Annotated[ExportFormat, typer.Option("--format")] = ExportFormat.jsonl,
    since: Annotated[str | None, typer.Option("--since")] = None,
    spec: Annotated[str | None, typer.Option("--spec")] = None,
) -> int:
    """Stream every event as one canonical JSON object per line (for a central log platform)."""
    for record in audit_cmd.show(_settings(), EventFilter(spec=spec, since=since)):
        sys.stdout.write(audit_render.record_jsonl(record) + "\n")
    sys.stdout.flush()
    return ExitCode.OK


@store_app.command("migrate")
def store_migrate() -> int:
    """Upgrade the store's schema to this version's newest (also done automatically on every open)."""
    before, after = audit_cmd.migrate(_settings())
    _out(f"store schema at revision {after}" + (f" (was {before})" if before != after else " (already current)") + "\n")
    return ExitCode.OK


@store_app.command("unlock")
def store_unlock(lease_id: Annotated[str, typer.Argument(help="The exact lease id to release.")]) -> int:
    """Release a stuck reconcile lease (audited)."""
    released = audit_cmd.unlock(_settings(), lease_id)
    _out(f"released the lease of {released.describe()}\n")
    return ExitCode.OK


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
