"""The command line (typer): parse → settings → one orchestration call → render → exit code.

`main` is the one top-level error handler: user mistakes and controller errors print a located message
and exit with the code from `controller.errors.ExitCode`; anything unexpected prints one line and the
path of a traceback file (no local variables, no secrets) and exits 3.
"""

# No `from __future__ import annotations` here: typer reads every command's annotations at each start, and
# string annotations would be compiled and evaluated again each time (tens of ms); names imported only for
# type checking are quoted instead.
import contextlib
import os
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from controller import __version__
from controller.commands.settings import Settings
from controller.core.audit.chain import ACTIONS
from controller.core.documents.escaping import plain, plain_lines
from controller.core.documents.starter import DEFAULT_ENVIRONMENT, PLACEHOLDER_REPO
from controller.core.model.spec import ReprocessBehavior, parse_date
from controller.core.render.scaffold import DATE_TO_HELP
from controller.errors import ControllerError, ExitCode, UsageError

if TYPE_CHECKING:  # the heavy modules (httpx, SQLAlchemy, GitPython, rich) load only in the commands that use them
    from rich.console import Group, RenderableType
    from rich.table import Table

    from controller.commands.reconcile import PassResult
    from controller.core.plan.provenance import Evidence
    from controller.core.plan.values import Plan
    from controller.core.render.status import StatusRow

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


# an argument's help shows its metavar (`[PATH]...`), not the Python type typer adds after it (`<list[Path]>`)
typer.core.TyperArgument.display_type_rich = _argument_metavar_only  # type: ignore[method-assign,assignment]


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


