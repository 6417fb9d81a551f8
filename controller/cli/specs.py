"""`backfillctl validate`, `new` and `init`: the commands about spec files (no Airflow needed)."""

# No `from __future__ import annotations` here: typer reads every command's annotations at each start, and
# string annotations would be compiled and evaluated again each time (tens of ms); names imported only for
# type checking are quoted instead.
import sys
from dataclasses import replace
from enum import StrEnum
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from controller.cli.app import app, load_settings
from controller.cli.complete import dag_ids, spec_names
from controller.cli.output import out, utc_now
from controller.core.documents.escaping import plain, plain_lines
from controller.core.documents.starter import DEFAULT_ENVIRONMENT, DEFAULT_RUNNER, PLACEHOLDER_REPO
from controller.core.model.spec import ReprocessBehavior
from controller.core.render.scaffold import DATE_TO_HELP
from controller.errors import ExitCode, UsageError


class ValidateFormat(StrEnum):
    text = "text"
    json = "json"
    github = "github"


@app.command()
def validate(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(metavar="PATH", help="Spec files or folders (default: the specs folder)."),
    ] = None,
    output: Annotated[ValidateFormat, typer.Option("--format", help="Output format.")] = ValidateFormat.text,
    base: Annotated[
        str | None, typer.Option("--base", metavar="REF", help="Compare with this git ref (e.g. origin/main).")
    ] = None,
    pr_reviews: Annotated[
        Path | None, typer.Option("--pr-reviews", metavar="FILE", help="JSON of the PR's reviews (GitHub API).")
    ] = None,
    pr_author: Annotated[
        str | None, typer.Option("--pr-author", metavar="LOGIN", help="Login of the PR's author.")
    ] = None,
    head_sha: Annotated[
        str | None, typer.Option("--head-sha", metavar="SHA", help="Approvals must be of this commit.")
    ] = None,
    changed_since: Annotated[
        str | None,
        typer.Option(
            "--changed-since",
            metavar="REF",
            help="Only the spec files changed since this git ref, and the names of the whole tree.",
        ),
    ] = None,
) -> int:
    """Check specs: YAML, schema, semantic rules, policy, and with --base / --pr-reviews the PR rules.

    With BACKFILLCTL_AIRFLOW_URL set, also each spec's DAG: it exists, its schedule can be backfilled, and a
    partitioned DAG's range does not reach past now.
    """
    from controller.cli.quick import ValidateArgs, run_validate

    given = ValidateArgs(paths or [], output.value, base, pr_reviews, pr_author, head_sha, changed_since)
    return run_validate(given)


RETRY_NOTE = "Required, unless --retry-failed-of takes it from the finished spec."


