"""The evidence of merged changes: read and check the documents (`reconcile --evidence`, `evidence check`), make
one from the deprecated reviews flags, and list the commits that need one (`evidence needed`).

A document is JSON checked against `schemas/evidence.schema.json`; every error names the file and the JSON path
(exit 1). What the gate decides with is gathered from git and the store by `commands/reconcile/gate.py`.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from controller.adapters import files
from controller.adapters.files import SPEC_SUFFIXES
from controller.adapters.githistory import GitHistory
from controller.adapters.gitsource import GitSource
from controller.adapters.store.reconciled import Reconciled
from controller.commands.runtime.session import open_store
from controller.commands.runtime.settings import Settings
from controller.core.documents.diagnostics import json_path
from controller.core.model.evidence import (
    EVIDENCE_VERSION,
    Evidence,
    ForgeReview,
    GateDecision,
    MergedChange,
    MergeMethod,
    ReviewState,
)
from controller.errors import ConfigError, GitError, StoreMissing

log = logging.getLogger(__name__)
EVIDENCE_MAX_BYTES = 16 * 1024 * 1024  # 10,000 reviews (the schema's bound) at ~500 bytes each, with room
HINT = (
    "write it as docs/ci-trust.md shows (`gh api` for the commit's pull request, its reviews and each reviewer's "
    "permission), and check it with `backfillctl evidence check FILE`"
)


def read_document(path: Path) -> Evidence:
    """One evidence document, schema-checked; an error names the file and the JSON path (ConfigError, exit 1)."""
    source = files.display(path)
    try:
        raw = files.read_bounded(path, EVIDENCE_MAX_BYTES)
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read the evidence document: {exc.strerror or exc}", hint=HINT) from None
    if len(raw) > EVIDENCE_MAX_BYTES:
        raise ConfigError(f"{source}: the evidence document is over {EVIDENCE_MAX_BYTES} bytes (16 MiB)", hint=HINT)
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: the evidence document is not UTF-8 text ({exc.reason})", hint=HINT) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{source}:{exc.lineno}:{exc.colno}: not valid JSON: {exc.msg}", hint=HINT) from None
    except (ValueError, RecursionError):
        raise ConfigError(f"{source}: the evidence document cannot be read as JSON", hint=HINT) from None
    _check_schema(data, source)
    return parse_document(data, source)


def _check_schema(data: Any, source: str) -> None:
    validator = Draft202012Validator(files.load_schema("evidence.schema.json"))
    errors = sorted(validator.iter_errors(data), key=lambda e: (list(map(str, e.absolute_path)), e.message))
    if errors:
        lines = [f"{source}: {json_path(tuple(e.absolute_path))}: {_message(e.message)}" for e in errors]
        raise ConfigError(lines[0], hint=HINT, details=tuple(lines[1:]))


def _message(text: str) -> str:
    """jsonschema's words, cut (a long value is quoted whole in them)."""
    return text if len(text) <= 300 else text[:299] + "…"


def parse_document(data: Mapping[str, Any], source: str) -> Evidence:
    """The values of a schema-valid document; a review without a reviewer is skipped with a warning."""
    raw = data["change"]
    change = None if raw is None else _change(raw)
    commit = data.get("commit") or (change.merge_sha if change is not None else "")
    if change is not None and commit != change.merge_sha:
        raise ConfigError(
            f"{source}: $.commit: {commit} is not the change's merge_sha {change.merge_sha}",
            hint="`commit` names the branch's commit the document speaks of: the merge_sha, or leave it out",
        )
    reviews = []
    for index, review in enumerate(data["reviews"]):
        if review["reviewer"] is None:
            log.warning("%s: $.reviews[%d]: a review without a reviewer (a deleted account) is skipped", source, index)
            continue
        reviews.append(
            ForgeReview(
                review["id"],
                review["reviewer"],
                ReviewState(review["state"]),
                review["commit"] or "",
                review["permission"].lower() if review["permission"] else None,
                review["submitted_at"] or "",
            )
        )
    return Evidence(data["forge"], commit, change, tuple(reviews), source)


def _change(raw: Mapping[str, Any]) -> MergedChange:
    method = raw["merge_method"]
    return MergedChange(
        raw["number"],
        raw["url"],
        raw["author"],
        raw["base_sha"],
        raw["head_sha"],
        raw["merge_sha"],
        None if method is None else MergeMethod(method),
    )


def from_reviews(path: Path, number: int, author: str, git: GitSource) -> Evidence:
    """The deprecated `--pr-reviews FILE --pr-number N --pr-author LOGIN`: HEAD's merge, onto its first parent, with
    no head SHA (an approval of any commit counts); an unreadable file is refused (exit 1)."""
    from controller.commands.reconcile.specfiles import read_reviews  # noqa: PLC0415
    from controller.core.checks.approval import parse_reviews  # noqa: PLC0415
    from controller.core.documents.reviews_json import REVIEWS_HINT  # noqa: PLC0415

    log.warning(
        "--pr-reviews, --pr-number and --pr-author are deprecated and go away in the next release: pass the merged "
        "change's evidence document with --evidence FILE (docs/ci-trust.md). They stand for HEAD's merge onto its "
        "first parent, and the head SHA is not checked: an approval of any commit of the pull request counts"
    )
    data, problems = read_reviews(path)
    reviews, found = parse_reviews(data, files.display(path)) if not problems else ([], [])
    problems += found
    errors = [p for p in problems if p.is_error]
    if errors:
        raise ConfigError(f"--pr-reviews: {errors[0].text()}", hint=errors[0].hint or REVIEWS_HINT)
    for warning in problems:
        log.warning("--pr-reviews: %s", warning.text())
    head = git.head() if git.available else None
    if head is None:
        raise ConfigError(
            "--pr-reviews: the specs folder is not in a git repository with commits: no merged change to judge",
            hint="run reconcile in a clone of the specs repository",
        )
    states = {s.value.upper(): s for s in ReviewState}
    forge = tuple(
        ForgeReview(r.review_id, r.login, states[r.state], r.commit_id, r.permission, r.submitted_at, r.association)
        for r in reviews
        if r.state in states
    )
    change = MergedChange(number, "", author, git.history.first_parent(head) or "", None, head)
    return Evidence("github", head, change, forge, f"--pr-reviews {files.display(path)}")


