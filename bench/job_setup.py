"""Benchmark: a scheduled reconcile job with nothing to do, end to end, as the reusable workflow runs it: a fresh
virtualenv, the hash-locked install (`requirements/reconcile.txt`, then backfillctl from its checkout), one
`reconcile --once` over an empty specs folder and a migrated store (the preflight answered on loopback).

Run: .venv/bin/python bench/job_setup.py [--rounds 3]
Side by side, in turn each round: the same job with an unlocked `pip install .[postgres]` (what a team writes
without the lock: pip resolves every dependency), and the floor, the pass alone in an environment already set up
(what no job can beat). pip reads this machine's own index and wheel cache, as a runner's cache action restores
them; a cold runner also downloads the wheels (~30 MB).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from _common import REPO, Run, alternate, backfillctl, empty_pass_env, load_note, median, run, secs, table

from tests.fakes.loopback import serving

LOCKED = REPO / "requirements" / "reconcile.txt"


def job(work: Path, pass_env: dict[str, str], *, locked: bool) -> Run:
    """A fresh virtualenv, the install, one pass: the wall time of the three (CPU and RSS of the pass)."""
    venv = work / "venv"
    shutil.rmtree(venv, ignore_errors=True)
    made = run([sys.executable, "-m", "venv", str(venv)])
    pip = [str(venv / "bin" / "python"), "-m", "pip", "install", "-q", "--disable-pip-version-check"]
    if locked:
        deps = run([*pip, "--require-hashes", "--no-deps", "--only-binary=:all:", "-r", str(LOCKED)], cwd=REPO)
        own = run([*pip, "--no-deps", "--no-build-isolation", "--no-index", str(REPO)], cwd=REPO)
        installs = [deps, own]
    else:
        installs = [run([*pip, f"{REPO}[postgres]"], cwd=REPO)]
    once = run([str(venv / "bin" / "backfillctl"), "reconcile", "--once"], cwd=work, env=pass_env)
    wall = made.wall + sum(i.wall for i in installs) + once.wall
    return Run(wall, once.cpu, once.rss_kb, once.returncode)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, serving() as url:
        work = Path(tmp)
        (work / "specs").mkdir()
        pass_env = empty_pass_env(os.environ, work / "specs", work / "state.db", url)
        run([backfillctl(), "store", "migrate"], cwd=work, env=pass_env)  # the job's store after its first run
        actions: dict[str, Callable[[int], float | Run]] = {
            "the pass alone (floor)": lambda _i: run([backfillctl(), "reconcile", "--once"], cwd=work, env=pass_env),
            "locked install + pass": lambda _i: job(work, pass_env, locked=True),
            "unlocked pip install + pass": lambda _i: job(work, pass_env, locked=False),
        }
        before = load_note()
        results = alternate(args.rounds, actions)
    floor = median([r.wall for r in results["the pass alone (floor)"] if isinstance(r, Run)])
    rows = []
    for name, runs in results.items():
        walls = [r.wall for r in runs if isinstance(r, Run)]
        rows.append([name, secs(median(walls)), secs(max(walls)), f"{median(walls) / floor:.1f}×"])
    title = f"a scheduled reconcile job with nothing to do, medians of {args.rounds} alternating rounds"
    print(table(title, ["job", "wall (median)", "wall (worst)", "/ floor"], rows))
    print(f"before: {before}; after: {load_note()}")


if __name__ == "__main__":
    main()
