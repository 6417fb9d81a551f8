"""`backfillctl plan` and `reconcile`: compare the specs with Airflow, and make Airflow match them."""

# No `from __future__ import annotations` here: typer reads every command's annotations at each start, and
# string annotations would be compiled and evaluated again each time (tens of ms); names imported only for
# type checking are quoted instead.
import contextlib
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from controller.cli.app import DAY, app, load_settings, seconds_within
from controller.cli.output import PassView, out, status_rich, tty, width
from controller.core.documents.escaping import plain_lines
from controller.errors import ExitCode

if TYPE_CHECKING:
    from controller.commands.reconcile import PassResult
    from controller.core.plan.provenance import Evidence
    from controller.core.plan.values import Plan


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
            metavar="FILE",
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
    from controller.commands.analysis import analysed_names
    from controller.commands.lookahead import look_ahead
    from controller.commands.session import open_reconciler
    from controller.core.plan.values import refusals
    from controller.core.render import plan as plan_render
    from controller.core.render.analysis import analysis_text

    if pr_comment is not None and output is not PlanFormat.markdown:
        raise typer.BadParameter("--pr-comment needs --format markdown", param_hint="--pr-comment")
    changed = None if pr_comment is None else pr_comment_cmd.read_changed(pr_comment)
    only = None if changed is None else pr_comment_cmd.changed_specs(changed)
    with open_reconciler(load_settings(), read_only=True, no_store=no_store) as reconciler:
        result, specs, world = reconciler.plan()
        result = look_ahead(
            result, specs, policy=reconciler.policy, world=world, observer=reconciler.observer, only=only
        )
    renderers: dict[PlanFormat, Callable[[Plan], str]] = {
        PlanFormat.text: lambda p: plan_render.plan_text(p, width()),
        PlanFormat.markdown: plan_render.plan_markdown,
        PlanFormat.json: plan_render.plan_json,
    }
    shown = (
        renderers[output](result) if changed is None else pr_comment_cmd.render(result, specs, changed, world.airflow)
    )
    out(shown + analysis_text(output, analysed_names(specs, reconciler.policy), world.analysis))
    refused = refusals(result, only)
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
            "--interval",
            callback=seconds_within(1, DAY),
            metavar="SECONDS",
            help="Seconds between passes (1 to 86400).",
        ),
    ] = 30.0,
    until_complete: Annotated[
        bool, typer.Option("--until-complete", help="Repeat until every spec is finished, paused or blocked.")
    ] = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Print the plan; change nothing.")] = False,
    plan_checksum: Annotated[
        str | None, typer.Option("--plan-checksum", metavar="CHECKSUM", help="Refuse if the plan differs.")
    ] = None,
    wait_lock: Annotated[bool, typer.Option("--wait-lock", help="Wait for another reconciler to finish.")] = False,
    timeout: Annotated[
        float | None,
        typer.Option(
            "--timeout",
            callback=seconds_within(1, 30 * DAY),
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
            callback=seconds_within(0, DAY),
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
    metrics_host: Annotated[
        str, typer.Option("--metrics-host", metavar="HOST", help="Address to serve on.")
    ] = "127.0.0.1",
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
        typer.Option(
            "--pr-reviews",
            metavar="FILE",
            help="The merged PR's reviews: its approval gate is checked before a create.",
        ),
    ] = None,
    pr_number: Annotated[
        int | None, typer.Option("--pr-number", min=1, metavar="N", help="The merged PR's number.")
    ] = None,
    pr_author: Annotated[
        str | None, typer.Option("--pr-author", metavar="LOGIN", help="Login of the merged PR's author.")
    ] = None,
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
    live = Live(Table(), refresh_per_second=2, transient=False) if repeat is not Repeat.ONCE and tty() else None
    mode = "rich" if live is not None else ("once" if repeat is Repeat.ONCE else "text")
    view = PassView(dry_run, mode, watch=repeat is Repeat.WATCH)

    def on_pass(result: "PassResult") -> None:
        if live is not None:
            live.update(status_rich(status.status_rows(result.current, {}, result.analysis), live.console.width))
        view.show(result)

    with live or contextlib.nullcontext():
        end = reconcile_loop(load_settings(), options, on_pass)
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


def _pass_exit(result: "PassResult", fail_on_failures: bool = False) -> int:
    from controller.core.model.binding import Phase

    if result.refused:
        return ExitCode.REFUSED
    unsuccessful = [
        f"{i.spec} ended {i.phase.value}: {i.reason}"
        for i in result.current.items
        if i.phase in (Phase.COMPLETED_WITH_FAILURES, Phase.BLOCKED, Phase.VERIFICATION_FAILED) or i.stage_failed
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