def _width() -> int | None:
    """The width to fit: COLUMNS, else the terminal's; none for a pipe or a file (one line a row, for grep)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return shutil.get_terminal_size().columns if _tty() else None


def _print_version(value: bool) -> None:
    if value:
        _out(f"backfillctl {__version__}\n")
        raise typer.Exit(0)


DAY = 86_400.0


def _seconds(low: float, high: float) -> Callable[[float | None], float | None]:
    """A callback refusing seconds outside [low, high]: infinity, and NaN too (it fails every comparison)."""

    def check(value: float | None) -> float | None:
        if value is not None and not low <= value <= high:
            raise typer.BadParameter(f"{value:g} is not between {low:.0f} and {high:.0f} seconds")
        return value

    return check


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
    from controller.adapters.logsetup import install_last_resort

    install_last_resort()
    if log_format is not None:
        from controller.commands.logs import configure_logging

        configure_logging(log_format.value, os.environ)


@app.command()
def validate(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(metavar="PATH", help="Spec files or folders (default: the specs folder)."),
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
    from controller.commands import validate as validate_cmd
    from controller.core.render import validation as render

    settings = _settings()
    checks = validate_cmd.GitChecks(base, pr_reviews, pr_author, head_sha)
    now = _now()
    result = validate_cmd.validate_paths(paths or [], settings.specs_dir, now, checks=checks)
    if settings.airflow_url and result.loaded:  # with Airflow configured, check each spec's DAG too
        result = validate_cmd.check_dags_in_airflow(result, settings, now)
    renderers = {
        ValidateFormat.text: render.validation_text,
        ValidateFormat.json: render.validation_json,
        ValidateFormat.github: render.validation_github,
    }
    _out(renderers[output](result))
    return ExitCode.OK if result.ok else ExitCode.ERROR


RETRY_NOTE = "Required, unless --retry-failed-of takes it from the finished spec."


@app.command()
def new(
    name: Annotated[str, typer.Argument(metavar="NAME", help="Spec name; also the file name (specs/NAME.yaml).")],
    dag_id: Annotated[
        str | None, typer.Option("--dag-id", help=f"The DAG to backfill. {RETRY_NOTE}", show_default=False)
    ] = None,
    from_date: Annotated[
        str | None,
        typer.Option(
            "--from",
            help="First logical date (partition date for a partitioned DAG), inclusive: 2025-01-01 (00:00 UTC) "
            f"or a date-time with an offset. {RETRY_NOTE}",
        ),
    ] = None,
    to_date: Annotated[
        str | None,
        typer.Option(
            "--to",
            help=f"Last logical date or partition date, inclusive; {DATE_TO_HELP} "
            f"(give 2025-01-31T23:00:00Z for the whole day). {RETRY_NOTE}",
        ),
    ] = None,
    reprocess: Annotated[
        ReprocessBehavior | None,
        typer.Option(
            "--reprocess",
            help="Which existing runs to re-run: none (only dates without a run) | failed | completed (all). "
            "Required: choose deliberately (--retry-failed-of: failed).",
        ),
    ] = None,
    ticket: Annotated[
        str | None,
        typer.Option("--ticket", help=f"The change ticket that authorises the backfill. {RETRY_NOTE}"),
    ] = None,
    reason: Annotated[
        str | None,
        typer.Option(
            "--reason",
            help="Why the backfill is needed, in a sentence (>= 10 characters). Required, unless "
            "--retry-failed-of writes one naming the finished spec.",
        ),
    ] = None,
    approver: Annotated[
        list[str] | None,
        typer.Option(
            "--approver", metavar="LOGIN", help=f"Who must approve the pull request; repeat for each. {RETRY_NOTE}"
        ),
    ] = None,
    requested_by: Annotated[
        str | None,
        typer.Option(
            "--requested-by", help="Who asks for it (default: BACKFILLCTL_ACTOR, GITHUB_ACTOR or the OS user)."
        ),
    ] = None,
    max_active_runs: Annotated[
        int | None,
        typer.Option(
            "--max-active-runs",
            min=1,
            metavar="N",
            help="Runs of this backfill at once (Airflow's backfill limit; default 1, or the finished spec's).",
        ),
    ] = None,
    expected_runs: Annotated[
        int | None,
        typer.Option(
            "--expected-runs",
            min=1,
            metavar="N",
            help="The reviewed upper bound of runs (default: Airflow's dry-run count when BACKFILLCTL_AIRFLOW_URL "
            "is set, else left out; --retry-failed-of: the finished spec's failed runs).",
        ),
    ] = None,
    retry_failed_of: Annotated[
        str | None,
        typer.Option(
            "--retry-failed-of",
            metavar="SPEC",
            help="Write the follow-up of a finished spec: its DAG, from its first to its last failed run, "
            "reprocess failed, its ticket and approvers, expected_runs its failed runs (from the store).",
        ),
    ] = None,
) -> int:
    """Write a new spec that validates (nothing is written when it would not: exit 1).

    With BACKFILLCTL_AIRFLOW_URL set, expected_runs is what Airflow's dry run counts; without it, it is left out
    and `backfillctl plan` shows the count. With --retry-failed-of SPEC, the spec re-runs SPEC's failed runs.
    """
    from controller.commands.new import new_spec, retry_spec
    from controller.core.render import validation as render
    from controller.core.render.scaffold import NewSpec

    settings = _settings()
    given = {"--dag-id": dag_id, "--from": from_date, "--to": to_date, "--reprocess": reprocess}
    if retry_failed_of is not None:
        clash = [option for option, value in given.items() if value is not None]
        if clash:
            raise UsageError(
                f"{', '.join(clash)} cannot be combined with --retry-failed-of: the follow-up takes them from "
                f"{retry_failed_of}",
                hint="leave them out; --ticket, --reason, --approver and --max-active-runs may still be given",
            )
        choices = {"ticket": ticket, "reason": reason, "approvers": tuple(approver or ())}
        actor = requested_by or settings.actor
        spec = retry_spec(settings, retry_failed_of, name, actor, max_active_runs, choices, _now())
    else:
        required = {**given, "--ticket": ticket, "--reason": reason, "--approver": approver or None}
        if not (dag_id and from_date and to_date and reprocess and ticket and reason and approver):
            _missing([option for option, value in required.items() if not value])
        spec = NewSpec(
            name=name,
            dag_id=dag_id,
            from_date=from_date,
            to_date=to_date,
            reprocess=reprocess,
            max_active_runs=max_active_runs or 1,
            requested_by=requested_by or settings.actor,
            ticket=ticket,
            approvers=tuple(approver),
            expected_runs=expected_runs,
            reason=reason,
        )
    if expected_runs is not None:
        spec = replace(spec, expected_runs=expected_runs)
    path, result, written = new_spec(spec, settings, _now())
    _out(f"wrote {path}\n")
    if written.retry is not None:
        _out(plain_lines([f"retries the {written.retry.failed} failed run(s) of {written.retry.original}"]))
    if written.counted is not None:
        _out(f"expected_runs: {written.counted.runs}, from Airflow's dry run\n")
    elif written.expected_runs is None:
        _out("expected_runs: left out (BACKFILLCTL_AIRFLOW_URL is not set); `backfillctl plan` shows the count\n")
    if result.diagnostics:
        _out(render.validation_text(result))
    _out("next: `backfillctl plan`, then open a pull request with the file\n")
    return ExitCode.OK


def _missing(options: list[str]) -> NoReturn:
    """Click's words for a missing option (exit 2): they are required unless --retry-failed-of is given."""
    raise UsageError(
        f"Missing option '{options[0]}'" + (f" (and {', '.join(options[1:])})" if options[1:] else ""),
        hint="`backfillctl new --help` says what each takes; --retry-failed-of SPEC takes them from a finished spec",
    )


