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

from controller.cli.app import DAY, LOCK_WAIT, app, duration, evidence_app, load_settings, seconds_within
from controller.cli.output import PassView, out, status_rich, tty, width
from controller.core.documents.escaping import plain_lines
from controller.errors import ExitCode

if TYPE_CHECKING:
    from rich.live import Live

    from controller.commands.reconcile.gate import EvidenceGiven
    from controller.commands.reconcile.reconciler import PassResult
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
    show_unchanged: Annotated[
        bool,
        typer.Option("--show-unchanged", help="List the specs in sync too (text; JSON always holds every spec)."),
    ] = False,
) -> int:
    """Compare the specs with Airflow and print what reconcile would do (read only).

    Exits 5 when reconcile would refuse a create (the dry run counts more runs than expected_runs or the
    policy's max_runs), so a pull request check fails before the merge, not after it.
    """
    from controller.commands.reconcile.analysis import analysed_names
    from controller.commands.reconcile.opening import open_reconciler
    from controller.commands.verbs import pr_comment as pr_comment_cmd
    from controller.core.plan.values import refusals
    from controller.core.render import plan as plan_render
    from controller.core.render.analysis import analysis_text, scope_text

    if pr_comment is not None and output is not PlanFormat.markdown:
        raise typer.BadParameter("--pr-comment needs --format markdown", param_hint="--pr-comment")
    changed = None if pr_comment is None else pr_comment_cmd.read_changed(pr_comment)
    only = None if changed is None else pr_comment_cmd.changed_specs(changed)
    with open_reconciler(load_settings(), read_only=True, no_store=no_store) as reconciler:
        viewed = reconciler.plan(ahead=True, only=only)
    result, specs, world = viewed.plan, viewed.specs, viewed.world
    renderers: dict[PlanFormat, Callable[[Plan], str]] = {
        PlanFormat.text: lambda p: plan_render.plan_text(p, width(), show_unchanged=show_unchanged),
        PlanFormat.markdown: plan_render.plan_markdown,
        PlanFormat.json: plan_render.plan_json,
    }
    shown = (
        renderers[output](result) if changed is None else pr_comment_cmd.render(result, specs, changed, world.airflow)
    )
    scoped = scope_text(output, viewed.policy)
    out(shown + analysis_text(output, analysed_names(specs, viewed.policy), world.analysis) + scoped)
    refused = refusals(result, only)
    for item in refused:
        sys.stderr.write(f"refused: {item.spec}: {item.reason}\n")
    if refused:
        return ExitCode.REFUSED
    if any(i.error for i in result.items) or not result.complete:
        return ExitCode.ERROR
    return ExitCode.CHANGES if detailed_exitcode and result.changes else ExitCode.OK


def _host_names(names: list[str] | None) -> list[str] | None:
    """A callback refusing a --metrics-host-name that is no host name (a port, a scheme, a space)."""
    from controller.adapters.hostcheck import host_name

    for name in names or ():
        if host_name(name) != name.lower().removesuffix("."):
            raise typer.BadParameter(f"{name!r} is not a host name: letters, digits, `-` and `.`, without a port")
    return names


def _commits(values: list[str] | None) -> list[str] | None:
    """A callback refusing a --evidence-unavailable that is no full commit SHA (it names the branch's commit)."""
    import re

    for value in values or ():
        if not re.fullmatch(r"[0-9a-f]{40}([0-9a-f]{24})?", value):
            raise typer.BadParameter(f"{value!r} is not a full commit SHA (40 hex digits, lower case)")
    return values


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
            callback=seconds_within(*LOCK_WAIT),
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
    metrics_host_names: Annotated[
        list[str] | None,
        typer.Option(
            "--metrics-host-name",
            callback=_host_names,
            metavar="NAME",
            help="A name the metrics port also answers to in the Host header (a Service or ingress name); repeat "
            "for more. IP addresses need none, nor localhost on 127.0.0.1.",
        ),
    ] = None,
    expect_every: Annotated[
        str | None,
        typer.Option(
            "--expect-every",
            callback=duration,
            metavar="DURATION",
            help="The dead-man's check: /healthz answers 503 when no good pass came for twice this long (30m, 1h); "
            "default: the policy's liveness.expect_every.",
        ),
    ] = None,
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
    evidence: Annotated[
        list[Path] | None,
        typer.Option(
            "--evidence",
            metavar="FILE",
            help="A merged change's evidence document (schemas/evidence.schema.json): its approvals are checked "
            "before anything it changed starts work. Repeat for each merge since the last reconcile (`backfillctl "
            "evidence needed` lists them).",
        ),
    ] = None,
    evidence_unavailable: Annotated[
        list[str] | None,
        typer.Option(
            "--evidence-unavailable",
            callback=_commits,
            metavar="COMMIT",
            help="A commit whose evidence could not be fetched (a forge outage): what it changed is held, not "
            "refused, and decided again next pass. Repeatable.",
        ),
    ] = None,
    result_dir: Annotated[
        Path | None,
        typer.Option(
            "--result-dir",
            metavar="DIR",
            help="Write what the last pass created, refused, queued or blocked, with links: result.json and a "
            "pr-N.md comment per pull request behind it (the reusable workflow's pr-result job posts them).",
        ),
    ] = None,
    pr_reviews: Annotated[
        Path | None,
        typer.Option(
            "--pr-reviews",
            metavar="FILE",
            help="Deprecated (use --evidence): the merged PR's reviews, for HEAD's merge; the head SHA is not checked.",
        ),
    ] = None,
    pr_number: Annotated[
        int | None, typer.Option("--pr-number", min=1, metavar="N", help="Deprecated: the merged PR's number.")
    ] = None,
    pr_author: Annotated[
        str | None, typer.Option("--pr-author", metavar="LOGIN", help="Deprecated: login of the merged PR's author.")
    ] = None,
) -> int:
    """Make Airflow's backfills match the specs, auditing every action; deliver notifications after each pass."""
    from controller.commands.loop.passhooks import MonitorOptions
    from controller.commands.loop.run import LoopOptions, Repeat, reconcile_loop
    from controller.core.model.policy import parse_span

    if once and (watch or until_complete):
        raise typer.BadParameter("--once cannot be combined with --watch or --until-complete")
    if timeout is not None and not until_complete:
        raise typer.BadParameter("--timeout goes with --until-complete")
    repeat = Repeat.UNTIL_COMPLETE if until_complete else Repeat.WATCH if watch else Repeat.ONCE
    monitor = MonitorOptions(
        metrics_port,
        metrics_host,
        unhealthy_after,
        refresh_seconds=max(5, int(interval)),
        host_names=tuple(metrics_host_names or ()),
        expect_every=parse_span(expect_every),
    )
    given = _evidence(evidence or [], evidence_unavailable or [], (pr_reviews, pr_number, pr_author))
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
        evidence=given,
        # --once shows finished specs only as counts; --fail-on-failures and --result-dir read every one
        rest_finished=repeat is Repeat.ONCE and result_dir is None and not fail_on_failures,
    )
    live = _live_view() if repeat is not Repeat.ONCE and tty() else None
    mode = "rich" if live is not None else ("once" if repeat is Repeat.ONCE else "text")
    view = PassView(dry_run, mode, watch=repeat is not Repeat.ONCE)  # --until-complete repeats as --watch does

    def on_pass(result: "PassResult") -> None:
        if live is not None:
            from controller.core.render import status  # the rows only for the live view

            live.update(status_rich(status.status_rows(result.current, {}, result.analysis), live.console.width))
        view.show(result)

    with live or contextlib.nullcontext():
        end = reconcile_loop(load_settings(), options, on_pass)
    if result_dir is not None:
        from controller.commands.loop.pr_result import write_result

        write_result(load_settings(), end.last, given, result_dir)
    for line in end.last.stuck_lines() if until_complete and not end.timed_out else []:
        sys.stderr.write(f"stuck: {line}\n")
    return _timed_out(end.last, timeout or 0.0) if end.timed_out else _pass_exit(end.last, fail_on_failures)