def summary(evidence: Evidence) -> dict[str, Any]:
    """What `evidence check` prints of a valid document."""
    change = evidence.change
    approved = sorted({r.reviewer for r in evidence.reviews if r.state is ReviewState.APPROVED})
    return {
        "version": EVIDENCE_VERSION,
        "source": evidence.source,
        "commit": evidence.commit,
        "change": None
        if change is None
        else {
            "number": change.number,
            "base_sha": change.base_sha,
            "head_sha": change.head_sha,
            "merge_sha": change.merge_sha,
            "merge_method": None if change.merge_method is None else change.merge_method.value,
        },
        "reviews": len(evidence.reviews),
        "approved_by": approved,
    }


# --- the commits that need evidence ----------------------------------------------------------------------------


def needed(settings: Settings) -> dict[str, Any]:
    """The branch's commits that change the specs folder since the last commit the store reconciled, and those that
    carry a file the gate holds or refused for want of evidence, oldest first (`evidence needed`)."""
    git = GitSource(settings.specs_dir)
    head = git.head() if git.available else None
    if head is None:
        raise ConfigError(
            f"{files.display(settings.specs_dir)} is not in a git repository with commits: no commit needs evidence",
            hint="run it in the clone the reconcile workflow checks out",
        )
    last, kept = _reconciled(settings)
    since = None if last is None else last.commit
    rewritten = since is not None and not (git.history.has_commit(since) and git.history.is_ancestor(since, head))
    folder = settings.specs_dir
    if since is not None and not rewritten:
        commits = git.history.branch_commits(since, head, folder)
    else:  # no reconciled commit, or one HEAD does not descend from: the commits that carry each file now
        history = git.history
        # every spec file at HEAD: a superset of the files the gate judges
        everything = set(history.file_blobs(head, folder)) - policy_paths(history, folder)
        differing = _differing(history, since, head, folder) if since else everything
        commits = [c for path in sorted(differing) if (c := git.history.carrier(head, path)) is not None]
    blobs = git.history.file_blobs(head, folder, only=kept.keys())  # the waiting decisions' files, not every file
    waiting = [
        c
        for path, d in sorted(kept.items())
        if blobs.get(path) == d.blob
        if (c := d.commit or git.history.carrier(head, path)) is not None
    ]
    ordered = sorted(set(commits) | set(waiting), key=git.history.depth)
    return {
        "format_version": 1,
        "head": head,
        "last_reconciled": since,
        "history_rewritten": rewritten,
        "commits": [{"sha": c, "paths": _touched(git.history, c, folder)} for c in ordered],
    }


def _reconciled(settings: Settings) -> tuple[Reconciled | None, dict[str, GateDecision]]:
    """The store's last reconciled commit and the kept decisions that wait on evidence; none before the first
    reconcile creates the store."""
    try:
        with open_store(settings, read_only=True) as store:
            return store.last_reconciled(), store.waiting_gate_decisions()
    except StoreMissing as exc:  # the first reconcile of a deployment: every spec is a change to judge
        log.warning("%s: every spec's change needs evidence", exc)
        return None, {}


def policy_paths(history: GitHistory, folder: Path) -> set[str]:
    """Where the folder's policy file may be (repository-relative)."""
    prefix = history.relative(folder)
    return {f"{prefix}/policy{s}" if prefix not in ("", ".") else f"policy{s}" for s in SPEC_SUFFIXES}


def _differing(history: GitHistory, since: str, head: str, folder: Path) -> set[str]:
    now = history.file_blobs(head, folder)
    if not history.has_commit(since):
        return set(now)
    then = history.file_blobs(since, folder)
    return {path for path, blob in now.items() if then.get(path) != blob}


def _touched(history: GitHistory, commit: str, folder: Path) -> list[str]:
    """The spec and policy files `commit` adds or changes against its first parent."""
    return sorted(changed_files(history, history.first_parent(commit), commit, folder))


def changed_files(history: GitHistory, base: str | None, merge: str, folder: Path) -> dict[str, str]:
    """Path → blob at `merge`, of each spec or policy file that differs from `base` (None: every file)."""
    after = history.file_blobs(merge, folder)
    before = history.file_blobs(base, folder) if base else {}
    return {path: blob for path, blob in after.items() if before.get(path) != blob}


def require_history(history: GitHistory, commit: str, what: str) -> None:
    """`commit` is in this clone, or a GitError says how to fetch it."""
    if history.has_commit(commit):
        return
    hint = (
        "this is a shallow clone: fetch the whole history (actions/checkout with fetch-depth: 0)"
        if history.shallow
        else "fetch it (git fetch origin), or check the evidence document names this repository's commits"
    )
    raise GitError(f"{what}: commit {commit} is not in this clone", hint=hint)
