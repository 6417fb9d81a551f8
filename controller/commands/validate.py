"""`backfillctl validate` and `backfillctl new`: read files (and git), run the pure checks, write scaffolds."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controller.adapters import files
from controller.core.checks.loaded import LoadedSpec
from controller.core.checks.names import check_names_in_tree
from controller.core.checks.result import ValidationResult
from controller.core.checks.validation import SpecValidator, check_spec
from controller.core.documents.diagnostics import Diagnostic, Location
from controller.core.model.policy import DEFAULT_POLICY, Policy
from controller.core.model.spec import BackfillSpec, SourceFile, parse_date
from controller.errors import AirflowError, AirflowNotFound, InvalidSpecs, UsageError

if TYPE_CHECKING:  # the PR, Airflow and scaffold checks import their modules when they run (a faster start)
    from controller.adapters.airflow import AirflowClient
    from controller.adapters.gitsource import GitSource
    from controller.core.checks.dags import Unknown
    from controller.core.model.airflow import DagInfo
    from controller.core.model.capabilities import Capabilities
    from controller.core.render.scaffold import NewSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class GitChecks:
    """The pull-request checks: compare with `base`, and the approval gate from a reviews file."""

    base: str | None = None
    reviews: Path | None = None
    pr_author: str | None = None
    head_sha: str | None = None


def build_validator() -> SpecValidator:
    """The validator for the packaged schemas (trusted: tests/test_schemas.py checks them against the metaschema)."""
    spec, policy = files.load_schema("backfill-spec.schema.json"), files.load_schema("policy.schema.json")
    return SpecValidator(spec, policy, trusted=True)


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
    result = validator.validate(
        tree.sources(), now=now, policy_file=tree.policy, read_problems=tree.problems, settled=settled, applied=applied
    )
    if paths:  # some files only (pre-commit): their names must still be unique across the whole tree
        result = _with(result, list(check_names_in_tree(result.loaded, files.names_in_tree(specs_dir))))
    if checks is None or (checks.base is None and checks.reviews is None):
        return result
    return _with(result, _git_checks(result, specs_dir, validator, checks, now, base))


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


def check_resumes_in_store(result: ValidationResult, store_url: str) -> ValidationResult:
    """Each `resume` judged by the store when there is one (`core.checks.resumes`): a named stop that never held the
    spec is a warning listing those that did; a Halted spec's resume is none. No store (a pull request's check): the
    resume is judged by the file alone, and a resume naming a stop says the store was not read."""
    resuming = [item for item in result.loaded if item.spec.resume is not None]
    if not resuming:
        return result
    from controller.adapters.store import Store  # noqa: PLC0415 - SQLAlchemy only for a spec with a resume
    from controller.core.checks.resumes import HeldBy, judge_resumes  # noqa: PLC0415
    from controller.core.model.binding import Phase  # noqa: PLC0415
    from controller.errors import StoreError  # noqa: PLC0415

    try:
        with Store(store_url, read_only=True) as store:
            held = {
                i.spec.name: [
                    HeldBy(h.stop.id, f"{h.stop.kind.value} {h.stop.target}", h.lifted_at is None)
                    for h in store.stop_history(i.spec.name, i.spec.downstream)
                ]
                for i in resuming
            }
            halted = frozenset(name for name, b in store.bindings().items() if b.phase is Phase.HALTED)
    except StoreError:
        if not any(i.spec.resumed_stops for i in resuming):
            return result
        skipped = "that the stop each resume names held its spec (no store at BACKFILLCTL_STORE_URL)"
        return replace(result, skipped=(*result.skipped, skipped))
    return replace(result, diagnostics=judge_resumes(result.loaded, result.diagnostics, held, halted))


DagLookup = Callable[[str], "DagInfo"]  # raises AirflowNotFound for an unknown DAG


def check_dags_in_airflow(
    result: ValidationResult, connect: Callable[[], AirflowClient], now: datetime
) -> ValidationResult:
    """`check_dags` against the Airflow `connect` opens (`session.make_client`); one that fails its preflight
    makes every DAG unknown."""
    try:
        client = connect()
    except AirflowError as exc:
        failure = exc

        def unreachable(_dag_id: str) -> DagInfo:
            raise failure

        return check_dags(result, unreachable, now)
    with client:
        checked = check_dags(result, lambda dag_id: client.dag(dag_id, with_tasks=False), now, client.dag_ids)
        return check_release(check_consumers(checked, client), client.capabilities)


def check_release(result: ValidationResult, caps: Capabilities) -> ValidationResult:
    """What a spec asks that this Airflow release cannot do (`drain_dag` before 3.4), at the field."""
    from controller.core.checks.dags import check_against_release  # noqa: PLC0415

    return _with(result, [d for item in result.loaded for d in check_against_release(item, caps)])


def check_consumers(result: ValidationResult, client: AirflowClient) -> ValidationResult:
    """The policy rule `asset_consumers`: one assets read per DAG whose rule sets it."""
    from controller.commands.observe import dag_load  # noqa: PLC0415
    from controller.core.checks.load_rules import check_asset_consumers, wants_consumers  # noqa: PLC0415

    wanted = [item for item in result.loaded if wants_consumers(item, result.policy)]
    loads = {dag_id: dag_load(client, dag_id, None) for dag_id in sorted({i.spec.dag_id for i in wanted})}
    return _with(result, [d for i in wanted for d in check_asset_consumers(i, loads[i.spec.dag_id], result.policy)])


def check_dags(
    result: ValidationResult, lookup: DagLookup, now: datetime, listing: Callable[[], set[str]] | None = None
) -> ValidationResult:
    """With Airflow configured: every spec's DAG exists and its schedule can be backfilled as asked, and its verify
    and publish DAGs exist (one details call per DAG). An unreachable Airflow is a warning: validate itself does not
    need Airflow. A DAG that does not exist gets the closest ids of Airflow's DAG `listing` (read only then), never
    a guess."""
    from controller.core.checks.dags import (  # noqa: PLC0415
        check_against_dag,
        check_stage_dags,
        superseded_warnings,
    )

    infos: dict[str, DagInfo | Unknown | None] = {}
    for item in result.loaded:
        for dag_id in _dag_ids(item.spec):
            if dag_id not in infos:
                infos[dag_id] = _look_up(lookup, dag_id)
    similar = _similar_ids([d for d, info in infos.items() if info is None], listing)
    found = [
        d
        for item in result.loaded
        for d in check_against_dag(item, infos[item.spec.dag_id], result.policy, now, similar.get(item.spec.dag_id, ()))
    ]
    found += [d for item in result.loaded for d in check_stage_dags(item, infos, similar)]
    replaced = {
        d for item in result.loaded for d in superseded_warnings(item, infos[item.spec.dag_id], result.diagnostics)
    }
    kept = replace(result, diagnostics=tuple(d for d in result.diagnostics if d not in replaced))
    return _with(kept, found)


def _dag_ids(spec: BackfillSpec) -> list[str]:
    """The DAGs a spec runs in Airflow: its own, then its verify and publish DAGs."""
    stages = (spec.verify, spec.publish)
    return [spec.dag_id, *(stage.dag_id for stage in stages if stage is not None)]


def _look_up(lookup: DagLookup, dag_id: str) -> DagInfo | Unknown | None:
    from controller.core.checks.dags import Unknown  # noqa: PLC0415

    try:
        return lookup(dag_id)
    except AirflowNotFound:
        return None
    except AirflowError as exc:
        return Unknown(exc.message)


def _similar_ids(missing: Sequence[str], listing: Callable[[], set[str]] | None) -> dict[str, tuple[str, ...]]:
    """Each missing DAG id → the existing ids closest to it, from Airflow's DAG list (one listing, only when a DAG
    is missing); a listing that fails suggests nothing (the missing DAG is still an error)."""
    if not missing or listing is None:
        return {}
    from controller.core.plan.world import closest_ids  # noqa: PLC0415

    try:
        known = listing()
    except AirflowError as exc:
        log.info("DAG listing unavailable (%s); no suggestion for a missing DAG", exc.message)
        return {}
    return {dag_id: closest_ids(dag_id, known) for dag_id in missing}


def _with(result: ValidationResult, extra: list[Diagnostic]) -> ValidationResult:
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
        found += _approvals(checks, reviewable, result, authors)
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
    return {item.spec.path: tuple(sorted(authors.get(git.relative(Path(item.spec.path)), set()))) for item in items}


def _approvals(
    checks: GitChecks, items: list[LoadedSpec], result: ValidationResult, authors: Mapping[str, Sequence[str]]
) -> list[Diagnostic]:
    """The approval gate, the one rule set reconcile applies too (`core/checks/approval.py`)."""
    from controller.core.checks.approval import (  # noqa: PLC0415
        authored,
        check_approvals,
        latest_decisions,
        parse_reviews,
    )

    assert checks.reviews is not None
    data, unreadable = read_reviews(checks.reviews)
    if unreadable:
        return unreadable
    reviews, problems = parse_reviews(data, files.display(checks.reviews))
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
    return _reviews_json(text, source)


# a page of 100 reviews is ~300 KB (GitHub's user objects), one with 100 maximal (64 KiB) bodies ~7 MB
REVIEWS_MAX_BYTES = 16 * 1024 * 1024
REVIEWS_HINT = (
    "save the reviews with `gh api --paginate --slurp repos/OWNER/REPO/pulls/N/reviews` "
    "(a JSON array, one array per page, or an array of pages)"
)


def _reviews_json(text: str, source: str) -> tuple[list[Any], list[Diagnostic]]:
    """The reviews in order from one JSON array, concatenated arrays (`gh api --paginate`: one per page)
    or an array of arrays (`gh api --paginate --slurp`)."""
    decoder = json.JSONDecoder()
    pages: list[tuple[Any, int]] = []
    at = _skip_blank(text, 0)
    while at < len(text):
        try:
            value, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError as exc:
            where = Location(source, exc.lineno, exc.colno)
            return [], [Diagnostic(where, f"the reviews file is not valid JSON: {exc.msg}", REVIEWS_HINT)]
        except (ValueError, RecursionError) as exc:  # a number of over 4,300 digits; arrays nested past the stack
            why = "nests arrays or objects too deeply" if isinstance(exc, RecursionError) else "holds a number too long"
            where = Location(source, text.count("\n", 0, at) + 1, at - (text.rfind("\n", 0, at) + 1) + 1)
            return [], [Diagnostic(where, f"the reviews file {why} to read as JSON", REVIEWS_HINT)]
        pages.append((value, at))
        at = _skip_blank(text, end)
    if not pages:
        return [], [Diagnostic(Location(source, 1, 1), "the reviews file is empty", REVIEWS_HINT)]
    if (
        len(pages) == 1
        and isinstance(pages[0][0], list)
        and pages[0][0]
        and all(isinstance(page, list) for page in pages[0][0])
    ):
        return [review for page in pages[0][0] for review in page], []
    found: list[Any] = []
    for value, start in pages:
        if not isinstance(value, list):
            line = text.count("\n", 0, start) + 1
            column = start - (text.rfind("\n", 0, start) + 1) + 1
            message = f"the reviews file must hold JSON arrays of reviews, found a JSON {_json_kind(value)} here"
            return [], [Diagnostic(Location(source, line, column), message, REVIEWS_HINT)]
        found += value
    return found, []


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    kinds = {dict: "object", str: "string", int: "number", float: "number", type(None): "null"}
    return kinds.get(type(value), "value")


def _skip_blank(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at


def preview_new(new: NewSpec, specs_dir: Path, now: datetime) -> tuple[Path, str, ValidationResult]:
    """The new spec's path, its text, and what validation says of it in the tree (nothing is written)."""
    from controller.core.render.scaffold import scaffold  # noqa: PLC0415

    check_new(new)
    path = specs_dir / f"{new.name}.yaml"
    text = scaffold(new)
    validator = build_validator()
    tree = files.collect([], specs_dir)
    preview = validator.validate(
        [SourceFile(files.display(path), new.name, text.encode())], now=now, policy_file=tree.policy
    )
    return path, text, _with(preview, list(check_names_in_tree(preview.loaded, files.names_in_tree(specs_dir))))


