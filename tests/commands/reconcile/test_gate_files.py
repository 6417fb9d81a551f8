"""Which files the approval gate reads at HEAD, on a real git repository and SQLite: the pass's specs, the policy
and each path a decision is kept for, never the folder's every file; so a kept decision is forgotten exactly when
its file is gone or changed, whichever specs the pass loaded (a pass over a rest summary loads only the live ones),
and a pass decides what it decided with the folder's every file listed (only the carrying commit its reasons name
may now be found where 64 other changed files used to hide it)."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path

import pytest

from controller.adapters.githistory import GitHistory
from controller.adapters.gitsource import GitSource
from controller.adapters.store import Store
from controller.commands.reconcile.evidence import needed
from controller.commands.reconcile.gate import PassFacts, gather
from controller.commands.reconcile.reconciler import Reconciler
from controller.core.model.evidence import GateDecision, Verdict
from controller.core.plan.provenance import assess
from controller.errors import AirflowError
from tests.adapters.test_git_paths import commit, git
from tests.commands.reconcile.harness import Bench
from tests.commands.reconcile.test_spec_index_git import bench as index_bench
from tests.commands.reconcile.test_spec_index_git import commit as index_commit
from tests.commands.reconcile.test_spec_index_git import finished_history, resting
from tests.commands.reconcile.test_spec_index_git import git as index_git

__all__ = ["index_bench"]  # a fixture


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


def test_a_pass_over_a_rest_summary_reads_and_forgets_only_the_decisions_of_its_specs_and_the_policy(
    index_bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A decision kept for every finished spec's file: the pass over the folder's rest summary reads (and could
    forget) only the live spec's and the policy's, so what it reads does not grow with the finished specs; their
    files are the tree the whole pass before it forgot by. A commit deleting a finished file takes the whole path,
    which reads every decision and forgets that file's."""
    bench = index_bench
    finished_history(bench)
    bench.run()  # indexes every file, creates the live spec's backfill
    blobs = {f"specs/done-{n}.yaml": index_git(bench.root, "rev-parse", f"HEAD:specs/done-{n}.yaml") for n in range(6)}
    bench.store.save_gate_decisions([kept(p, b) for p, b in blobs.items()], blobs)
    asked: list[list[str] | None] = []
    real = Store.gate_decisions

    def spied(self: Store, paths: Collection[str] | None = None) -> dict[str, GateDecision]:
        asked.append(None if paths is None else sorted(paths))
        return real(self, paths)

    monkeypatch.setattr(Store, "gate_decisions", spied)
    resting(bench)  # the whole path: writes the rest summary
    resting(bench)  # over the summary
    assert asked == [None, ["specs/live.yaml", "specs/policy.yaml", "specs/policy.yml"]]
    assert sorted(bench.store.gate_decisions()) == sorted(blobs)  # unchanged files: every decision kept
    (bench.specs / "done-0.yaml").unlink()
    index_commit(bench, "done-0 deleted")
    asked.clear()
    resting(bench)
    assert asked == [None]
    assert sorted(bench.store.gate_decisions()) == sorted(blobs)[1:]


def test_evidence_needed_lists_only_the_files_whose_kept_decision_waits_on_evidence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`evidence needed` (each `--watch` pass with a forge asks it) reads the decisions that wait on evidence (held,
    unreviewed) and lists their files alone at HEAD, not every decision nor the folder's every file: a held file
    still at its blob names its commit; an unreviewed one since changed names none (its commit is the same here)."""
    bench = Bench(tmp_path, git=True)
    for name in ("held", "unreviewed", "approved", "other"):
        bench.spec(name, dag="demo_daily")
    bench.commit("specs")
    bench.run()
    head = git(tmp_path, "rev-parse", "HEAD")
    blob = {n: git(tmp_path, "rev-parse", f"HEAD:specs/{n}.yaml") for n in ("held", "unreviewed", "approved")}
    decisions = [
        GateDecision("specs/held.yaml", blob["held"], Verdict.HELD, "held", commit=head),
        GateDecision("specs/unreviewed.yaml", "0" * 40, Verdict.UNREVIEWED, "no reviewed pull request", commit=head),
        GateDecision("specs/approved.yaml", blob["approved"], Verdict.APPROVED, ""),
    ]
    bench.store.save_gate_decisions(decisions, {d.path: d.blob for d in decisions})
    listed: list[list[str] | None] = []
    whole = GitHistory.file_blobs

    def spied(self: GitHistory, ref: str, folder: Path, only: Collection[str] | None = None) -> dict[str, str]:
        listed.append(None if only is None else sorted(only))
        return whole(self, ref, folder, only=only)

    monkeypatch.setattr(GitHistory, "file_blobs", spied)
    found = needed(bench.settings())
    bench.close()
    assert [c["sha"] for c in found["commits"]] == [head]
    # then the files the named commit changed (`paths`; a root commit: its one listing)
    assert listed == [["specs/held.yaml", "specs/unreviewed.yaml"], None]


@pytest.mark.parametrize("unfinished", ["dry run", "Airflow down"])
def test_a_decision_made_stale_while_no_pass_saved_is_forgotten_before_any_pass_narrows(
    index_bench: Bench, monkeypatch: pytest.MonkeyPatch, unfinished: str
) -> None:
    """A file with a kept approval is deleted; the passes over that commit write the folder's rest summary but end
    before they save the gate's decisions (dry runs, or Airflow down). The next pass reads the summary, yet reads and
    forgets every decision: its last reconciled commit holds another tree of the folder. So the same file pushed
    again without a review is unreviewed, not approved by the decision kept for the deleted one."""
    bench = index_bench
    finished_history(bench)
    bench.run()
    resting(bench)
    bench.spec("extra", dag="demo_tz")
    index_commit(bench, "add extra")
    extra, text = "specs/extra.yaml", (bench.specs / "extra.yaml").read_text()
    blob = index_git(bench.root, "rev-parse", f"HEAD:{extra}")
    bench.store.save_gate_decisions([GateDecision(extra, blob, Verdict.APPROVED, "")], {extra: blob})
    resting(bench)  # its reconcile: keeps the approval
    (bench.specs / "extra.yaml").unlink()
    (bench.specs / "README.md").write_text("notes\n")  # a tree of the folder no pass has seen
    index_commit(bench, "extra deleted")
    for _ in range(2):  # the first rewrites the spec index, the second writes the rest summary
        reconciler = bench.reconciler()
        reconciler.rest_finished = True
        if unfinished == "dry run":
            reconciler.run_once(dry_run=True)
            continue
        with monkeypatch.context() as down:
            down.setattr(Reconciler, "_observe", lambda *_a, **_k: (_ for _ in ()).throw(AirflowError("down")))
            with pytest.raises(AirflowError):
                reconciler.run_once()
    assert extra in bench.store.gate_decisions()
    after = bench.reconciler()
    after.rest_finished = True
    after.run_once()
    assert (after.specs.summarised, extra in bench.store.gate_decisions()) == (True, False)
    (bench.specs / "extra.yaml").write_text(text)
    index_commit(bench, "extra pushed again, no pull request")
    again = bench.reconciler()
    desired, bindings = again.desired(None, again.spec_source())
    facts = PassFacts(again.loaded, desired.specs, bindings, (), require=True)
    gate = gather(again.git, bench.store, again.settings.specs_dir, facts)
    assert gate is not None
    decided = assess(gate)[extra]
    assert (decided.blob, decided.verdict) == (blob, Verdict.UNREVIEWED)
