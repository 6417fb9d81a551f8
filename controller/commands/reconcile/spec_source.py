"""The specs a pass reads: where from (`SpecSource`: HEAD or the working tree), and (`SpecLoader`) validated, in
queue order (first merged first) with each file's provenance (its last commit and the author who added it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from typing import NamedTuple

from controller.adapters.gitsource import Commit, GitSource
from controller.adapters.store import IndexedHead, IndexedSpec, RestKey, RestSummary, Store
from controller.commands.reconcile.finished import (
    History,
    Unread,
    new_rows,
    shown_paths,
    unread_specs,
)
from controller.commands.reconcile.rest_pass import Fallback, Made, kept_claims, rest_key, summary_of, unread_of
from controller.commands.reconcile.specfiles import validate_folder
from controller.commands.runtime.settings import Settings
from controller.commands.runtime.validator import build_validator
from controller.core.checks.loaded import LoadedSpec
from controller.core.checks.names import check_names_in_tree
from controller.core.checks.result import SpecSet, ValidationResult
from controller.core.model.binding import Binding, BindingHead, Claim
from controller.core.model.policy import Policy
from controller.core.model.spec import BackfillSpec, SourceFile
from controller.core.plan.provenance import SpecOrigin
from controller.core.plan.rest import Finished, Resting, busy, resting
from controller.core.plan.run_notes import notes_pending
from controller.core.plan.values import AtRest

HISTORY_PATHS = 64  # spec files looked up in git by name; more walk the folder's history once


class Origins(NamedTuple):
    """A spec file's history in git (None: git does not know it); a tuple still, as `finished.py` unpacks."""

    introduced: Commit | None = None  # the commit that added the file
    last: Commit | None = None  # the last commit that touched it


@dataclass(frozen=True, slots=True)
class SpecSource:
    """What a pass read: the commit at HEAD, or the working tree (`--allow-dirty`, or not a repository), and
    the spec files that differ from HEAD as (path, how)."""

    commit: str | None
    working_tree: bool
    differing: tuple[tuple[str, str], ...] = ()
    repository: bool = True
    untidy: bool = False  # something else under the folder differs from HEAD (no rest summary stands for it)

    @property
    def clean(self) -> bool:
        """The folder is HEAD's, everything under it."""
        return self.repository and not self.differing and not self.untidy

    def lines(self) -> list[str]:
        """What to tell the user, one line per file (none when the working tree is the commit)."""
        short = (self.commit or "")[:12] or "none (no commits yet)"
        if not self.repository:
            return ["not in a git repository: the spec files are applied as they are on disk, unreviewed"]
        if self.working_tree:
            return [
                f"--allow-dirty: applying {path} ({how}), which HEAD {short} does not hold"
                for path, how in self.differing
            ]
        return [
            f"not applied: {path} ({how}); reconcile applies what is committed at HEAD {short}: commit it, or "
            "pass --allow-dirty for a local experiment"
            for path, how in self.differing
        ]


