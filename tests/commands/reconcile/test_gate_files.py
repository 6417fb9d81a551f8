"""Which files the approval gate reads at HEAD, on a real git repository and SQLite: the pass's specs, the policy
and each path a decision is kept for, never the folder's every file; so a kept decision is forgotten exactly when
its file is gone or changed, whichever specs the pass loaded (a pass over a rest summary loads only the live ones)."""

from __future__ import annotations

from pathlib import Path

from controller.adapters.gitsource import GitSource
from controller.adapters.store import Store
from controller.commands.reconcile.gate import PassFacts, gather
from controller.core.model.evidence import GateDecision, Verdict
from tests.adapters.test_git_paths import commit, git


def kept(path: str, blob: str) -> GateDecision:
    return GateDecision(path, blob, Verdict.REFUSED, "approval gate at reconcile: no")


def test_the_gate_reads_the_kept_decisions_files_and_forgets_only_those_gone_or_changed(tmp_path: Path) -> None:
    git(tmp_path, "init", "-q", "-b", "main")
    specs = tmp_path / "specs"
    specs.mkdir()
    for name in ("resting", "edited", "gone", "other"):
        (specs / f"{name}.yaml").write_text(f"{name}\n")
    (specs / "policy.yaml").write_text("version: 1\n")
    first = commit(tmp_path, "specs")
    blobs = {n: git(tmp_path, "rev-parse", f"{first}:specs/{n}.yaml") for n in ("resting", "edited", "gone")}
    (specs / "edited.yaml").write_text("edited again\n")
    (specs / "gone.yaml").unlink()
    commit(tmp_path, "specs")
    with Store(f"sqlite:///{tmp_path}/state.db") as store:
        decisions = [kept(f"specs/{n}.yaml", b) for n, b in blobs.items()]
        store.save_gate_decisions(decisions, {d.path: d.blob for d in decisions})
        gate = gather(GitSource(specs), store, specs, PassFacts(loaded={}, specs=(), bindings={}))
        assert gate is not None
        assert gate.files == {
            "specs/resting.yaml": blobs["resting"],
            "specs/edited.yaml": git(tmp_path, "rev-parse", "HEAD:specs/edited.yaml"),
            "specs/policy.yaml": git(tmp_path, "rev-parse", "HEAD:specs/policy.yaml"),
        }  # not other.yaml: no spec of the pass, no decision kept
        store.save_gate_decisions([], gate.files)
        assert list(store.gate_decisions()) == ["specs/resting.yaml"]
