"""Benchmark: CLI start — `backfillctl --version`, `--help`, `validate` of one file and `reconcile --once`, as
whole processes.

Run: .venv/bin/python bench/cli_start.py [--rounds 15]
The floor is the interpreter alone (`python -c pass`, same virtualenv, same site-packages); the commands
run in turn, round after round, and the table shows medians of wall time and of the child's CPU time
(user+sys, less sensitive to other load on the machine). No Airflow needed: `reconcile --once` runs on an empty
specs folder and a migrated store against a loopback server that answers the preflight as Airflow 3.3.2 would, so
its row is the pass's start (imports, settings, store, lease) and not Airflow's time.

The modules run from bytecode, as an installed package's do (pip compiles them at install): the checkout's
controller/ (and --before's) is compiled in place (__pycache__, git-ignored) before the rounds. An editable
checkout under PYTHONDONTWRITEBYTECODE=1 compiles every module from source on each start instead (~0.07 s more for
validate on 2 cores); --from-source times that.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parents[1]))

from _common import REPO, alternate, backfillctl, compile_bytecode, empty_pass_env, load_note, median, run, table

from tests.fakes.loopback import serving

SPEC = REPO / "tests" / "examples" / "valid" / "cancelled.yaml"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--before", type=Path, help="also time this checkout's controller/ (PYTHONPATH), e.g. main's")
    parser.add_argument("--from-source", action="store_true", help="no bytecode for controller/: compile each start")
    args = parser.parse_args()
    trees = [REPO / "controller"] + ([args.before / "controller"] if args.before else [])
    (drop_bytecode if args.from_source else compile_bytecode)(trees)
    with tempfile.TemporaryDirectory() as tmp, serving() as url:
        folder = Path(tmp)
        (folder / SPEC.name).write_bytes(SPEC.read_bytes())
        env = {**os.environ, "BACKFILLCTL_SPECS_DIR": str(folder)}
        env.pop("BACKFILLCTL_AIRFLOW_URL", None)  # validate must not reach out to an Airflow
        (folder / "empty").mkdir()
        pass_env = empty_pass_env(env, folder / "empty", folder / "state.db", url)
        run([backfillctl(), "store", "migrate"], cwd=folder, env=pass_env)  # a reconciler's store after its first run
        commands = {
            "python -c pass (floor)": [sys.executable, "-c", "pass"],
            "backfillctl --version": [backfillctl(), "--version"],
            "backfillctl --help": [backfillctl(), "--help"],
            "backfillctl validate ONE.yaml": [backfillctl(), "validate", str(folder / SPEC.name)],
            "backfillctl reconcile --once (no specs)": [backfillctl(), "reconcile", "--once"],
        }
        envs = {name: pass_env if "reconcile" in name else env for name in commands}
        if args.before:
            for name in [n for n in commands if n.startswith("backfillctl")]:
                commands[f"{name} (before)"] = commands[name]
                envs[f"{name} (before)"] = {**envs[name], "PYTHONPATH": str(args.before.resolve())}
        before = load_note()
        runs = alternate(
            args.rounds,
            {
                name: (lambda _i, c=command, e=envs[name]: run(c, cwd=folder, env=e))
                for name, command in commands.items()
            },
        )
    rows = []
    for name, results in runs.items():
        walls = [r.wall for r in results]  # type: ignore[union-attr]
        cpus = [r.cpu for r in results]  # type: ignore[union-attr]
        rss = max(r.rss_kb for r in results) / 1024  # type: ignore[union-attr]
        rows.append([name, f"{median(walls):.3f} s", f"{median(cpus):.3f} s", f"{min(walls):.3f} s", f"{rss:.0f} MB"])
    print(
        table(
            f"CLI start, medians of {args.rounds} alternating rounds",
            ["command", "wall (median)", "CPU user+sys (median)", "wall (best)", "peak RSS"],
            rows,
        )
    )
    print(f"before: {before}; after: {load_note()}")


def drop_bytecode(trees: list[Path]) -> None:
    """Remove each tree's bytecode, so every start compiles its modules from source."""
    for cache in [cache for tree in trees for cache in tree.rglob("__pycache__")]:
        shutil.rmtree(cache)


if __name__ == "__main__":
    main()