@app.command()
def init(
    directory: Annotated[Path, typer.Argument(help="The new specs repository (created when missing).")],
    workflows_repo: Annotated[
        str,
        typer.Option(
            "--workflows-repo",
            help="OWNER/REPO of backfillctl, whose reusable workflows and pre-commit hook the files call "
            "(the default is a placeholder to replace).",
        ),
    ] = PLACEHOLDER_REPO,
    ref: Annotated[
        str, typer.Option("--ref", help="Tag or commit SHA of backfillctl to pin them to (default: this version).")
    ] = f"v{__version__}",
    environment: Annotated[
        str, typer.Option("--environment", help="GitHub environment holding the reconcile job's secrets.")
    ] = DEFAULT_ENVIRONMENT,
    force: Annotated[bool, typer.Option("--force", help="Overwrite files that exist already.")] = False,
) -> int:
    """Scaffold a team's specs repository: policy, an example spec, pre-commit, workflows, CODEOWNERS, README."""
    from controller.commands.init import init_repository
    from controller.core.documents.starter import StarterOptions

    options = StarterOptions(workflows_repo, ref, environment)
    for item in init_repository(directory, options, force=force):
        _out(f"{'overwrote' if item.replaced else 'wrote'} {item.path}\n")
    if options.placeholder:
        _out(
            f"note: the workflows and the pre-commit hook call {workflows_repo}, a placeholder: run init again "
            "with --workflows-repo OWNER/REPO --force, or replace it in those files\n"
        )
    _out(f"next: cd {directory} && backfillctl validate; then delete the example spec before the first merge\n")
    return ExitCode.OK


class PlanFormat(StrEnum):
    text = "text"
    markdown = "markdown"
    json = "json"


@app.command()
def plan(
    output: Annotated[PlanFormat, typer.Option("--format", help="Output format.")] = PlanFormat.text,
    detailed_exitcode: Annotated[
        bool,
        typer.Option("--detailed-exitcode", help="Exit 4 when there are changes (a refusal still exits 5)."),
    ] = False,
    no_store: Annotated[
        bool, typer.Option("--no-store", help="Plan without the store (no bindings): reads like a first apply.")
    ] = False,
    pr_comment: Annotated[
        Path | None,
        typer.Option(
            "--pr-comment",
            help="Markdown for the PR's sticky comment: the specs changed in FILE (`git diff -z --name-only`) first; "
            "only their refusals exit 5.",
        ),
    ] = None,
) -> int:
    """Compare the specs with Airflow and print what reconcile would do (read only).

    Exits 5 when reconcile would refuse a create (the dry run counts more runs than expected_runs or the
    policy's max_runs), so a pull request check fails before the merge, not after it.
    """
    from controller.commands import pr_comment as pr_comment_cmd
    from controller.commands.session import open_reconciler
    from controller.core.plan.values import refusals
    from controller.core.render import plan as plan_render

    if pr_comment is not None and output is not PlanFormat.markdown:
        raise typer.BadParameter("--pr-comment needs --format markdown", param_hint="--pr-comment")
    changed = None if pr_comment is None else pr_comment_cmd.read_changed(pr_comment)
    with open_reconciler(_settings(), read_only=True, no_store=no_store) as reconciler:
        result, specs, _world = reconciler.plan()
    renderers: dict[PlanFormat, Callable[[Plan], str]] = {
        PlanFormat.text: lambda p: plan_render.plan_text(p, _width()),
        PlanFormat.markdown: plan_render.plan_markdown,
        PlanFormat.json: plan_render.plan_json,
    }
    _out(renderers[output](result) if changed is None else pr_comment_cmd.render(result, specs, changed))
    refused = refusals(result, None if changed is None else pr_comment_cmd.changed_specs(changed))
    for item in refused:
        sys.stderr.write(f"refused: {item.spec}: {item.reason}\n")
    if refused:
        return ExitCode.REFUSED
    if any(i.error for i in result.items) or not result.complete:
        return ExitCode.ERROR
    return ExitCode.CHANGES if detailed_exitcode and result.changes else ExitCode.OK


