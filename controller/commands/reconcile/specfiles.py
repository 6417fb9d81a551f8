"""The spec files a command reads, validated: the folder (or some files, or those changed since a ref), with the tree's
policy, and the pull request's checks against its base and its reviews."""

from __future__ import annotations

import logging
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controller.adapters import files
from controller.commands.runtime.validator import build_validator
from controller.core.checks.loaded import LoadedSpec
from controller.core.checks.names import check_names_in_tree
from controller.core.checks.result import ValidationResult
from controller.core.checks.validation import SpecValidator, check_spec
from controller.core.documents.diagnostics import Diagnostic, Location
from controller.core.documents.reviews_json import REVIEWS_HINT, reviews_json
from controller.core.model.policy import DEFAULT_POLICY, Policy
from controller.core.model.spec import BackfillSpec
from controller.errors import UsageError

if TYPE_CHECKING:  # the PR, Airflow and scaffold checks import their modules when they run (a faster start)
    from controller.adapters.gitsource import GitSource

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class GitChecks:
    """The pull-request checks: compare with `base`, and the approval gate from a reviews file."""

    base: str | None = None
    reviews: Path | None = None
    pr_author: str | None = None
    head_sha: str | None = None


def validate_paths(
    paths: Sequence[Path],
    specs_dir: Path,
    now: datetime,
    *,
    validator: SpecValidator | None = None,
    checks: GitChecks | None = None,
    settled: frozenset[str] = frozenset(),
    changed_since: str | None = None,
    unread: Collection[str] = frozenset(),
    applied: Mapping[str, BackfillSpec | None] | None = None,
) -> ValidationResult:
    """Validate every spec under `paths` (default: the specs folder) with the tree's policy (`settled`: see
    `SpecValidator.validate`; `unread`: files not read, relative to the folder: the caller knows them); with
    `changed_since`, only the spec files changed since that git ref (every spec when the policy changed), their
    names still checked against the whole tree."""
    validator = validator or build_validator()
    base = _base_specs(specs_dir, validator, checks)
    applied = {**(applied or {}), **(base or {})}  # a spec merged before: the head's policy judges it as applied
    if changed_since is not None:
        changed = _changed(paths, specs_dir, changed_since)
        if changed == []:  # nothing changed: the policy is still read (and judged) as the tree's
            return validator.validate([], now=now, policy_file=files.collect([], specs_dir).policy)
        paths = changed or []
    tree = files.collect(paths or [specs_dir], specs_dir, skip=unread)
    result = _validated(tree, validator, now, settled, applied)
    if paths:  # some files only (pre-commit): their names must still be unique across the whole tree
        result = with_diagnostics(result, list(check_names_in_tree(result.loaded, files.names_in_tree(specs_dir))))
    if checks is None or (checks.base is None and checks.reviews is None):
        return result
    return with_diagnostics(result, _git_checks(result, specs_dir, validator, checks, now, base))


def validate_folder(
    specs_dir: Path,
    now: datetime,
    *,
    settled: frozenset[str],
    unread: Collection[str],
    applied: Mapping[str, BackfillSpec | None],
    only: Sequence[str] | None = None,
) -> tuple[ValidationResult, tuple[str, ...]]:
    """`validate_paths` over the folder (a pass's read), and the files it read, relative to the folder; `only`: read
    those (an earlier pass's list, the folder unchanged since), unwalked."""
    tree = files.collect([specs_dir], specs_dir, skip=unread, only=only)
    read = tuple(path.relative_to(specs_dir).as_posix() for path, _root in tree.found)
    return _validated(tree, build_validator(), now, settled, applied), read


def _validated(
    tree: files.SpecTree,
    validator: SpecValidator,
    now: datetime,
    settled: frozenset[str],
    applied: Mapping[str, BackfillSpec | None],
) -> ValidationResult:
    return validator.validate(
        tree.sources(), now=now, policy_file=tree.policy, read_problems=tree.problems, settled=settled, applied=applied
    )


def _changed(paths: Sequence[Path], specs_dir: Path, ref: str) -> list[Path] | None:
    """The spec files under `specs_dir` changed since `ref` ([] when none did); None (the whole folder) when its
    policy changed: every spec is judged by it. A ref git does not know is a usage error (exit 2)."""
    from controller.adapters.gitsource import GitSource  # noqa: PLC0415 - GitPython only for --changed-since
    from controller.errors import GitError  # noqa: PLC0415

    if paths:
        raise UsageError(
            "--changed-since and PATH arguments cannot be combined",
            hint="give the files to check (pre-commit does), or --changed-since REF to find them",
        )
    git = GitSource(specs_dir)
    if not git.available:
        raise UsageError(
            f"--changed-since {ref}: {files.display(specs_dir)} is not in a git repository",
            hint="run it inside the specs repository, or validate the whole folder without --changed-since",
        )
    try:
        changed = sorted(git.changed_since(ref, specs_dir))
    except GitError as exc:
        raise UsageError(f"--changed-since {ref}: {exc.message} ({git.root})", hint=exc.hint) from None
    found = [git.root / name for name in changed if Path(name).suffix in files.SPEC_SUFFIXES]
    policy = files.policy_path(specs_dir)
    if policy is not None and any(p.resolve() == policy.resolve() for p in found):
        return None
    return [p for p in found if p.exists()]


def with_diagnostics(result: ValidationResult, extra: list[Diagnostic]) -> ValidationResult:
    merged = sorted(set(result.diagnostics) | set(extra), key=Diagnostic.sort_key)
    return replace(result, diagnostics=tuple(merged))


