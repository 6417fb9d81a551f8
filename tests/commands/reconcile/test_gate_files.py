"""Which files the approval gate reads at HEAD, on a real git repository and SQLite: the pass's specs, the policy
and each path a decision is kept for, never the folder's every file; so a kept decision is forgotten exactly when
its file is gone or changed, whichever specs the pass loaded (a pass over a rest summary loads only the live ones),
and a pass decides what it decided with the folder's every file listed (only the carrying commit its reasons name
may now be found where 64 other changed files used to hide it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.adapters.githistory import GitHistory
from controller.adapters.gitsource import GitSource
from controller.adapters.store import Store
from controller.commands.reconcile.gate import PassFacts, gather
from controller.core.model.evidence import GateDecision, Verdict
from tests.adapters.test_git_paths import commit, git
from tests.commands.reconcile.harness import Bench


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


def verdicts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, narrowed: bool) -> dict[str, tuple[str, str]]:
    """Path → (verdict, reason) kept under `require_reviewed_merge` after two passes: 2 specs and 70 invalid files,
    then the policy edited and a spec added."""
    bench = Bench(tmp_path, git=True)
    bench.policy("version: 1\nrequire_reviewed_merge: true\n")
    for n in range(70):  # more changed files than the refusals name carrying commits for (CARRIERS)
        (bench.specs / f"broken-{n:02d}.yaml").write_text("not: a spec\n")
    bench.spec("one", dag="demo_daily")
    bench.spec("two", dag="demo_tz")
    bench.commit("specs")
    if not narrowed:  # the folder's every file, as before the gate listed only its own
        whole = GitHistory.file_blobs
        monkeypatch.setattr(GitHistory, "file_blobs", lambda self, ref, folder, only=None: whole(self, ref, folder))
    bench.run()
    bench.policy("version: 1\nrequire_reviewed_merge: true\n# edited: a change to judge\n")
    bench.spec("three", dag="demo_hourly")
    bench.commit("the policy edited, a spec added")
    bench.run()
    kept = {path: (d.verdict.value, d.reason) for path, d in bench.store.gate_decisions().items()}
    bench.close()
    return kept


def test_the_gate_decides_what_it_decided_with_the_folders_every_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    narrowed = verdicts(tmp_path / "narrowed", monkeypatch, narrowed=True)
    whole = verdicts(tmp_path / "whole", monkeypatch, narrowed=False)
    assert (
        sorted(narrowed)
        == sorted(whole)
        == ["specs/one.yaml", "specs/policy.yaml", "specs/three.yaml", "specs/two.yaml"]
    )
    assert {p: v for p, (v, _) in narrowed.items()} == {p: v for p, (v, _) in whole.items()}
    assert {v for v, _ in narrowed.values()} == {"unreviewed"}
    # the carrying commits named are the judged files' now, not the first 64 changed paths of any file's
    assert "specs/one.yaml in commit " in narrowed["specs/one.yaml"][1]
    assert "specs/one.yaml has no evidence" in whole["specs/one.yaml"][1]