def _live_view() -> "Live":
    """The status table redrawn in place, for `--watch` and `--until-complete` on a terminal: rich loads here,
    never for `--once`, cron or a pipe."""
    from rich.live import Live
    from rich.table import Table

    return Live(Table(), refresh_per_second=2, transient=False)


def _evidence(
    documents: list[Path], unavailable: list[str], old: tuple[Path | None, int | None, str | None]
) -> "EvidenceGiven":
    """The documents read and checked (exit 1 on the first bad one), the commits whose evidence is missing, and the
    deprecated `--pr-reviews --pr-number --pr-author` (the three together) as one more document for HEAD."""
    from controller.commands.reconcile.evidence import read_document
    from controller.commands.reconcile.gate import EvidenceGiven

    read = [read_document(path) for path in documents]
    reviews, number, author = old
    if reviews is None or number is None or author is None:
        if (reviews, number, author) != (None, None, None):
            raise typer.BadParameter("--pr-reviews, --pr-number and --pr-author go together", param_hint="--pr-reviews")
        return EvidenceGiven(tuple(read), tuple(unavailable))
    from controller.adapters.gitsource import GitSource
    from controller.commands.reconcile.evidence import from_reviews

    made = from_reviews(reviews, number, author, GitSource(load_settings().specs_dir))
    return EvidenceGiven((*read, made), tuple(unavailable))


def _pass_exit(result: "PassResult", fail_on_failures: bool = False) -> int:
    from controller.core.model.binding import Phase

    if result.refused:
        return ExitCode.REFUSED
    unsuccessful = [
        f"{i.spec} ended {i.phase.value}: {i.reason}"
        for i in result.current.items
        if (i.phase in (Phase.COMPLETED_WITH_FAILURES, Phase.BLOCKED, Phase.VERIFICATION_FAILED) or i.stage_failed)
        and not (i.phase is not Phase.BLOCKED and i.source is not None and i.source.acknowledged)  # reviewed: accepted
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


@evidence_app.command("needed")
def evidence_needed() -> int:
    """Print (JSON) the commits that need an evidence document before the next reconcile.

    The branch's commits since the last commit the store reconciled that change the specs folder (every file's
    last commit when the store reconciled none, or when HEAD does not descend from it), and the commits of the
    changes the gate holds or refused for want of evidence; oldest first. The reconcile workflow writes one
    document per pull request behind them (`gh api repos/OWNER/REPO/commits/SHA/pulls`) and passes each with
    `reconcile --evidence FILE` (docs/ci-trust.md).
    """
    import json

    from controller.commands.reconcile.evidence import needed

    out(json.dumps(needed(load_settings()), indent=2) + "\n")
    return ExitCode.OK


@evidence_app.command("check")
def evidence_check(
    document: Annotated[Path, typer.Argument(metavar="FILE", help="An evidence document.")],
) -> int:
    """Check an evidence document against schemas/evidence.schema.json; print what it says (JSON), or the first
    error with its JSON path (exit 1)."""
    import json

    from controller.commands.reconcile.evidence import read_document, summary

    out(json.dumps(summary(read_document(document)), indent=2) + "\n")
    return ExitCode.OK