def _base_specs(specs_dir: Path, validator: SpecValidator, checks: GitChecks | None) -> dict[str, BackfillSpec] | None:
    """With `--base`, the specs as the base holds them (None without)."""
    if checks is None or checks.base is None:
        return None
    from controller.adapters.gitsource import GitSource  # noqa: PLC0415 - GitPython only for --base

    return _specs_at(GitSource(specs_dir), checks.base, specs_dir, validator)


def _git_checks(  # noqa: PLR0917 - the tree's result and what the pull request is checked against
    result: ValidationResult,
    specs_dir: Path,
    validator: SpecValidator,
    checks: GitChecks,
    now: datetime,
    base: dict[str, BackfillSpec] | None,
) -> list[Diagnostic]:
    from controller.core.checks.approval import check_authors  # noqa: PLC0415
    from controller.core.checks.changes import Change, classify, immutability, mutable_changes  # noqa: PLC0415

    head = {item.spec.name: item for item in result.loaded}
    found: list[Diagnostic] = []
    reviewable = list(head.values())
    authors: dict[str, tuple[str, ...]] = {}  # spec path → its authors in the pull request (with --base)
    if checks.base is not None and base is not None:
        from controller.adapters.gitsource import GitSource  # noqa: PLC0415 - GitPython only for --base

        git = GitSource(specs_dir)
        found += immutability(base, head, checks.base)
        changes = classify(base, head)
        reviewable = [head[c.name] for c in changes if c.change in (Change.ADDED, Change.CHANGED, Change.STATE_ONLY)]
        # a pull request is judged by the policy it merges into, never by a policy it changes itself; a spec merged
        # before is judged on what it changes (a newer policy cannot change what ran)
        result = replace(result, policy=_policy_at(git, checks.base, specs_dir, validator))
        found += [
            d
            for item in reviewable
            for d in check_spec(
                item,
                result.policy,
                now,
                applied=item.spec.name in base,
                changed=mutable_changes(base[item.spec.name], item.spec) if item.spec.name in base else (),
            )
        ]
        authors = _authors(git, checks.base, specs_dir, reviewable)
        if checks.reviews is None:  # with the reviews, the approvals' check says it of each approval
            found += [d for i in reviewable for d in check_authors(i, authors.get(i.spec.path, ()), result.policy)]
    if checks.reviews is not None:
        found += _approvals(checks, checks.reviews, reviewable, result, authors)
    return found


def _policy_at(git: GitSource, ref: str, specs_dir: Path, validator: SpecValidator) -> Policy:
    source = git.policy_at(ref, specs_dir)
    return DEFAULT_POLICY if source is None else validator.load_policy(source)[0]


def _specs_at(git: GitSource, ref: str, specs_dir: Path, validator: SpecValidator) -> dict[str, BackfillSpec]:
    loaded = (validator.load_one(source)[0] for source in git.specs_at(ref, specs_dir))
    return {item.spec.name: item.spec for item in loaded if item is not None}


def _authors(git: GitSource, ref: str, specs_dir: Path, items: list[LoadedSpec]) -> dict[str, tuple[str, ...]]:
    """Spec path → the e-mails of the authors of the pull request's commits (ref..HEAD) that touched it."""
    authors = git.authors_since(ref, specs_dir)
    relative = git.relatives(item.spec.path for item in items)
    return {item.spec.path: tuple(sorted(authors.get(relative[item.spec.path], set()))) for item in items}


def _approvals(
    checks: GitChecks,
    reviews_path: Path,
    items: list[LoadedSpec],
    result: ValidationResult,
    authors: Mapping[str, Sequence[str]],
) -> list[Diagnostic]:
    """The approval gate, the one rule set reconcile applies too (`core/checks/approval.py`)."""
    from controller.core.checks.approval import (  # noqa: PLC0415
        authored,
        check_approvals,
        latest_decisions,
        parse_reviews,
    )

    data, unreadable = read_reviews(reviews_path)
    if unreadable:
        return unreadable
    reviews, problems = parse_reviews(data, files.display(reviews_path))
    decisions, policy = latest_decisions(reviews), result.policy
    return problems + [
        d
        for item in items
        for d in check_approvals(
            item,
            decisions,
            checks.pr_author,
            checks.head_sha,
            policy,
            authors=authored(authors.get(item.spec.path, ()), policy),
        )
    ]


def read_reviews(path: Path) -> tuple[list[Any], list[Diagnostic]]:
    """The raw reviews of a reviews file (`gh api --paginate --slurp …/reviews`), or why it cannot be read."""
    source = files.display(path)
    try:
        raw = files.read_bounded(path, REVIEWS_MAX_BYTES)
        text = raw.decode("utf-8") if len(raw) <= REVIEWS_MAX_BYTES else None
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        return [], [Diagnostic(Location(source, 1, 1), f"cannot read the reviews file: {why}", REVIEWS_HINT)]
    if text is None:
        message = f"the reviews file is over {REVIEWS_MAX_BYTES} bytes (16 MiB); is this the right file?"
        return [], [Diagnostic(Location(source, 1, 1), message, REVIEWS_HINT)]
    return reviews_json(text, source)


# a page of 100 reviews is ~300 KB (GitHub's user objects), one with 100 maximal (64 KiB) bodies ~7 MB
REVIEWS_MAX_BYTES = 16 * 1024 * 1024
