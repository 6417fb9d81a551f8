"""The pass's part of the approval gate: gather what `core/plan/provenance.py` decides with, from git (the files at
HEAD, what changed since the last reconciled commit, what each evidence document's change carries, its base's
policy, its commits' authors), the store (the last reconciled commit, the decisions kept) and the evidence given.

An evidence document whose commits are not in this history is an error (exit 1): it is another branch's, or the
clone lacks them. A head commit the clone lacks only holds its change (its authors are not known).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from controller.adapters.githistory import GitHistory
from controller.adapters.gitsource import GitSource
from controller.adapters.store import Reconciled, Store
from controller.commands.reconcile.evidence import changed_files, policy_paths, require_history
from controller.commands.runtime.validator import build_validator
from controller.core.checks.loaded import LoadedSpec
from controller.core.model.binding import Binding
from controller.core.model.evidence import Evidence
from controller.core.model.policy import DEFAULT_POLICY, Policy
from controller.core.model.spec import BackfillSpec, SourceFile
from controller.core.model.stops import EmergencyStop
from controller.core.plan.provenance import Carried, Gate
from controller.errors import ConfigError, GitError

log = logging.getLogger(__name__)
CARRIERS = 64  # changed files whose carrying commit a refusal names; more are listed by `evidence needed`


@dataclass(frozen=True, slots=True)
class EvidenceGiven:
    """What the reconcile command was given: one document per merged change, and the commits whose evidence the
    workflow could not fetch (their changes are held, never refused)."""

    documents: tuple[Evidence, ...] = ()
    unavailable: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PassFacts:
    """What the pass knows besides git: its specs as loaded, the bindings, the stops, whether a reviewed merge is
    required."""

    loaded: dict[str, LoadedSpec]
    specs: Sequence[BackfillSpec]
    bindings: dict[str, Binding]
    stops: tuple[EmergencyStop, ...] = ()
    require: bool = False
    given: EvidenceGiven = field(default_factory=EvidenceGiven)
    # the finished specs came from the folder's rest summary (no file of the folder is read but the pass's specs):
    # with the last reconciled commit at this tree, only their decisions and the policy's are read (`_reconciled_tree`)
    summarised: bool = False


def gather(git: GitSource, store: Store, folder: Path, facts: PassFacts, *, decide: bool = True) -> Gate | None:
    """The gate of this pass (None: the specs are not in a git repository with commits, nothing to judge).
    `decide` False (plan, status): only the decisions the store keeps, nothing decided anew."""
    head = git.head() if git.available else None
    if head is None:
        return None
    relative = git.relatives(s.path for s in facts.specs if s.name in facts.loaded)
    policies, last = policy_paths(git.history, folder), store.last_reconciled()
    narrowed = facts.summarised and _reconciled_tree(git.history, last, head, folder)
    scope = frozenset(relative.values()) | policies if narrowed else None
    recorded = store.gate_decisions(scope)
    # the files the gate judges or forgets: the pass's specs, the policy, each kept decision's (not every file)
    wanted = frozenset(relative.values()) | policies | recorded.keys()
    files = git.history.file_blobs(head, folder, only=wanted)
    paths = {s.name: rel for s in facts.specs if (rel := relative.get(s.path)) is not None and rel in files}
    policy_path = min((p for p in files if p in policies), default="")  # .yaml before .yml
    gate = Gate(
        files,
        paths,
        policy_path,
        recorded=recorded,
        require=facts.require,
        loaded=facts.loaded,
        stops=facts.stops,
        specs=tuple(facts.specs),
        bindings=facts.bindings,
        scope=scope,
    )
    if not decide:
        return replace(gate, deciding=False)
    changed, rewritten = _since_last(git, last, head, folder, files)
    carried = tuple(
        [_carried(git, folder, head, doc) for doc in facts.given.documents]
        + [_unavailable(git, folder, head, sha) for sha in facts.given.unavailable]
    )
    carriers = {p: c for p in sorted(changed)[:CARRIERS] if (c := git.history.carrier(head, p)) is not None}
    return replace(gate, changed=frozenset(changed), carried=carried, rewritten=rewritten, carriers=carriers)


def _reconciled_tree(history: GitHistory, last: Reconciled | None, head: str, folder: Path) -> bool:
    """The last reconciled commit holds HEAD's tree of the folder. The first pass that saves the gate's decisions
    at a tree reconciles it after reading and forgetting every decision (the commit before it held another tree),
    and no other pass writes them; so then no decision but those of the pass's own files can be stale. A rest
    summary alone does not say it: a dry run, or a pass that failed before its end, writes one and saves nothing."""
    if last is None or last.commit is None:
        return False
    if last.commit == head:
        return True
    prefix = history.relative(folder)
    return history.has_commit(last.commit) and history.tree_id(last.commit, prefix) == history.tree_id(head, prefix)


def _since_last(
    git: GitSource, last: Reconciled | None, head: str, folder: Path, files: dict[str, str]
) -> tuple[set[str], str | None]:
    """Of the gate's `files`, the paths that differ from the last reconciled commit's (every one when it is gone from
    the history; every spec when none is recorded: the policy a store starts with is no change, its specs were never
    judged), and that commit when HEAD does not descend from it (a force-push)."""
    history = git.history
    since = None if last is None else last.commit
    if since is None:
        policies = policy_paths(history, folder)
        return {p for p in files if p not in policies}, None
    if since == head:  # a pass over the commit the last one reconciled: nothing changed
        return set(), None
    if not history.has_commit(since):
        if history.shallow:
            raise GitError(
                f"the last reconciled commit {since} is not in this shallow clone: what changed since it is not known",
                hint="fetch the whole history (actions/checkout with fetch-depth: 0)",
            )
        return set(files), since  # gone from the history: rewritten
    before = history.file_blobs(since, folder, only=files.keys())
    changed = {path for path, blob in files.items() if before.get(path) != blob}
    return changed, None if history.is_ancestor(since, head) else since


def _carried(git: GitSource, folder: Path, head: str, doc: Evidence) -> Carried:
    """What a document's change carries, checked against this history."""
    history = git.history
    change = doc.change
    merge = doc.commit
    where = f"{doc.source}: $.change.merge_sha" if change is not None else f"{doc.source}: $.commit"
    require_history(history, merge, where)
    if not history.is_ancestor(merge, head):
        raise ConfigError(
            f"{where}: commit {merge} is not in the history of HEAD {head[:12]}",
            hint="pass the evidence of the changes on the branch reconcile reads (`backfillctl evidence needed`)",
        )
    base = history.first_parent(merge) if change is None else (change.base_sha or None)
    if change is not None and change.base_sha:
        require_history(history, change.base_sha, f"{doc.source}: $.change.base_sha")
        if not history.is_ancestor(change.base_sha, merge):
            raise ConfigError(
                f"{doc.source}: $.change.base_sha: {change.base_sha} is not in the history of the merge {merge[:12]}",
                hint="base_sha is the branch's commit the change landed on: the merge's first parent, or for a "
                "rebase the parent of the first rebased commit",
            )
    carried = changed_files(history, base, merge, folder)
    if change is None:
        return Carried(merge, carried, doc, order=history.depth(merge))
    policy, blob = _policy_at(git, base, folder)
    head_sha = change.head_sha or merge
    authors = None
    if history.has_commit(head_sha):
        found = git.authors_since(base, folder, head_sha)
        authors = {path: tuple(sorted(emails)) for path, emails in found.items()}
    elif doc.authors is not None:  # the provider read the change's commits from the forge (`commands/loop/forge.py`)
        authors = dict(doc.authors)
    else:
        log.warning("%s: the head commit %s of #%d is not in this clone", doc.source, head_sha, change.number)
    return Carried(merge, carried, doc, policy, blob, authors, history.depth(merge))


def _policy_at(git: GitSource, base: str | None, folder: Path) -> tuple[Policy, str]:
    """The base's policy, and its blob ("": none there: the default policy)."""
    history = git.history
    if base is None:
        return DEFAULT_POLICY, ""
    policies = policy_paths(git.history, folder)
    found = [(p, b) for p, b in history.file_blobs(base, folder).items() if p in policies]
    if not found:
        return DEFAULT_POLICY, ""
    path, blob = min(found)  # policy.yaml before policy.yml, as the reader takes it
    source = SourceFile(f"{path}@{base[:12]}", "policy", history.blob(blob))
    return build_validator().load_policy(source)[0], blob


def _unavailable(git: GitSource, folder: Path, head: str, sha: str) -> Carried:
    """A commit whose evidence the workflow could not fetch: what it changed is held."""
    history = git.history
    where = f"--evidence-unavailable {sha}"
    require_history(history, sha, where)
    if not history.is_ancestor(sha, head):
        raise ConfigError(f"{where}: not in the history of HEAD {head[:12]}", hint="name a commit of the branch")
    return Carried(sha, changed_files(history, history.first_parent(sha), sha, folder), None, order=history.depth(sha))
