"""A pass over a folder whose rest summary is its own reads only the live specs (migration 0011), in a real git
repository on the fake Airflow: the pass after a whole one reads no finished spec's binding head or index row and
walks no folder, and plans, prints, checksums and records exactly what the whole path does; anything the summary
was made from that changes (a finished binding, a commit to the folder, a file that differs from HEAD, a stop) makes
the whole path read, and a commit elsewhere does not."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import delete

from controller.adapters import files
from controller.adapters.store import Store
from controller.adapters.store.tables import rest_summaries
from controller.commands.reconcile.reconciler import PassResult
from controller.core.model.binding import Phase
from controller.core.model.stops import EmergencyStopKind, StopSource
from controller.core.plan.values import AtRest
from controller.core.render.plan import plan_text
from tests.adapters.test_git_history import listings
from tests.commands.reconcile.harness import Bench, fake
from tests.commands.reconcile.test_spec_index_git import (
    FINISHED,
    bench,
    commit,
    finished_history,
    git,
    items,
    reads,
    resting,
)

__all__ = ["bench", "listings", "reads"]  # fixtures
DONE = frozenset(f"done-{n}" for n in range(FINISHED))


@pytest.fixture
def whole(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The reads of every finished spec's rows and the folder walks, in order."""
    seen: list[str] = []
    for name in ("binding_heads", "index_heads"):
        real = getattr(Store, name)
        monkeypatch.setattr(Store, name, lambda self, _r=real, _n=name: seen.append(_n) or _r(self))
    walk = files._walk
    monkeypatch.setattr(files, "_walk", lambda *a, **k: seen.append("walk") or walk(*a, **k))
    return seen


def summarised(bench: Bench) -> PassResult:
    """Two `--once` passes: the first writes the summary (the whole path), the second is measured."""
    finished_history(bench)
    bench.run()  # indexes every file, creates the live spec's backfill
    resting(bench)
    return resting(bench)


def same(one: PassResult, other: PassResult) -> None:
    assert plan_text(one.plan, show_unchanged=False) == plan_text(other.plan, show_unchanged=False)
    assert (one.plan.checksum(), one.plan.at_rest, items(one)) == (
        other.plan.checksum(),
        other.plan.at_rest,
        items(other),
    )


def actions(store: Store, since: int) -> list[tuple[str, str | None, str | None]]:
    return [(e.action, e.spec_name, e.outcome) for e in store.events() if e.seq > since]  # type: ignore[union-attr]


def forgotten(bench: Bench) -> None:
    with bench.store.engine.begin() as conn:
        conn.execute(delete(rest_summaries))


def test_the_pass_after_a_whole_one_reads_only_the_live_specs_and_does_what_the_whole_path_does(
    bench: Bench, reads: list[str], whole: list[str], listings: list[tuple[str, ...]]
) -> None:
    finished_history(bench)
    bench.run()
    whole.clear()
    listings.clear()
    first = resting(bench)  # the whole path, which writes the summary
    assert whole == ["binding_heads", "index_heads", "walk"]
    assert listings == [("specs",)]  # once: the index and the approval gate share it
    whole.clear()
    reads.clear()
    listings.clear()
    seq = bench.store.audit_head_seq()
    second = resting(bench)
    assert (whole, reads) == ([], ["live.yaml"])
    assert listings == [("specs/live.yaml", "specs/policy.yaml", "specs/policy.yml")]  # the gate's files alone
    assert second.plan.at_rest == AtRest(((Phase.SUCCEEDED, FINISHED),), DONE, walked=frozenset())
    same(second, first)
    recorded = actions(bench.store, seq)
    forgotten(bench)  # the same pass again, on the whole path
    seq = bench.store.audit_head_seq()
    third = resting(bench)
    assert whole == ["binding_heads", "index_heads", "walk"]
    same(third, second)
    assert actions(bench.store, seq) == recorded


@pytest.mark.parametrize(
    ("change", "whole_path"),
    [
        ("finished binding rewritten", True),
        ("a commit to the folder", True),
        ("a file that differs from HEAD", True),
        ("an untracked folder link, no spec file", True),
        ("a commit elsewhere", False),
    ],
)
def test_what_the_summary_was_made_from_decides_whether_it_is_read(
    bench: Bench, whole: list[str], change: str, whole_path: bool
) -> None:
    summarised(bench)
    if change == "finished binding rewritten":
        done = bench.store.binding("done-0")
        assert done is not None
        bench.store.save_binding(done)
    elif change == "a commit to the folder":
        (bench.specs / "notes.yaml").write_text("version: 1\n")  # not a valid spec: read, and shown invalid
        commit(bench, "add notes")
    elif change == "a file that differs from HEAD":
        (bench.specs / "done-0.yaml").write_text((bench.specs / "done-0.yaml").read_text() + "# edited\n")
    elif change == "an untracked folder link, no spec file":
        os.symlink(bench.root.parent, bench.specs / "outside")  # the walk reports it; git status names no spec
    else:
        (bench.root / "README.md").write_text("hello\n")
        commit(bench, "readme")
    whole.clear()
    after = resting(bench)
    assert whole[:2] == (["binding_heads", "index_heads"] if whole_path else [])  # read from HEAD: no walk
    forgotten(bench)
    assert items(resting(bench)) == items(after)


def test_a_stop_added_after_the_summary_makes_nothing_rest(bench: Bench) -> None:
    summarised(bench)
    bench.store.add_stop(EmergencyStopKind.SPEC, "live", "incident", "oncall", source=StopSource.CLI)
    stopped = resting(bench)
    assert stopped.plan.at_rest == AtRest()
    assert len(stopped.plan.items) == FINISHED + 1