def create_spec(new: NewSpec, specs_dir: Path, now: datetime) -> tuple[Path, ValidationResult]:
    """Write `specs_dir/<name>.yaml` only if it validates: an invalid file in the tree stops every reconcile."""
    path, text, preview = preview_new(new, specs_dir, now)
    refuse_invalid(preview)
    files.write_new(path, text)
    return path, preview


def refuse_invalid(preview: ValidationResult) -> None:
    if preview.errors:
        raise InvalidSpecs(
            f"not written: the spec would be invalid: {preview.errors[0].text()}",
            details=tuple(d.text() for d in preview.errors[1:]),
            hint="fix the options that give these values; `backfillctl new --help` lists them",
        )


def check_new(new: NewSpec) -> None:
    """Refuse a name or date that cannot make a spec before anything is written (exit 2)."""
    pattern = files.load_schema("backfill-spec.schema.json")["properties"]["name"]["pattern"]
    if not re.fullmatch(pattern, new.name):
        raise UsageError(
            f"invalid spec name {new.name!r}: lower-case letters, digits, '-', '_' and '.', starting with a "
            "letter or digit, at most 100 characters",
            hint="the name is also the file name under the specs folder, e.g. orders-2025q1-fix",
        )
    for option, value in (("--from", new.from_date), ("--to", new.to_date)):
        try:
            parse_date(value)
        except ValueError as exc:
            raise UsageError(
                f"{option} {value!r} is not a date: {exc}",
                hint="use YYYY-MM-DD (00:00 UTC) or an RFC 3339 date-time with an offset, e.g. 2025-01-01T00:00:00Z",
            ) from None
