"""What each bound spec asked when it was applied: recorded by the binding from now on (`Recorder.bind`), and
learned once for a store written before bindings kept it, from the audit log's first create intent of the spec
(the file's digest and last commit then) and git.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from controller.adapters.gitsource import GitSource
from controller.adapters.store import FirstCreate, Store
from controller.commands.runtime.validator import build_validator
from controller.core.model.binding import Applied, Binding
from controller.core.model.spec import BackfillSpec
from controller.core.plan.edits import Edit, applied_view
from controller.errors import GitError

log = logging.getLogger(__name__)
UNKNOWN = "not recorded before this release: the file as it was at the upgrade"


def applied_yet(binding: Binding) -> bool:
    """`core.model.binding.is_applied`."""
    return binding.head().applied


def applied_of(spec: BackfillSpec, commit: str | None, derived: str = "") -> Applied:
    return Applied(spec.identity(), commit, spec.execution is not None, derived)


def with_applied(
    bindings: Mapping[str, Binding], specs: Sequence[BackfillSpec], store: Store, git: GitSource, folder: Path
) -> dict[str, Binding]:
    """`bindings`, each applied spec's with what it asked when applied (learned and saved once where missing)."""
    missing = [s for s in specs if (b := bindings.get(s.name)) is not None and b.applied is None and applied_yet(b)]
    if not missing:
        return dict(bindings)
    firsts = store.first_creates([s.name for s in missing])
    out = dict(bindings)
    for spec in missing:
        binding = replace(
            bindings[spec.name], applied=_learned(spec, bindings[spec.name], firsts.get(spec.name), git, folder)
        )
        out[spec.name] = binding
        if not store.read_only:
            store.save_binding(binding)
    return out


def _learned(spec: BackfillSpec, binding: Binding, first: FirstCreate | None, git: GitSource, folder: Path) -> Applied:
    if first is None or first.spec_digest is None:  # adopted or nothing to do: the store's last record of the file
        if binding.spec_digest == spec.digest:
            return applied_of(spec, binding.git_commit, "the file as the store last recorded it")
        return applied_of(spec, binding.git_commit, UNKNOWN)
    if first.spec_digest == spec.digest:
        return applied_of(spec, first.spec_commit, "the file as first applied")
    earlier = None if first.spec_commit is None else _at(spec, first.spec_commit, git, folder)
    if earlier is None or first.spec_commit is None:
        log.warning("%s: what it asked when applied is unknown (%s)", spec.name, UNKNOWN)
        return applied_of(spec, first.spec_commit, UNKNOWN)
    return applied_of(earlier, first.spec_commit, f"the file at {first.spec_commit[:12]}, when first applied")


def _at(spec: BackfillSpec, commit: str, git: GitSource, folder: Path) -> BackfillSpec | None:
    """The spec as its file was at `commit` (None: not there, or git cannot tell)."""
    return spec_at(folder, commit, spec.name, git)


def spec_at(folder: Path, commit: str, name: str, git: GitSource | None = None) -> BackfillSpec | None:
    """The spec named `name` as the specs folder held it at `commit` (None: not there, or git cannot tell)."""
    git = git or GitSource(folder)
    if not git.available:
        return None
    try:
        sources = git.specs_at(commit, folder)
    except GitError:
        return None
    validator = build_validator()
    for source in sources:
        loaded, _ = validator.load_one(source)
        if loaded is not None and loaded.spec.name == name:
            return loaded.spec
    return None


def view_applied(
    specs: Sequence[BackfillSpec], bindings: Mapping[str, Binding], folder: Path
) -> tuple[list[BackfillSpec], dict[str, Edit]]:
    """`applied_view` for a command that reads no history otherwise (status offline, report): the commit that
    edited each edited spec comes from git, looked up for those files only."""
    viewed, edits = applied_view(specs, bindings, {})
    if not edits:
        return viewed, edits
    git = GitSource(folder)
    if not git.available:
        return viewed, edits
    edited = git.relatives(s.path for s in specs if s.name in edits)
    last = git.last_commits(folder, sorted(edited.values()))
    commits = {path: last[rel].sha for path, rel in edited.items() if rel in last}
    return applied_view(specs, bindings, commits)


def last_author(folder: Path, spec: BackfillSpec) -> str | None:
    """`committed by EMAIL in SHA`: the last commit of the spec's file (None outside git)."""
    git = GitSource(folder)
    if not git.available:
        return None
    relative = git.relative(Path(spec.path))
    commit = git.last_commits(folder, [relative]).get(relative)
    return None if commit is None else f"committed by {commit.author_email} in {commit.sha[:12]}"