def test_a_live_spec_that_finishes_rests_from_the_pass_after_it(bench: Bench, whole: list[str]) -> None:
    summarised(bench)
    fake(bench).scheduler_running = True
    for _ in range(20):
        if bench.phases(resting(bench)).get("live") == "Succeeded":
            break
    whole.clear()
    after = resting(bench)  # the pass that finished it wrote its binding: the whole path, which rests it
    assert whole == ["binding_heads", "index_heads", "walk"]
    assert after.plan.at_rest.count == FINISHED + 1
    whole.clear()
    again = resting(bench)
    assert whole == []
    assert again.plan.at_rest == AtRest(((Phase.SUCCEEDED, FINISHED + 1),), DONE | {"live"}, walked=frozenset())
    same(again, after)


def test_a_summary_whose_live_rows_cannot_be_read_gives_way_to_the_whole_path(
    bench: Bench, whole: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    full = summarised(bench)
    real = Store.indexed_specs
    monkeypatch.setattr(Store, "indexed_specs", lambda self, blobs=None: {} if len(whole) == 0 else real(self, blobs))
    whole.clear()
    after = resting(bench)
    assert whole == ["binding_heads", "index_heads", "walk"]
    same(after, full)


def test_the_summary_lists_the_files_read_and_never_the_resting_ones(bench: Bench) -> None:
    summarised(bench)
    kept = bench.store.rest_summary("specs")
    assert kept is not None
    assert kept.walked == ("live.yaml",)
    assert kept.resting.by_dag == {"demo_daily": tuple(sorted(DONE))}
    assert (set(kept.known), set(kept.blobs), dict(kept.entries), kept.others) == (
        {"specs/live.yaml"},
        {"specs/live.yaml"},
        {},
        (),
    )
    assert kept.key.tree == git(bench.root, "rev-parse", "HEAD:specs")


def test_the_claims_of_walked_specs_at_rest_come_from_the_summary_and_what_it_lacks_from_the_store(
    bench: Bench, whole: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A new spec with a finished one's range on its DAG walks every finished spec there: their claims are the
    summary's (the whole pass read them), and one the summary does not keep is read."""
    finished_history(bench)
    bench.run()
    bench.spec("again", start="2025-01-01", end="2025-01-01")  # done-0's range, on its DAG
    commit(bench, "add again")

    def rest_dry() -> PassResult:
        reconciler = bench.reconciler()
        reconciler.rest_finished = True
        return reconciler.run_once(dry_run=True)

    rest_dry()  # indexes again.yaml, which makes any summary of its own stale
    full = rest_dry()  # the whole path: writes the summary with the claims it read
    claimed: list[list[str]] = []
    monkeypatch.setattr(
        Store, "claims", lambda self, named, _r=Store.claims: claimed.append(sorted(named)) or _r(self, named)
    )
    whole.clear()
    rest = rest_dry()
    assert (whole, claimed) == ([], [])
    assert rest.plan.at_rest == AtRest(((Phase.SUCCEEDED, FINISHED),), DONE, walked=DONE)
    decided = [(i.spec, i.kind.value, i.reason) for i in rest.plan.items]
    assert decided == [("again", "noop", "nothing to reprocess"), ("live", "noop", "in sync")]  # not adopted
    same(rest, full)
    kept = bench.store.rest_summary("specs")
    assert kept is not None
    assert sorted(kept.claims) == sorted(DONE)
    assert bench.store.save_rest_summary("specs", replace(kept, claims={}))
    lacking = rest_dry()
    assert (whole, claimed) == ([], [sorted(DONE)])
    same(lacking, full)


def test_a_binding_that_finishes_while_a_summarised_pass_reads_makes_it_take_the_whole_path(
    bench: Bench, whole: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    full = summarised(bench)
    real = Store.unfinished_names

    def racing(self: Store) -> list[str]:
        names = real(self)
        done = self.binding("done-1")
        assert done is not None
        self.save_binding(done)  # another process's write, between the revision read and the bindings
        return names

    monkeypatch.setattr(Store, "unfinished_names", racing)
    whole.clear()
    after = resting(bench)
    assert whole[:2] == ["binding_heads", "index_heads"]
    same(after, full)


def test_a_listed_file_unreadable_since_the_summary_gives_way_to_the_whole_path(
    bench: Bench, whole: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    full = summarised(bench)
    real, raised = files._unsafe, []

    def once(path: Path, root: Path) -> str | None:
        if not raised:
            raised.append(path.name)
            raise PermissionError(13, "Permission denied", str(path))
        return real(path, root)

    monkeypatch.setattr(files, "_unsafe", once)
    whole.clear()
    after = resting(bench)
    assert (raised, whole) == (["live.yaml"], ["binding_heads", "index_heads", "walk"])
    same(after, full)


def test_both_paths_hand_the_pass_the_same_specs_bindings_claims_and_provenance(bench: Bench) -> None:
    finished_history(bench)
    bench.run()
    bench.spec("again", start="2025-01-01", end="2025-01-01")  # walks every finished spec on demo_daily
    commit(bench, "add again")
    bench.run(dry_run=True)  # indexes it

    def planned() -> tuple[Any, ...]:
        loader = bench.reconciler().specs
        found, bindings = loader.planned(None, bench.reconciler().spec_source(), rest=True)
        return found, list(bindings.items()), loader.claims, loader.at_rest, loader.provenance, loader.loaded.keys()

    whole_path = planned()  # writes the summary
    assert bench.store.rest_summary("specs") is not None
    summarised_path = planned()
    assert summarised_path == whole_path
    assert whole_path[3].walked == DONE
    assert [name for name, _ in whole_path[1]] == ["live"]  # a dry run binds nothing new
