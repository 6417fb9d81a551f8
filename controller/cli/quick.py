"""`backfillctl validate [PATH]... [--format F]` and a scheduled `reconcile --once` without typer: what pre-commit
runs on every commit, and what cron runs every few minutes.

typer 0.29 builds a pydantic adapter for every parameter of every command at each start (about 0.2 s of CPU
before any work), so a plain `validate` — paths and `--format`, nothing else — is parsed here and runs the same
function the typer command runs; so is a `reconcile` with only the options a scheduled job gives (`--once`,
`--wait-lock`, `--lock-timeout S`, `--dry-run`, `--fail-on-failures`, `--allow-dirty`), which calls the typer
command's own function with them. Anything else (`--help`, other options, a usage error) goes to typer, which owns
every message about the command line.
"""

import dataclasses
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FORMATS = ("text", "json", "github")


@dataclass(frozen=True)
class ValidateArgs:
    paths: list[Path] = field(default_factory=list)
    output: str = "text"
    base: str | None = None
    pr_reviews: Path | None = None
    pr_author: str | None = None
    head_sha: str | None = None
    changed_since: str | None = None


def plain_validate(argv: Sequence[str]) -> ValidateArgs | None:
    """The arguments of a `validate` of paths (with `--format F`, `--changed-since REF`); None for anything
    else, which typer parses."""
    if not argv or argv[0] != "validate":
        return None
    paths: list[Path] = []
    options: dict[str, str] = {}
    rest = list(argv[1:])
    while rest:
        arg = rest.pop(0)
        if not arg.startswith("-"):
            paths.append(Path(arg))
            continue
        name, eq, value = arg.partition("=")
        if name not in ("--format", "--changed-since") or name in options:
            return None
        if not eq:
            if not rest or rest[0].startswith("-"):
                return None
            value = rest.pop(0)
        if (name == "--format" and value not in FORMATS) or not value:
            return None
        options[name] = value
    return ValidateArgs(paths, options.get("--format", "text"), changed_since=options.get("--changed-since"))


RECONCILE_FLAGS = {  # option → the `reconcile` parameter it sets to True
    "--once": "once",
    "--wait-lock": "wait_lock",
    "--dry-run": "dry_run",
    "--fail-on-failures": "fail_on_failures",
    "--allow-dirty": "allow_dirty",
}
SECONDS = re.compile(r"[0-9]{1,5}(\.[0-9]{1,6})?")  # a --lock-timeout read here; any other spelling: typer's


def plain_reconcile(argv: Sequence[str]) -> dict[str, Any] | None:
    """The parameters of a `reconcile` given only a scheduled job's options, each once (`--lock-timeout` within its
    bounds); None for anything else, which typer parses."""
    if not argv or argv[0] != "reconcile":
        return None
    chosen: dict[str, Any] = {}
    rest = list(argv[1:])
    while rest:
        name, eq, value = rest.pop(0).partition("=")
        if name in RECONCILE_FLAGS and not eq and RECONCILE_FLAGS[name] not in chosen:
            chosen[RECONCILE_FLAGS[name]] = True
            continue
        if name != "--lock-timeout" or "lock_timeout" in chosen:
            return None
        value = value if eq else (rest.pop(0) if rest else "")
        seconds = float(value) if SECONDS.fullmatch(value) else None
        if seconds is None or not _lock_bounded(seconds):
            return None
        chosen["lock_timeout"] = seconds
    return chosen


def _lock_bounded(seconds: float) -> bool:
    from controller.cli.app import LOCK_WAIT  # the bounds the typer option checks

    low, high = LOCK_WAIT
    return low <= seconds <= high


def run_reconcile(chosen: dict[str, Any]) -> int:
    """`backfillctl reconcile` with `chosen`: the typer command's own function, the other parameters at its
    defaults."""
    from controller.cli.reconcile import reconcile

    return reconcile(**chosen)


def run_validate(args: ValidateArgs) -> int:
    """`backfillctl validate`: check the specs, print the report, exit 0 when every spec is valid, else 1."""
    from controller.cli.output import out, utc_now
    from controller.commands.reconcile import specfiles
    from controller.commands.runtime.settings import Settings
    from controller.commands.verbs import validate as validate_cmd
    from controller.core.render import validation as render
    from controller.errors import ExitCode

    settings = Settings.from_env(os.environ)
    checks = specfiles.GitChecks(args.base, args.pr_reviews, args.pr_author, args.head_sha)
    now = utc_now()
    result = specfiles.validate_paths(
        args.paths, settings.specs_dir, now, checks=checks, changed_since=args.changed_since
    )
    if result.loaded:  # with production's Airflow configured (as the policy names it), check each spec's DAG too
        from controller.commands.runtime.environments import production_settings

        settings = production_settings(settings)
    if settings.airflow_url and result.loaded:
        from controller.commands.runtime.session import make_client

        result = validate_cmd.check_dags_in_airflow(result, lambda: make_client(settings), now)
    elif result.loaded:  # an OK must not read as "the DAG ids were checked"
        skipped = "each spec's DAG in Airflow (BACKFILLCTL_AIRFLOW_URL is not set)"
        result = dataclasses.replace(result, skipped=(*result.skipped, skipped))
    result = validate_cmd.check_resumes_in_store(result, settings.store_url)
    renderers = {"text": render.validation_text, "json": render.validation_json, "github": render.validation_github}
    out(renderers[args.output](result))
    if args.output == "text" and result.skipped:
        sys.stderr.write(render.skipped_text(result))
    return ExitCode.OK if result.ok else ExitCode.ERROR
