"""`backfillctl validate [PATH]... [--format F]` without typer: what pre-commit runs on every commit.

typer 0.29 builds a pydantic adapter for every parameter of every command at each start (about 0.2 s of CPU
before any work), so a plain `validate` — paths and `--format`, nothing else — is parsed here and runs the same
function the typer command runs; anything else (`--help`, the PR options, a usage error) goes to typer, which
owns every message about the command line.
"""

import dataclasses
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

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