@app.command()
def reconcile(
    once: Annotated[bool, typer.Option("--once", help="One pass (the default).")] = False,
    watch: Annotated[bool, typer.Option("--watch", help="Keep reconciling until SIGTERM/SIGINT.")] = False,
    interval: Annotated[
        float,
        typer.Option(
            "--interval", callback=_seconds(1, DAY), metavar="SECONDS", help="Seconds between passes (1 to 86400)."
        ),
    ] = 30.0,
    until_complete: Annotated[
        bool, typer.Option("--until-complete", help="Repeat until every spec is finished, paused or blocked.")
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; change nothing.")] = False,
    plan_checksum: Annotated[str | None, typer.Option("--plan-checksum", help="Refuse if the plan differs.")] = None,
    wait_lock: Annotated[bool, typer.Option("--wait-lock", help="Wait for another reconciler to finish.")] = False,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            callback=_seconds(1, 30 * DAY),
            metavar="SECONDS",
            help="With --until-complete: give up (exit 1) after this many seconds (1 to 30 days).",
        ),
    ] = None,
    fail_on_failures: Annotated[
        bool,
        typer.Option(
            "--fail-on-failures",
            help="Exit 1 when a spec ended CompletedWithFailures or Blocked (refusals exit 5 anyway).",
        ),
    ] = False,
    lock_timeout: Annotated[
        float | None,
        typer.Option(
            "--lock-timeout",
            callback=_seconds(0, DAY),
            metavar="SECONDS",
            help="Wait for the lease at most S seconds (0 to 86400), then exit 5.",
        ),
    ] = None,
    metrics_port: Annotated[
        int | None,
        typer.Option(
            "--metrics-port", min=0, max=65535, metavar="PORT", help="Serve /metrics, /healthz and a status page /."
        ),
    ] = None,
    metrics_host: Annotated[str, typer.Option("--metrics-host", help="Address to serve on.")] = "127.0.0.1",
    unhealthy_after: Annotated[
        int,
        typer.Option(
            "--unhealthy-after", min=1, metavar="N", help="/healthz answers 503 after this many failed passes."
        ),
    ] = 3,
    allow_dirty: Annotated[
        bool,
        typer.Option(
            "--allow-dirty",
            help="Also apply spec files that differ from HEAD (untracked, modified): for local experiments; "
            "warned and audited.",
        ),
    ] = False,
    pr_reviews: Annotated[
        Path | None,
        typer.Option("--pr-reviews", help="The merged PR's reviews: its approval gate is checked before a create."),
    ] = None,
    pr_number: Annotated[
        int | None, typer.Option("--pr-number", min=1, metavar="N", help="The merged PR's number.")
    ] = None,
    pr_author: Annotated[str | None, typer.Option("--pr-author", help="Login of the merged PR's author.")] = None,
) -> int:
    """Make Airflow's backfills match the specs, auditing every action; deliver notifications after each pass."""
    from rich.live import Live
    from rich.table import Table

    from controller.commands.passhooks import MonitorOptions
    from controller.commands.run import LoopOptions, Repeat, reconcile_loop
    from controller.core.render import status

    if once and (watch or until_complete):
        raise typer.BadParameter("--once cannot be combined with --watch or --until-complete")
    if timeout is not None and not until_complete:
        raise typer.BadParameter("--timeout goes with --until-complete")
    repeat = Repeat.UNTIL_COMPLETE if until_complete else Repeat.WATCH if watch else Repeat.ONCE
    monitor = MonitorOptions(metrics_port, metrics_host, unhealthy_after, refresh_seconds=max(5, int(interval)))
    evidence = _evidence(pr_reviews, pr_number, pr_author)
    options = LoopOptions(
        repeat,
        interval,
        dry_run,
        plan_checksum,
        timeout,
        wait_lock,
        lock_timeout,
        monitor,
        allow_dirty=allow_dirty,
        evidence=evidence,
    )
    live = Live(Table(), refresh_per_second=2, transient=False) if repeat is not Repeat.ONCE and _tty() else None
    mode = "rich" if live is not None else ("once" if repeat is Repeat.ONCE else "text")
    view = PassView(dry_run, mode, watch=repeat is Repeat.WATCH)

    def on_pass(result: "PassResult") -> None:
        if live is not None:
            live.update(_status_view(status.status_rows(result.current, {}), live.console.width))
        view.show(result)

    with live or contextlib.nullcontext():
        end = reconcile_loop(_settings(), options, on_pass)
    for line in end.last.stuck_lines() if until_complete and not end.timed_out else []:
        sys.stderr.write(f"stuck: {line}\n")
    return _timed_out(end.last, timeout or 0.0) if end.timed_out else _pass_exit(end.last, fail_on_failures)