class SpecLoader:
    def __init__(self, settings: Settings, store: Store, git: GitSource, clock: Callable[[], datetime]) -> None:
        self.settings, self.store, self.git, self.clock = settings, store, git, clock
        self.provenance: dict[str, SpecOrigin] = {}  # spec path → its last commit and the author who added it
        self.loaded: dict[str, LoadedSpec] = {}  # the last load's specs with their documents (the gate locates)
        self.history = History()  # the spec index as the passes of this process keep it
        self.at_rest = AtRest()  # the last load's finished specs at rest (with `rest`): counted, not built
        self.claims: Mapping[str, Claim] = {}  # of them, what those on walked DAGs claim (`World.claims`)
        self.made: Made | None = None  # what the last whole load found that a rest summary keeps (`rest_pass`)
        self.summarised = False  # the last `planned` read the finished specs from the folder's rest summary

    def planned(
        self, bindings: Mapping[str, Binding] | None, source: SpecSource | None, *, rest: bool
    ) -> tuple[SpecSet, Mapping[str, Binding]]:
        """`load`, and the bindings (`bindings` None: the store's); with `rest`, the store's are read whole only for
        the specs not at rest (their heads tell which, or the folder's rest summary: `rest_pass`), and of those at
        rest on a walked DAG, their claims."""
        self.claims, self.summarised = {}, False
        if bindings is not None or not rest:
            bindings = self.store.bindings() if bindings is None else bindings
            return self.load(heads(bindings), source), bindings
        clean = source is not None and source.clean
        keyed = rest_key(self.git, self.store, self.settings.specs_dir, clean=clean)
        summarised = self._summarised(*keyed, source) if keyed is not None else None
        if summarised is not None:
            return summarised
        every = self.store.binding_heads()
        found = self.load(every, source, rest=True)
        resting, walked = self.at_rest.names, self.at_rest.walked
        self.claims = self.store.claims(walked) if walked else {}
        named = [n for n in every if n not in resting] if resting else None
        if keyed is not None and self.made is not None and not self.store.read_only:
            summary = summary_of(keyed[1], self.made, every, self.claims)
            if summary is not None:
                self.store.save_rest_summary(keyed[0], summary)
        return found, self.store.bindings(named=named)

    def _summarised(
        self, folder: str, key: RestKey, source: SpecSource | None
    ) -> tuple[SpecSet, Mapping[str, Binding]] | None:
        """`planned` from the folder's rest summary when its key is this pass's (None: it is not, or it cannot
        stand: the whole path reads)."""
        summary = self.store.rest_summary(folder)
        if summary is None or summary.key != key:
            return None
        bindings = self.store.bindings(named=sorted({*summary.others, *self.store.unfinished_names()}))
        try:
            found = self.load(heads(bindings), source, rest=True, summary=(folder, summary))
        except Fallback:
            return None
        self.claims = kept_claims(summary, self.at_rest.walked, self.store)
        if self.store.finished_revision() != key.revision:  # a binding finished while these were read
            return None
        self.summarised = True
        return found, bindings

    def load(
        self,
        bindings: Mapping[str, BindingHead] | None = None,
        source: SpecSource | None = None,
        *,
        rest: bool = False,
        summary: tuple[str, RestSummary] | None = None,
    ) -> SpecSet:
        """The valid specs in queue order, each invalid file on its own, and the policy, from the working tree or
        (`source` not `working_tree`) from HEAD; the files of finished specs (`bindings`), unchanged, are only
        read, not validated again, and those the store's index keeps are not read at all (`finished.py`:
        a pass's cost must not grow with the finished specs, 10,000 of them must not slow every pass); with `rest`,
        those owed nothing are not even built (`at_rest`: a view that lists every spec asks without). What the
        policy says of a spec already applied is a warning (it can no longer change what ran). With `summary` (the
        folder's, keyed to this pass), the rows and files of the specs at rest are neither read nor walked; what
        it cannot stand for raises `Fallback`."""
        settled = frozenset(b.spec_digest for b in (bindings or {}).values() if b.phase.terminal and b.spec_digest)
        unread, self.made = Unread(), None
        if summary is not None:
            unread = unread_of(summary[1], summary[0])
        elif bindings is not None and source is not None and source.repository:
            unread = unread_specs(
                self.git,
                self.store,
                self.settings.specs_dir,
                bindings,
                (p for p, _ in source.differing),
                history=self.history,
            )
        applied = dict.fromkeys(name for name, b in (bindings or {}).items() if b.applied)
        only = summary[1].walked if summary is not None else None
        result, heads_read, heads_known, walked = self._read(source, settled, unread, applied, only)
        found = result.split()
        if summary is not None and found.policy_errors:
            raise Fallback
        kept = summary[1].resting if summary is not None else None
        if rest and summary is None:
            kept = self._resting(heads_read, bindings or {}, found)
        dags = {item.spec.dag_id for item in result.loaded}
        self.at_rest = kept.at_rest(busy(dags, bindings or {})) if rest and kept is not None else AtRest()
        known = self._whole(heads_known, self.at_rest.names)
        if known is None:  # a row gone unreadable since its head was read: every file is read, none rests
            if summary is not None:
                raise Fallback
            unread, self.at_rest, known, heads_read, kept = Unread(), AtRest(), {}, {}, None
            result = self._read(source, settled, unread, applied)[0]
            found = result.split()
        invalid = {s.path for s in found.invalid}
        valid = [item for item in result.loaded if item.spec.path not in invalid]
        indexed = self.history.rebuilt({path: row for path, row in known.items() if path in heads_read})
        self.loaded = {item.spec.name: item for item in (*valid, *indexed)}
        ordered, relative, origins = self._ordered([*found.valid, *(i.spec for i in indexed)], known)
        if bindings is not None and not self.store.read_only and unread.blobs:
            fresh = new_rows(valid, bindings, unread, relative, origins)
            if fresh or unread.stale:  # summarised: the rows of the specs at rest are not the pass's to drop
                self.store.index_specs(fresh, present=None if summary else set(unread.blobs.values()))
                kept = None  # a pass that wrote the index keeps no summary: its own write made it stale
        if rest and summary is None and kept is not None and walked is not None:
            self.made = Made(kept, unread, walked)
        return replace(found, valid=tuple(ordered))

    def _whole(self, heads: Mapping[str, IndexedHead], resting: frozenset[str]) -> dict[str, IndexedSpec] | None:
        """The rows of the specs a pass builds or orders (all but those at rest), by spec path as shown; None when
        one of them can no longer be read."""
        wanted = {path: head.blob_id for path, head in heads.items() if head.name not in resting}
        rows = self.store.indexed_specs(set(wanted.values())) if wanted else {}
        whole = {path: rows[blob] for path, blob in wanted.items() if blob in rows}
        return whole if len(whole) == len(wanted) else None

    def _resting(
        self, rows: Mapping[str, IndexedHead], bindings: Mapping[str, BindingHead], found: SpecSet
    ) -> Resting | None:
        """The unread rows' specs at rest (`core.plan.rest`); none when the policy has errors (the last good
        one decides then, and this pass cannot tell what it owes) or a stop holds. Owed: a publish run, or run
        notes (the whole bindings of the specs on the DAGs the policy's `airflow_notes` covers say)."""
        if not rows or found.policy_errors or self.store.stops():
            return None
        notes = found.policy.airflow_notes
        noted = [r.name for r in rows.values() if notes is not None and notes.covers(r.dag_id)]
        owed = {n for n, b in self.store.bindings(named=noted).items() if notes_pending(b, notes)} if noted else set()
        return resting([Finished(r.name, r.dag_id, r.publishes or r.name in owed) for r in rows.values()], bindings)

    def _read(
        self,
        source: SpecSource | None,
        settled: frozenset[str],
        unread: Unread,
        applied: Mapping[str, BackfillSpec | None],
        only: tuple[str, ...] | None = None,
    ) -> tuple[ValidationResult, dict[str, IndexedHead], dict[str, IndexedHead], tuple[str, ...] | None]:
        """The spec files read and validated, but `unread`'s (`only`: those files, the folder unwalked); `unread`'s
        rows by spec path as shown, every file's row (`known`) so, and the files read from the folder (None: from
        HEAD). A read file that takes the name of an unread one makes every file read (the unique-name rule, word
        for word; summarised: `Fallback`)."""
        folder, walked = self.settings.specs_dir, None
        if source is None or source.working_tree or not source.differing:  # a clean tree reads as HEAD does
            shown = shown_paths(folder)
            known = {shown(unread.within(path)): row for path, row in unread.known.items()}
            skip = {unread.within(path) for path in unread.entries}
            try:
                result, walked = validate_folder(
                    folder, self.clock(), settled=settled, unread=skip, applied=applied, only=only
                )
            except OSError:  # a listed file's folder unreadable since: the walk would have passed it by
                if only is None:
                    raise
                raise Fallback from None
        else:
            shown = shown_paths(self.git.root)
            known = {shown(path): row for path, row in unread.known.items()}
            specs, policy = self.git.committed(folder, skip=unread.entries.keys())
            result = build_validator().validate(
                specs, now=self.clock(), policy_file=policy, settled=settled, applied=applied
            )
        rows = {path: row for path, row in known.items() if row.path in unread.entries}
        names: dict[str, list[str]] = {}
        for path, row in rows.items():
            names.setdefault(row.name, []).append(path)
        if rows and next(check_names_in_tree(result.loaded, names), None) is not None:
            if only is not None:
                raise Fallback
            return self._read(source, settled, Unread(), applied)
        return result, rows, known, walked

    def queue_order(self, specs: list[BackfillSpec]) -> list[BackfillSpec]:
        """First merged first: the commit that added the spec file, then the name."""
        return self._ordered(specs, {})[0]

    def _ordered(
        self, specs: list[BackfillSpec], indexed: Mapping[str, IndexedSpec]
    ) -> tuple[list[BackfillSpec], dict[str, str], dict[str, Origins]]:
        """`queue_order`, with the introductions and last commits of the spec files the index keeps (`indexed`,
        by spec path) from there; the others' from git history, only their own files' when they are few. Also
        each looked-up spec's repository-relative path, and what git said of it."""
        history = self.git.available and self.git.head() is not None
        relative = self.git.relatives(s.path for s in specs if s.path not in indexed) if history else {}
        origins = self._origins(sorted(set(relative.values())))
        for path, rel in relative.items():
            intro, last = origins.get(rel, Origins())
            if last is not None:
                self.provenance[path] = SpecOrigin(last.sha, intro.author_email if intro else "")
        for path, row in indexed.items():
            if row.last_commit is not None:
                self.provenance[path] = SpecOrigin(row.last_commit, row.author_email)

        def key(spec: BackfillSpec) -> tuple[float, str]:
            row = indexed.get(spec.path)
            intro = origins.get(relative.get(spec.path, ""), Origins()).introduced
            when = row.introduced if row is not None else (intro.timestamp if intro else None)
            return (float("inf") if when is None else when, spec.name)

        return sorted(specs, key=key), relative, origins

    def _origins(self, paths: Sequence[str]) -> dict[str, Origins]:
        """Repository-relative path → (the commit that added it, the last that touched it); git walks only these
        files' history when they are few (a pass over live specs), else the folder's once."""
        if not paths:
            return {}
        asked = paths if len(paths) <= HISTORY_PATHS else None
        intros = self.git.introductions(self.settings.specs_dir, asked)
        last = self.git.last_commits(self.settings.specs_dir, asked)
        return {path: Origins(intros.get(path), last.get(path)) for path in paths}


def heads(bindings: Mapping[str, Binding]) -> dict[str, BindingHead]:
    return {name: binding.head() for name, binding in bindings.items()}


LAST_POLICY = "policy at the last reconciled commit"  # how a policy read back from the store is named


def last_good_policy(store: Store) -> Policy | None:
    """The newest valid policy a pass read (None: none recorded): what still decides, while the policy at HEAD cannot
    be read, the guards' pauses and who may lift a stop."""
    text = store.last_valid_policy()
    if text is None:
        return None
    source = SourceFile(LAST_POLICY, "policy", text.encode())
    policy, problems = build_validator().load_policy(source)
    return None if any(p.is_error for p in problems) else policy
