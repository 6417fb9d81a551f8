"""Finished specs cost a pass nothing (issue 29), in a real git repository on the fake Airflow: a finished spec
whose file is unchanged (its git blob is the one the store's index keeps) is not read, parsed or looked up in git
history again; an edited one is read again; a store without index rows reads everything, as before, and plans
the same."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from git import cmd as gitcmd
from sqlalchemy import delete, func, select

from controller.adapters.gitsource import GitSource
from controller.adapters.store import Store
from controller.adapters.store.tables import spec_index
from controller.cli import main
from controller.commands.reconcile import finished
from controller.commands.reconcile.reconciler import PassResult
from controller.core.checks import validation
from controller.core.documents.yamlsafe import load_document
from controller.core.model.binding import Phase
from controller.core.model.stops import EmergencyStopKind, StopSource
from controller.core.plan.values import AtRest, summary_counts
from controller.core.render.plan import plan_text
from tests.commands.reconcile.harness import Bench, fake, in_process
from tests.fakes.airflow import FakeAirflow

FINISHED = 6  # one-day specs queued on one DAG: each runs one run and finishes


def git(root: Path, *args: str) -> str:
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_AUTHOR_NAME": "alice", "GIT_AUTHOR_EMAIL": "alice@x"}
    env |= {"GIT_COMMITTER_NAME": "alice", "GIT_COMMITTER_EMAIL": "alice@x"}
    return subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True).stdout.strip()


def commit(bench: Bench, message: str) -> None:
    git(bench.root, "add", "-A")
    git(bench.root, "commit", "-qm", message)


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[Bench]:
    b = Bench(tmp_path, fake=FakeAirflow())
    (tmp_path / ".gitignore").write_text("state.db*\n")
    git(tmp_path, "init", "-q", "-b", "main")
    yield b
    b.close()


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every spec file the validator parses (its YAML loaded), by path."""
    parsed: list[str] = []

    def counting(source: str, raw: bytes) -> Any:
        parsed.append(Path(source).name)
        return load_document(source, raw)

    monkeypatch.setattr(validation, "load_document", counting)
    return parsed