def _evidence(reviews: Path | None, number: int | None, author: str | None) -> "Evidence | None":
    """The approval gate at reconcile takes the three together: the reviews, of which PR, opened by whom."""
    if reviews is None or number is None or author is None:
        if reviews is None and number is None and author is None:
            return None
        raise typer.BadParameter("--pr-reviews, --pr-number and --pr-author go together", param_hint="--pr-reviews")
    from controller.commands.validate import read_evidence

    return read_evidence(reviews, number, author)


class PassView:
    """once: the plan; text: the status table whenever it moved; rich: a live view shows the table. Under --watch
    (a log read later) each line carries its time, and a pass's refusals and errors only when they changed."""

    def __init__(self, dry_run: bool, mode: str, watch: bool = False) -> None:
        self.dry_run, self.mode, self.watch, self.shown, self.said = dry_run, mode, watch, "", ""

    def show(self, result: "PassResult") -> None:
        from controller.core.render import plan as plan_render
        from controller.core.render import status

        if self.dry_run or self.mode == "once":
            _out(plan_render.plan_text(result.plan, _width()))
        after = {i.spec: i for i in result.current.items}
        _out(self._stamp([plan_render.applied_line(i, o, after.get(i.spec)) for i, o in result.applied]))
        table = status.status_text(status.status_rows(result.current, {}), _width())
        if self.mode == "text" and table != self.shown:
            _out(f"[{_iso_now()}]\n{table}")
            self.shown = table
        said = plain_lines(
            [f"refused: {line}" for line in result.refused] + [f"error: {line}" for line in result.errors]
        )
        if not self.watch or said != self.said:
            sys.stderr.write(self._stamp(said.splitlines()))
            self.said = said

    def _stamp(self, lines: list[str]) -> str:
        return plain_lines([f"{_iso_now()} {line}" for line in lines] if self.watch else lines)


def _iso_now() -> str:
    return _now().strftime("%Y-%m-%dT%H:%M:%SZ")


def _pass_exit(result: "PassResult", fail_on_failures: bool = False) -> int:
    from controller.core.model.binding import Phase

    if result.refused:
        return ExitCode.REFUSED
    unsuccessful = [
        f"{i.spec} ended {i.phase.value}: {i.reason}"
        for i in result.current.items
        if i.phase in (Phase.COMPLETED_WITH_FAILURES, Phase.BLOCKED)
    ]
    if fail_on_failures:
        sys.stderr.write(plain_lines([f"failed: {line}" for line in unsuccessful]))
    return ExitCode.ERROR if result.errors or (fail_on_failures and unsuccessful) else ExitCode.OK


def _timed_out(result: "PassResult", timeout: float) -> int:
    from controller.core.model.binding import Phase

    waiting = [i.spec for i in result.current.items if i.phase in (Phase.PENDING, Phase.QUEUED, Phase.RUNNING)]
    sys.stderr.write(
        f"error: --timeout {timeout:g}s reached before every spec settled; still going: {', '.join(waiting)}\n"
        "  hint: nothing was stopped; run `backfillctl status` to follow them, or reconcile again\n"
    )
    return ExitCode.ERROR


def _tty() -> bool:
    return sys.stdout.isatty()


_COLOURS = {
    "Succeeded": "green",
    "CompletedWithFailures": "yellow",
    "Cancelled": "magenta",
    "Blocked": "red",
    "Orphaned": "red",
    "Running": "cyan",
    "Paused": "blue",
}