@app.command()
def new(
    name: Annotated[str, typer.Argument(metavar="NAME", help="Spec name; also the file name (specs/NAME.yaml).")],
    dag_id: Annotated[
        str | None,
        typer.Option(
            "--dag-id",
            metavar="DAG_ID",
            help=f"The DAG to backfill. {RETRY_NOTE}",
            show_default=False,
            autocompletion=dag_ids,
        ),
    ] = None,
    from_date: Annotated[
        str | None,
        typer.Option(
            "--from",
            metavar="DATE",
            help="First logical date (partition date for a partitioned DAG), inclusive: 2025-01-01 (00:00 UTC) "
            f"or a date-time with an offset. {RETRY_NOTE}",
        ),
    ] = None,
    to_date: Annotated[
        str | None,
        typer.Option(
            "--to",
            metavar="DATE",
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
        typer.Option(
            "--ticket", metavar="TICKET", help=f"The change ticket that authorises the backfill. {RETRY_NOTE}"
        ),
    ] = None,
    reason: Annotated[
        str | None,
        typer.Option(
            "--reason",
            metavar="TEXT",
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
            "--requested-by",
            metavar="LOGIN",
            help="Who asks for it (default: BACKFILLCTL_ACTOR, else your git config user.name; said when used).",
        ),
    ] = None,
    downstream: Annotated[
        list[str] | None,
        typer.Option(
            "--downstream",
            metavar="SYSTEM",
            help="A system that will feel the load (a downstream budget of the policy); repeat for each.",
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
    select_latest: Annotated[
        bool,
        typer.Option(
            "--select-latest",
            help="Re-run only what other code made: `select: {code_version: N}` with N the DAG's latest version "
            "in Airflow now (needs --reprocess completed and BACKFILLCTL_AIRFLOW_URL).",
        ),
    ] = False,
    retry_failed_of: Annotated[
        str | None,
        typer.Option(
            "--retry-failed-of",
            metavar="SPEC",
            autocompletion=spec_names,
            help="Write the follow-up of a finished spec: its DAG, from its first to its last failed run, "
            "reprocess failed, its ticket and approvers, expected_runs its failed runs (from the store).",
        ),
    ] = None,
) -> int:
    """Write a new spec that validates (nothing is written when it would not: exit 1).

    With BACKFILLCTL_AIRFLOW_URL set, expected_runs is what Airflow's dry run counts; without it, it is left out
    and `backfillctl plan` shows the count. With --retry-failed-of SPEC, the spec re-runs SPEC's failed runs.
    """
    from controller.commands.verbs.new import new_spec, requester, retry_spec
    from controller.core.render import validation as render
    from controller.core.render.scaffold import NewSpec

    settings = load_settings()
    asked = {"--dag-id": dag_id, "--from": from_date, "--to": to_date, "--reprocess": reprocess}
    given = {**asked, "--select-latest": select_latest or None}
    if retry_failed_of is not None:
        clash = [option for option, value in given.items() if value is not None]
        if clash:
            raise UsageError(
                f"{', '.join(clash)} cannot be combined with --retry-failed-of: the follow-up takes them from "
                f"{retry_failed_of}",
                hint="leave them out; --ticket, --reason, --approver and --max-active-runs may still be given",
            )
        choices = {"ticket": ticket, "reason": reason, "approvers": tuple(approver or ())}
        actor, source = (requested_by, "") if requested_by else requester(settings)
        spec = retry_spec(settings, retry_failed_of, name, actor, max_active_runs, choices, utc_now())
    else:
        required = {**asked, "--ticket": ticket, "--reason": reason, "--approver": approver or None}
        if not (dag_id and from_date and to_date and reprocess and ticket and reason and approver):
            _missing([option for option, value in required.items() if not value])
        actor, source = (requested_by, "") if requested_by else requester(settings)
        spec = NewSpec(
            name=name,
            dag_id=dag_id,
            from_date=from_date,
            to_date=to_date,
            reprocess=reprocess,
            max_active_runs=max_active_runs or 1,
            requested_by=actor,
            ticket=ticket,
            approvers=tuple(approver),
            expected_runs=expected_runs,
            reason=reason,
        )
    if downstream:
        spec = replace(spec, downstream=tuple(downstream))
    if expected_runs is not None:
        spec = replace(spec, expected_runs=expected_runs)
    path, result, written = new_spec(spec, settings, utc_now(), select_latest=select_latest)
    out(f"wrote {path}\n")
    if source:  # who asks was not given: say where it came from
        out(plain_lines([f"requested_by: {actor} (from {source}; --requested-by says otherwise)"]))
    if written.retry is not None:
        out(plain_lines([written.retry.text()]))
    if written.select is not None:
        out(f"select: {written.select.text()}, the DAG's latest version in Airflow\n")
    if written.counted is not None:
        what = "the intervals it selects" if written.select is not None else "Airflow's dry run"
        out(f"expected_runs: {written.counted.runs}, from {what}\n")
    elif written.expected_runs is None:
        out("expected_runs: left out (BACKFILLCTL_AIRFLOW_URL is not set); `backfillctl plan` shows the count\n")
    if result.diagnostics:
        out(render.validation_text(result))
    out("next: `backfillctl plan`, then open a pull request with the file\n")
    return ExitCode.OK


def _missing(options: list[str]) -> NoReturn:
    """Click's words for a missing option (exit 2): they are required unless --retry-failed-of is given."""
    raise UsageError(
        f"Missing option '{options[0]}'" + (f" (and {', '.join(options[1:])})" if options[1:] else ""),
        hint="`backfillctl new --help` says what each takes; --retry-failed-of SPEC takes them from a finished spec",
    )


@app.command()
def init(
    directory: Annotated[Path, typer.Argument(metavar="DIR", help="The new specs repository (created when missing).")],
    workflows_repo: Annotated[
        str,
        typer.Option(
            "--workflows-repo",
            metavar="OWNER/REPO",
            help="OWNER/REPO of backfillctl, whose reusable workflows and pre-commit hook the files call "
            "(the default is a placeholder to replace).",
        ),
    ] = PLACEHOLDER_REPO,
    ref: Annotated[
        str | None,
        typer.Option(
            "--ref",
            metavar="SHA",
            help="Full commit SHA of backfillctl to pin them to (default: the commit this backfillctl was built from).",
        ),
    ] = None,
    environment: Annotated[
        str,
        typer.Option("--environment", metavar="NAME", help="GitHub environment holding the reconcile job's secrets."),
    ] = DEFAULT_ENVIRONMENT,
    runner: Annotated[
        str,
        typer.Option(
            "--runner",
            metavar="LABEL",
            help="Runner of the jobs: a label, or a JSON list of a self-hosted runner's labels (it must reach "
            "Airflow's API and the store).",
        ),
    ] = DEFAULT_RUNNER,
    force: Annotated[bool, typer.Option("--force", help="Overwrite files that exist already.")] = False,
) -> int:
    """Scaffold a team's specs repository: policy, an example spec, pre-commit, workflows, CODEOWNERS, README."""
    from controller.commands.verbs.init import init_repository, own_pin, pin_note
    from controller.core.documents.starter import StarterOptions

    pin = own_pin() if ref is None else None
    commit, version = (pin.commit, pin.version) if pin is not None else (str(ref), None)
    options = StarterOptions(workflows_repo, commit, environment, runner, version)
    for item in init_repository(directory, options, force=force):
        out(f"{'overwrote' if item.replaced else 'wrote'} {item.path}\n")
    out(pin_note(options, pin))
    if pin is None and not options.pinned_to_commit:  # a tag or a branch can be moved to other code
        sys.stderr.write(
            plain(
                f"warning: --ref {ref} is not a full commit SHA: whoever can move it decides what runs with your "
                f"production secrets; pin a commit (`git rev-parse {ref}` in backfillctl's clone)"
            )
            + "\n"
        )
    if options.placeholder:
        out(
            f"note: the workflows and the pre-commit hook call {workflows_repo}, a placeholder: run init again "
            "with --workflows-repo OWNER/REPO --force, or replace it in those files\n"
        )
    out(f"next: cd {directory} && backfillctl validate; then delete the example spec before the first merge\n")
    return ExitCode.OK
