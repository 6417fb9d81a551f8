"""`backfillctl validate` and `backfillctl new`: read files (and git), run the pure checks, write scaffolds."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from controller.adapters import files
from controller.adapters.gitsource import GitSource
from controller.core.approval import check_approvals, check_authors, latest_decisions, parse_reviews
from controller.core.changes import Change, classify, immutability
from controller.core.diagnostics import Diagnostic, Location
from controller.core.model import DagInfo
from controller.core.partitions import Unknown, check_against_dag, superseded_warnings
from controller.core.scaffold import NewSpec, scaffold
from controller.core.spec import BackfillSpec, SourceFile
from controller.core.validation import LoadedSpec, SpecValidator, ValidationResult
from controller.errors import AirflowError, AirflowNotFound, ConfigError


@dataclass(frozen=True, slots=True)
class GitChecks:
    """The pull-request checks: compare with `base`, and the approval gate from a reviews file."""

    base: str | None = None
    reviews: Path | None = None
    pr_author: str | None = None
    head_sha: str | None = None


def build_validator() -> SpecValidator:
    return SpecValidator(files.load_schema("backfill-spec.schema.json"), files.load_schema("policy.schema.json"))


def validate_paths(
    paths: Sequence[Path],
    specs_dir: Path,
    now: datetime,
    validator: SpecValidator | None = None,
    checks: GitChecks | None = None,
) -> ValidationResult:
    """Validate every spec under `paths` (default: the specs folder) with the tree's policy."""
    validator = validator or build_validator()
    tree = files.collect(paths or [specs_dir], specs_dir)
    result = validator.validate(tree.specs, now=now, policy_file=tree.policy, read_problems=tree.problems)
    if checks is None or (checks.base is None and checks.reviews is None):
        return result
    return _with(result, _git_checks(result, specs_dir, validator, checks))


DagLookup = Callable[[str], DagInfo]  # raises AirflowNotFound for an unknown DAG


def check_dags(result: ValidationResult, lookup: DagLookup, now: datetime) -> ValidationResult:
    """With Airflow configured: every spec's DAG exists and its schedule can be backfilled as asked (one
    details call per DAG). An unreachable Airflow is a warning: validate itself does not need Airflow."""
    infos: dict[str, DagInfo | Unknown | None] = {}
    for item in result.loaded:
        dag_id = item.spec.dag_id
        if dag_id not in infos:
            try:
                infos[dag_id] = lookup(dag_id)
            except AirflowNotFound:
                infos[dag_id] = None
            except AirflowError as exc:
                infos[dag_id] = Unknown(exc.message)
    found = [d for item in result.loaded for d in check_against_dag(item, infos[item.spec.dag_id], result.policy, now)]
    replaced = {
        d for item in result.loaded for d in superseded_warnings(item, infos[item.spec.dag_id], result.diagnostics)
    }
    kept = replace(result, diagnostics=tuple(d for d in result.diagnostics if d not in replaced))
    return _with(kept, found)


def _with(result: ValidationResult, extra: list[Diagnostic]) -> ValidationResult:
    merged = sorted(set(result.diagnostics) | set(extra), key=Diagnostic.sort_key)
    return replace(result, diagnostics=tuple(merged))


def _git_checks(
    result: ValidationResult, specs_dir: Path, validator: SpecValidator, checks: GitChecks
) -> list[Diagnostic]:
    head = {item.spec.name: item for item in result.loaded}
    found: list[Diagnostic] = []
    reviewable = list(head.values())
    if checks.base is not None:
        git = GitSource(specs_dir)
        base = _specs_at(git, checks.base, specs_dir, validator)
        found += immutability(base, head, checks.base)
        changes = classify(base, head)
        reviewable = [head[c.name] for c in changes if c.change in (Change.ADDED, Change.CHANGED, Change.STATE_ONLY)]
        found += _authors(git, checks.base, specs_dir, reviewable, result)
    if checks.reviews is not None:
        found += _approvals(checks, reviewable, result)
    return found


def _specs_at(git: GitSource, ref: str, specs_dir: Path, validator: SpecValidator) -> dict[str, BackfillSpec]:
    loaded = (validator.load_one(source)[0] for source in git.specs_at(ref, specs_dir))
    return {item.spec.name: item.spec for item in loaded if item is not None}


def _authors(
    git: GitSource, ref: str, specs_dir: Path, items: list[LoadedSpec], result: ValidationResult
) -> list[Diagnostic]:
    authors = git.authors_since(ref, specs_dir)
    return [
        d
        for item in items
        for d in check_authors(item, sorted(authors.get(git.relative(Path(item.spec.path)), set())), result.policy)
    ]


def _approvals(checks: GitChecks, items: list[LoadedSpec], result: ValidationResult) -> list[Diagnostic]:
    assert checks.reviews is not None
    source = files.display(checks.reviews)
    try:
        data = json.loads(checks.reviews.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [
            Diagnostic(
                Location(source, 1, 1),
                f"cannot read the reviews file: {exc}",
                "pass the JSON saved from `gh api repos/OWNER/REPO/pulls/N/reviews`",
            )
        ]
    reviews, problems = parse_reviews(data, source)
    decisions = latest_decisions(reviews)
    return problems + [
        d for item in items for d in check_approvals(item, decisions, checks.pr_author, checks.head_sha, result.policy)
    ]


def create_spec(new: NewSpec, specs_dir: Path, now: datetime) -> tuple[Path, ValidationResult]:
    """Write `specs_dir/<name>.yaml` from the template and validate it with the tree's policy."""
    path = specs_dir / f"{new.name}.yaml"
    text = scaffold(new)
    validator = build_validator()
    tree = files.collect([], specs_dir)
    preview = validator.validate(
        [SourceFile(files.display(path), new.name, text.encode())], now=now, policy_file=tree.policy
    )
    if any(d.message.startswith("YAML") for d in preview.errors):
        raise ConfigError(
            f"the values given do not make a readable spec: {preview.errors[0].message}",
            hint="check --name, --dag-id and the dates",
        )
    files.write_new(path, text)
    return path, preview