def _status_view(rows: "list[StatusRow]", width: int) -> "RenderableType":
    """A table when every name fits whole beside a note of some width, else a small block of lines per spec."""
    from controller.core.render.layout import NOTE_MIN
    from controller.core.render.status import STATUS_COLUMNS, cells

    sizes = [max([len(c.header), *(len(cells(r)[n]) for r in rows)]) for n, c in enumerate(STATUS_COLUMNS)]
    fits = sum(sizes) + 3 * (len(sizes) + 1) + 1 + NOTE_MIN <= width  # a box rule and two spaces of padding each
    return _status_table(rows) if fits else _status_blocks(rows)


def _status_blocks(rows: "list[StatusRow]") -> "Group":
    from rich.console import Group
    from rich.text import Text

    from controller.core.render.status import eta_text

    lines: list[RenderableType] = [Text(f"backfillctl status {_now().strftime('%H:%M:%S')}", style="bold")]
    for r in rows:
        head = Text(plain(r.spec), style="bold")
        head.append(plain(f"  DAG {r.dag_id}") + (f"  backfill #{r.backfill_id}" if r.backfill_id else ""))
        body = Text("  ")
        body.append(r.phase, style=_COLOURS.get(r.phase, ""))
        body.append(f"  {r.progress:.0f}% done, ETA {eta_text(r.eta_seconds)}")
        runs = f"  runs: {r.success} ok, {r.failed} failed, {r.running} running, {r.queued} queued of {r.total}"
        lines += [head, body, Text(runs), *([Text(plain(f"  {r.note}"))] if r.note else [])]
    return Group(*lines)


def _status_table(rows: "list[StatusRow]") -> "Table":
    from rich.markup import escape
    from rich.table import Table

    from controller.core.render.status import eta_text

    table = Table(title=f"backfillctl status {_now().strftime('%H:%M:%S')}")
    for column in ("spec", "DAG", "phase", "backfill", "ok", "failed", "running", "queued", "total", "done", "ETA"):
        table.add_column(column, justify="left" if column in ("spec", "DAG", "phase") else "right", no_wrap=True)
    table.add_column("note", overflow="fold")
    for r in rows:
        phase = f"[{_COLOURS[r.phase]}]{r.phase}[/]" if r.phase in _COLOURS else r.phase
        table.add_row(
            escape(plain(r.spec)),
            escape(plain(r.dag_id)),
            phase,
            str(r.backfill_id or "-"),
            str(r.success),
            str(r.failed),
            str(r.running),
            str(r.queued),
            str(r.total),
            f"{r.progress:.0f}%",
            eta_text(r.eta_seconds),
            escape(plain(r.note)),
        )
    return table


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

    settings = _settings()
    if settings.airflow_url is None:
        sys.stderr.write("offline: BACKFILLCTL_AIRFLOW_URL is not set; showing what the store last recorded\n")
    view = status_view(settings, _now(), name)
    if output is StatusFormat.json:
        import json

        document = {
            "format_version": 1,
            "phases": status.phase_counts(view.rows),
            "specs": [r.as_json() for r in view.rows],
            "findings": [{"kind": k, "message": m} for k, m in status.spec_findings(view.rows)],
        }
        _out(json.dumps(document, indent=2) + "\n")
    elif _tty():
        console = Console(highlight=False)
        console.print(status.phase_line(view.rows), markup=False)
        console.print(_status_view(view.rows, console.width))
        for kind, message in status.spec_findings(view.rows):
            console.print(plain(f"! {kind}: {message}"), markup=False, style="red")
    else:
        _out(status.status_report(view.rows, _width()))
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
        Path | None, typer.Option("--output", help="Write the report to this file instead of stdout.")
    ] = None,
) -> int:
    """The change record of one spec: who, why, what ran, the outcome, a calendar of the range, the audit trail.

    With BACKFILLCTL_AIRFLOW_URL set, the calendar (markdown and html) has a cell for every run of the range.
    """
    import json

    from controller.commands import report as report_cmd
    from controller.commands.status import report_document

    settings = _settings()
    if output is ReportFormat.json:
        text = json.dumps(report_document(settings, name, _now())[0], indent=2) + "\n"
    elif output is ReportFormat.html:
        text = report_cmd.html_report(settings, name, _now())
    else:
        text = report_cmd.markdown_report(settings, name, _now())
    if output_file is None:
        _out(text)
    else:
        _write_report(output_file, text)
    return ExitCode.OK


def _write_report(path: Path, text: str) -> None:
    try:
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise typer.BadParameter(f"cannot write {path}: {exc.strerror}", param_hint="--output") from None
    sys.stderr.write(f"wrote {path}\n")


