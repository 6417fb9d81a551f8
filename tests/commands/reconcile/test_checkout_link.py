"""A checkout behind a symlink that moves (git-sync serves each commit from a new worktree, swaps its link to it and
removes the old one): the watch process reads the new worktree at its next pass."""

from __future__ import annotations

import subprocess
from pathlib import Path

from controller.adapters.gitsource import GitSource
from controller.commands.reconcile.reconciler import Reconciler
from tests.commands.reconcile.harness import SPEC, Bench
from tests.fakes.airflow import FakeAirflow


def git(cwd: Path, *args: str) -> str:
    done = subprocess.run(
        ["git", "-c", "user.email=a@example.com", "-c", "user.name=A", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


def write_spec(origin: Path, name: str, dag: str) -> None:
    text = SPEC.format(name=name, dag=dag, start="2025-01-01", end="2025-01-03", reprocess="none", mar=1)
    (origin / "specs" / f"{name}.yaml").write_text(text)
    git(origin, "add", "-A")
    git(origin, "commit", "-qm", f"add {name}")


def serve(origin: Path, link: Path, name: str) -> Path:
    """What git-sync does for a new commit: a worktree of it, the link swapped to it (atomically)."""
    worktree = origin.parent / "worktrees" / name
    git(origin, "worktree", "add", "-q", "--detach", str(worktree), "HEAD")
    tmp = link.with_name("link.tmp")
    tmp.symlink_to(worktree)
    tmp.replace(link)
    return worktree


def test_a_pass_after_the_link_moved_reads_the_new_worktree(tmp_path: Path) -> None:
    origin = tmp_path / "origin"
    (origin / "specs").mkdir(parents=True)
    git(origin, "init", "-q", "-b", "main")
    write_spec(origin, "first", "demo_daily")
    link = tmp_path / "repo"
    old = serve(origin, link, "one")
    bench = Bench(link, fake=FakeAirflow(), store_url=f"sqlite:///{tmp_path}/state.db")
    try:
        reconciler = Reconciler(bench.settings(), bench.store, bench.client())
        done = reconciler.run_once()
        assert [(item.spec, outcome) for item, outcome in done.applied] == [("first", "created")]
        assert not reconciler.git.moved()
        write_spec(origin, "second", "demo_hourly")
        serve(origin, link, "two")
        git(origin, "worktree", "remove", "--force", str(old))  # git-sync removes the old worktree
        assert reconciler.git.moved()
        done = reconciler.run_once()
        assert [(item.spec, outcome) for item, outcome in done.applied] == [("second", "created")]
        assert reconciler.commit == git(origin, "rev-parse", "HEAD")
        assert not reconciler.git.moved()
        assert reconciler.specs.git is reconciler.git
        last = bench.store.last_reconciled()
        assert last is not None
        assert last.commit == reconciler.commit
    finally:
        bench.close()


def test_an_unmoved_or_plain_folder_is_not_moved(tmp_path: Path) -> None:
    assert not GitSource(tmp_path).moved()  # outside git