@pytest.fixture
def walks(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The paths each `git log` walks the history of."""
    walked: list[list[str]] = []
    real = GitSource._log

    def spying(self: GitSource, *args: str) -> str:
        walked.append(list(args[args.index("--") + 1 :]))
        return real(self, *args)

    monkeypatch.setattr(GitSource, "_log", spying)
    return walked


def finished_history(bench: Bench) -> PassResult:
    """FINISHED specs, one commit each, run to the end; then a live one on another DAG, committed."""
    for n in range(FINISHED):
        bench.spec(f"done-{n}", start=f"2025-01-0{n + 1}", end=f"2025-01-0{n + 1}")
        commit(bench, f"add done-{n}")
    done = bench.until_terminal(passes=40)
    assert set(bench.phases(done).values()) == {"Succeeded"}
    bench.spec("live", dag="demo_hourly", start="2025-01-01T00:00:00Z", end="2025-01-01T05:00:00Z")
    commit(bench, "add live")
    fake(bench).scheduler_running = False  # the live spec stays running
    return done


def index_rows(store: Store) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(spec_index)).scalar_one())


def items(result: PassResult) -> list[tuple[str, str, str, str]]:
    return [(i.spec, i.kind.value, i.phase.value, i.reason) for i in result.current.items]


def test_a_second_pass_reads_no_finished_spec_and_walks_no_history_but_the_live_ones(
    bench: Bench, reads: list[str], walks: list[list[str]]
) -> None:
    finished_history(bench)
    reads.clear()
    walks.clear()
    first = bench.run()  # each finished spec was indexed in a pass that read it (the last one too)
    assert reads == ["live.yaml"]
    assert walks == [[":(top,literal)specs/live.yaml"], [":(top,literal)specs/live.yaml"]]  # the new file only
    assert index_rows(bench.store) == FINISHED + 1  # every file, the live one for its provenance
    reads.clear()
    walks.clear()
    second = bench.run()
    assert reads == ["live.yaml"]
    assert walks == []
    assert items(second) == items(first)
    assert [i.spec for i in second.plan.items] == [*(f"done-{n}" for n in range(FINISHED)), "live"]


def test_a_pass_lists_heads_tree_once_for_the_index_and_the_gate(bench: Bench, monkeypatch: pytest.MonkeyPatch) -> None:
    finished_history(bench)
    bench.run()
    listed: list[list[str]] = []
    real = gitcmd.Git.execute

    def spying(self: gitcmd.Git, command: Any, *args: Any, **kwargs: Any) -> Any:
        if "ls-tree" in command:
            listed.append(list(command))
        return real(self, command, *args, **kwargs)

    monkeypatch.setattr(gitcmd.Git, "execute", spying)
    bench.run()
    head = git(bench.root, "rev-parse", "HEAD").strip()
    assert listed == [["git", "ls-tree", "-r", "-z", "--full-tree", head, "--", ":(top,literal)specs"]]


def test_editing_a_finished_specs_file_makes_it_read_again(bench: Bench, reads: list[str]) -> None:
    finished_history(bench)
    bench.run()
    reads.clear()
    bench.run()
    assert reads == ["live.yaml"]
    path = bench.specs / "done-2.yaml"
    path.write_text(path.read_text() + "# a note for the change record\n")
    commit(bench, "note on done-2")
    reads.clear()
    bench.run()
    assert sorted(reads) == ["done-2.yaml", "live.yaml"]


def test_a_store_without_index_rows_reads_everything_and_plans_the_same(bench: Bench, reads: list[str]) -> None:
    finished_history(bench)
    bench.run()
    reads.clear()
    indexed = bench.run()
    assert reads == ["live.yaml"]
    with bench.store.engine.begin() as conn:
        conn.execute(delete(spec_index))
    reads.clear()
    rebuilt = bench.run()
    assert len(reads) == FINISHED + 1
    assert items(rebuilt) == items(indexed)
    assert index_rows(bench.store) == FINISHED + 1  # and indexed again
    reads.clear()
    assert items(bench.run()) == items(indexed)
    assert reads == ["live.yaml"]


def test_a_lost_store_reads_everything_adopts_and_indexes_again(bench: Bench, reads: list[str]) -> None:
    finished_history(bench)
    bench.run()
    before = bench.run()
    bench.store.close()
    (bench.root / "state.db").unlink()
    bench.store = Store(bench.store_url)
    reads.clear()
    bench.run()  # adopts every backfill again (bindings are gone: no file can go unread yet), indexes every file
    assert len(reads) == FINISHED + 1
    assert index_rows(bench.store) == FINISHED + 1
    reads.clear()
    after = bench.run()
    assert reads == ["live.yaml"]
    assert [(s, k, p) for s, k, p, _r in items(after)] == [(s, k, p) for s, k, p, _r in items(before)]


def test_a_watching_reconciler_keeps_the_index_between_passes_and_reads_what_changed(
    bench: Bench, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """One Reconciler, pass after pass (as under --watch): HEAD's blob ids and the specs built from the index rows
    are made once; a commit that edits a finished file makes that file, and only it, read again."""
    finished_history(bench)
    bench.run()  # indexes every file
    calls: list[str] = []
    for owner, name in ((Store, "indexed_specs"), (GitSource, "blob_ids")):
        real = getattr(owner, name)
        monkeypatch.setattr(owner, name, lambda self, *a, _r=real, _n=name: calls.append(_n) or _r(self, *a))
    built: list[int] = []
    monkeypatch.setattr(finished, "rebuilt", lambda rows, _r=finished.rebuilt: built.append(len(rows)) or _r(rows))
    watching = bench.reconciler()
    reads.clear()
    first = watching.run_once()
    assert (calls, built, reads) == (["blob_ids", "indexed_specs"], [FINISHED], ["live.yaml"])
    calls.clear(), built.clear(), reads.clear()
    second = watching.run_once()
    assert (calls, built, reads) == (["indexed_specs"], [0], ["live.yaml"])
    assert items(second) == items(first)
    path = bench.specs / "done-2.yaml"
    path.write_text(path.read_text() + "# a note for the change record\n")
    commit(bench, "note on done-2")
    calls.clear(), built.clear(), reads.clear()
    edited = watching.run_once()
    assert (calls, sorted(reads)) == (["blob_ids", "indexed_specs"], ["done-2.yaml", "live.yaml"])
    assert items(edited) == items(bench.run())  # what a new process plans
    reads.clear()
    bench.run()
    fresh_reads = sorted(reads)
    calls.clear(), built.clear(), reads.clear()
    watching.run_once()
    assert (calls, sorted(reads)) == (["indexed_specs"], fresh_reads)  # what a new process reads, nothing more


# --- at rest: `reconcile --once` counts the finished specs owed nothing instead of building them ----------------


def resting(bench: Bench) -> PassResult:
    """A pass whose only view is its plan text, as `reconcile --once` runs it."""
    reconciler = bench.reconciler()
    reconciler.rest_finished = True
    return reconciler.run_once()


def test_a_once_pass_counts_the_finished_specs_of_a_dag_at_rest_and_says_the_same(
    bench: Bench, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    finished_history(bench)
    bench.run()  # indexes every file, creates the live spec's backfill
    full = bench.run()
    kept = bench.store.bindings()
    built: list[int] = []
    monkeypatch.setattr(finished, "rebuilt", lambda rows, _r=finished.rebuilt: built.append(len(rows)) or _r(rows))
    reads.clear()
    rest = resting(bench)
    assert (reads, built) == (["live.yaml"], [0])  # no finished spec read or built
    assert [i.spec for i in rest.plan.items] == ["live"]
    done = frozenset(f"done-{n}" for n in range(FINISHED))
    assert rest.plan.at_rest == AtRest(((Phase.SUCCEEDED, FINISHED),), done, walked=frozenset())
    shown = plan_text(rest.plan, show_unchanged=False)
    assert shown == plan_text(full.plan, show_unchanged=False)
    assert (
        shown.splitlines()[0]
        == f"{FINISHED + 1} specs unchanged ({FINISHED} Succeeded, 1 Running): --show-unchanged lists them"
    )
    assert (rest.plan.checksum(), summary_counts(rest.plan)) == (full.plan.checksum(), summary_counts(full.plan))
    assert {n: b for n, b in bench.store.bindings().items() if n != "live"} == {
        n: b for n, b in kept.items() if n != "live"
    }  # nothing recorded of them


def test_finished_specs_on_a_dag_with_live_work_rest_and_their_backfills_stay_theirs(
    bench: Bench, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new spec with a finished one's range, on its DAG: the finished one's backfill is never adopted by it, with
    the finished specs counted or built alike."""
    finished_history(bench)
    bench.run()
    bench.spec("again", start="2025-01-01", end="2025-01-01")  # done-0's range, on its DAG
    commit(bench, "add again")
    full = bench.run(dry_run=True)
    reconciler = bench.reconciler()
    reconciler.rest_finished = True
    built: list[int] = []
    monkeypatch.setattr(finished, "rebuilt", lambda rows, _r=finished.rebuilt: built.append(len(rows)) or _r(rows))
    whole: list[list[str] | None] = []
    claimed: list[list[str]] = []
    monkeypatch.setattr(
        Store, "bindings", lambda self, named=None, _r=Store.bindings: whole.append(named) or _r(self, named)
    )
    monkeypatch.setattr(
        Store, "claims", lambda self, named, _r=Store.claims: claimed.append(sorted(named)) or _r(self, named)
    )
    rest = reconciler.run_once(dry_run=True)
    done = frozenset(f"done-{n}" for n in range(FINISHED))
    assert (rest.plan.at_rest, built) == (AtRest(((Phase.SUCCEEDED, FINISHED),), done, walked=done), [0])
    assert (whole[:1], claimed) == ([["live"]], [sorted(done)])  # of the walked specs, their claims only
    decided = [(i.spec, i.kind.value, i.reason) for i in rest.plan.items]
    assert decided == [("again", "noop", "nothing to reprocess"), ("live", "noop", "in sync")]  # not adopted
    assert plan_text(rest.plan, show_unchanged=False) == plan_text(full.plan, show_unchanged=False)


def test_nothing_rests_while_a_stop_holds(bench: Bench) -> None:
    finished_history(bench)
    bench.run()
    bench.store.add_stop(EmergencyStopKind.SPEC, "live", "incident", "oncall", source=StopSource.CLI)
    rest = resting(bench)
    assert rest.plan.at_rest == AtRest()
    assert len(rest.plan.items) == FINISHED + 1


def test_reconcile_once_prints_what_a_pass_building_every_spec_prints(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    finished_history(bench)
    bench.run()
    full = bench.run()
    in_process(bench, monkeypatch)
    built: list[int] = []
    monkeypatch.setattr(finished, "rebuilt", lambda rows, _r=finished.rebuilt: built.append(len(rows)) or _r(rows))
    capsys.readouterr()
    assert main(["reconcile", "--once"]) == 0
    assert capsys.readouterr().out == plan_text(full.plan, width=80, show_unchanged=False)
    assert built == [0]


def test_a_finished_spec_owed_run_notes_stays_an_item_until_they_are_written(bench: Bench) -> None:
    finished_history(bench)
    bench.run()
    (bench.specs / "policy.yaml").write_text('version: 1\nairflow_notes: {dags: ["demo_daily"]}\n')
    commit(bench, "run notes on demo_daily")
    owed = resting(bench)  # notes every finished spec's run (one each)
    assert (owed.plan.at_rest, len(owed.plan.items)) == (AtRest(), FINISHED + 1)
    noted = resting(bench)
    assert [i.spec for i in noted.plan.items] == ["live"]
    assert noted.plan.at_rest.count == FINISHED


def test_an_index_row_unreadable_since_its_head_was_read_makes_every_file_read(
    bench: Bench, reads: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    finished_history(bench)
    bench.run()
    full = bench.run()
    monkeypatch.setattr(Store, "indexed_specs", lambda self, blobs=None: {})
    reads.clear()
    rest = resting(bench)
    every = sorted([*(f"done-{n}.yaml" for n in range(FINISHED)), "live.yaml", "live.yaml"])  # the live one twice
    assert (sorted(reads), rest.plan.at_rest) == (every, AtRest())
    assert items(rest) == items(full)


def test_fail_on_failures_still_sees_a_finished_spec_that_ended_with_failures(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bench.spec("flaky", dag="demo_flaky", start="2025-01-01", end="2025-01-01")  # an odd day: its run fails
    commit(bench, "add flaky")
    assert bench.phases(bench.until_terminal(passes=20)) == {"flaky": "CompletedWithFailures"}
    bench.run()  # its file is unread from now on
    in_process(bench, monkeypatch)
    capsys.readouterr()
    assert main(["reconcile", "--once"]) == 0  # counted at rest
    assert main(["reconcile", "--once", "--fail-on-failures"]) == 1
    assert capsys.readouterr().err.splitlines() == ["failed: flaky ended CompletedWithFailures: failed: 2025-01-01"]