notify_app = typer.Typer(help="Webhook notifications of backfill events.", no_args_is_help=True)
app.add_typer(notify_app, name="notify")


@notify_app.command("status")
def notify_status(
    output: Annotated[StatusFormat, typer.Option("--format", help="Output format.")] = StatusFormat.text,
) -> int:
    """Undelivered notifications: pending, and failed (retried with backoff until delivered). Read only."""
    from controller.commands import notify as notify_cmd

    _out(notify_cmd.status_render(notify_cmd.notify_status(_settings()), json_format=output is StatusFormat.json))
    return ExitCode.OK


audit_app = typer.Typer(help="Read and check the audit log.", no_args_is_help=True)
store_app = typer.Typer(help="Manage the store: schema migrations and stuck leases.", no_args_is_help=True)
app.add_typer(audit_app, name="audit")
app.add_typer(store_app, name="store")


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
        moment = _now() - timedelta(**{_AGE_UNITS[age[2]]: int(age[1])}) if age else parse_date(value)
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
    spec: Annotated[str | None, typer.Option("--spec", help="Only events of this spec.")] = None,
    dag: Annotated[str | None, typer.Option("--dag", help="Only events of this DAG.")] = None,
    action: Annotated[
        str | None, typer.Option("--action", help=f"Only this action: {', '.join(ACTIONS)}.", callback=_action)
    ] = None,
    since: Annotated[str | None, typer.Option("--since", help=SINCE_HELP, callback=_since)] = None,
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
    from controller.adapters.store import EventFilter
    from controller.commands import audit as audit_cmd
    from controller.core.render import audit as audit_render

    if limit is not None and tail is not None:
        raise typer.BadParameter("--limit is the first N, --tail the last N: give one", param_hint="--tail")
    line = audit_render.record_line if output is AuditFormat.text else audit_render.record_json
    where = EventFilter(spec, dag, action, since)
    skipped = audit_cmd.print_events(_settings(), where, line, first=limit, last=tail)
    return ExitCode.ERROR if skipped else ExitCode.OK


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
        typer.Option("--expect-head", help="A head hash saved earlier: detects truncation.", callback=_head_hash),
    ] = None,
) -> int:
    """Recompute the hash chain; exit 1 at the first edited, missing, reordered or truncated record."""
    from controller.commands import audit as audit_cmd
    from controller.core.render import audit as audit_render

    result = audit_cmd.verify(_settings(), expect_head)
    _out(audit_render.verify_text(result))
    return ExitCode.OK if result.ok else ExitCode.ERROR


class ExportFormat(StrEnum):
    jsonl = "jsonl"


@audit_app.command("export")
def audit_export(
    output: Annotated[
        ExportFormat, typer.Option("--format", help="One canonical JSON object per line.")
    ] = ExportFormat.jsonl,
    since: Annotated[str | None, typer.Option("--since", help=SINCE_HELP, callback=_since)] = None,
    spec: Annotated[str | None, typer.Option("--spec", help="Only events of this spec.")] = None,
) -> int:
    """Stream every event as one canonical JSON object per line (for a central log platform)."""
    from controller.adapters.store import EventFilter
    from controller.commands import audit as audit_cmd
    from controller.core.render import audit as audit_render

    skipped = audit_cmd.print_events(_settings(), EventFilter(spec=spec, since=since), audit_render.record_jsonl)
    return ExitCode.ERROR if skipped else ExitCode.OK


@store_app.command("migrate")
def store_migrate() -> int:
    """Upgrade the store's schema to this version's newest.

    reconcile and store unlock create or upgrade the store when they open it; the read-only commands (plan,
    status, report, audit, notify status) never do: they refuse a missing or older store and name this command.
    """
    from controller.commands import audit as audit_cmd

    before, after = audit_cmd.migrate(_settings())
    _out(f"store schema at revision {after}" + (f" (was {before})" if before != after else " (already current)") + "\n")
    return ExitCode.OK


@store_app.command("unlock")
def store_unlock(
    lease_id: Annotated[str, typer.Argument(metavar="LEASE_ID", help="The exact lease id to release.")],
) -> int:
    """Release a stuck reconcile lease (audited)."""
    from controller.commands import audit as audit_cmd

    released = audit_cmd.unlock(_settings(), lease_id)
    _out(plain_lines([f"released the lease of {released.describe()}"]))
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
