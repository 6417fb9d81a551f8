"""What a specs repository's history costs a pass: `reconcile --once` over N finished specs (across 100 DAGs,
committed 10 per commit, so `git log` walks N/10 commits) + 0 live, side by side with the same pass over an
empty specs folder, against a real Airflow (only the preflight calls: finished specs call nothing).

The repository is generated once with `git fast-import` and cached (--cache, default /tmp); each round copies
nothing: the passes only read the tree and rewrite phases in the store, so rounds are alike.
    .venv/bin/python bench/history_10k.py [--specs 10000] [--rounds 3] [--before DIR] [--decisions]
`--decisions`: the store also keeps an approval gate decision for every spec file (as a gate that judged each one
when it was live leaves them), in a repository of its own.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import Run, alternate, backfillctl, finished_binding, for_before, load_note, median, run, secs, table

SPEC = """version: 1
name: {name}
dag_id: {dag}
from_date: "{day}T00:00:00Z"
to_date: "{day}T00:00:00Z"
reprocess_behavior: completed
max_active_runs: 1
ticket: CHG-{n}
reason: historic backfill {name}
requested_by: team-{team}@example.com
approvers: [lead-{team}@example.com]
"""
PER_COMMIT = 10
START = 1_600_000_000  # the first commit's time; one commit an hour after it


def spec_file(n: int) -> tuple[str, str, bytes]:
    day = f"{1901 + n // 336}-{1 + (n // 28) % 12:02d}-{1 + n % 28:02d}"
    name, dag = f"done-{n:05d}", f"hist_dag_{n % 100:03d}"
    return name, dag, SPEC.format(name=name, dag=dag, day=day, n=n, team=n % 7).encode()


def generate(repo: Path, count: int) -> None:
    """A repository of `count` specs, PER_COMMIT per commit, authored by 7 people (one fast-import stream)."""
    stream: list[bytes] = []
    for commit in range(-(-count // PER_COMMIT)):
        who, when = commit % 7, START + commit * 3600
        message = f"add specs {commit * PER_COMMIT}..\n".encode()
        stream += [
            b"commit refs/heads/main\n",
            f"author Dev{who} <dev{who}@example.com> {when} +0000\n".encode(),
            f"committer Dev{who} <dev{who}@example.com> {when} +0000\n".encode(),
            b"data %d\n%s" % (len(message), message),
        ]
        for n in range(commit * PER_COMMIT, min(count, (commit + 1) * PER_COMMIT)):
            name, _dag, data = spec_file(n)
            stream.append(f"M 100644 inline specs/{name}.yaml\n".encode() + b"data %d\n%s\n" % (len(data), data))
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "fast-import", "--quiet"], input=b"".join(stream), cwd=repo, check=True)
    subprocess.run(["git", "checkout", "-q", "main"], cwd=repo, check=True)


def seed(repo: Path, count: int) -> None:
    """Every spec finished and bound in a migrated store, as after the passes that ran it."""
    from controller.adapters.store import Store  # noqa: PLC0415

    url = f"sqlite:///{repo}/state.db"
    run([backfillctl(), "store", "migrate"], env={**os.environ, "BACKFILLCTL_STORE_URL": url})
    store = Store(url)
    with store.batch("seeding finished specs"):
        for n in range(count):
            name, dag, data = spec_file(n)
            store.save_binding(finished_binding(name, dag, n, data, os.environ.get("BACKFILLCTL_AIRFLOW_URL", "-")))
    store.close()


def seed_decisions(repo: Path) -> None:
    """An approval gate decision kept for every spec file at HEAD, as a gate that judged each one leaves them."""
    from controller.adapters.store import Store  # noqa: PLC0415
    from controller.core.model.evidence import GateDecision, Verdict  # noqa: PLC0415

    listing = subprocess.run(["git", "ls-tree", "-r", "-z", "HEAD", "specs"], cwd=repo, capture_output=True, check=True)
    blobs = {}
    for entry in filter(None, listing.stdout.decode().split("\0")):  # "<mode> blob <sha>\t<path>"
        meta, path = entry.split("\t", 1)
        blobs[path] = meta.split()[2]
    store = Store(f"sqlite:///{repo}/state.db")
    store.save_gate_decisions([GateDecision(p, b, Verdict.APPROVED, "") for p, b in sorted(blobs.items())], blobs)
    store.close()


def prepared(cache: Path, count: int, *, decisions: bool = False) -> tuple[Path, Path]:
    """(the repository with history, an empty one beside it), generated once per count (and `decisions`)."""
    repo, empty = cache / f"history-{count}{'-decided' if decisions else ''}", cache / "history-0"
    if not (repo / "state.db").exists():
        shutil.rmtree(repo, ignore_errors=True)
        generate(repo, count)
        seed(repo, count)
        if decisions:
            seed_decisions(repo)
    if not (empty / "state.db").exists():
        shutil.rmtree(empty, ignore_errors=True)
        (empty / "specs").mkdir(parents=True)
        subprocess.run(["git", "init", "-q", str(empty)], check=True)
        run(
            [backfillctl(), "store", "migrate"],
            env={**os.environ, "BACKFILLCTL_STORE_URL": f"sqlite:///{empty}/state.db"},
        )
    return repo, empty


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--specs", type=int, default=10000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--cache", type=Path, default=Path("/tmp/backfillctl-bench-history"))
    parser.add_argument("--before", type=Path, help="also time this checkout's controller/ (PYTHONPATH)")
    parser.add_argument(
        "--decisions", action="store_true", help="the store also keeps an approval gate decision for every spec file"
    )
    args = parser.parse_args()
    repo, empty = prepared(args.cache, args.specs, decisions=args.decisions)

    def once(folder: Path, before: bool = False) -> Run:
        env = {**os.environ, "BACKFILLCTL_SPECS_DIR": "specs", "BACKFILLCTL_STORE_URL": f"sqlite:///{folder}/state.db"}
        if before:
            env["PYTHONPATH"] = str(args.before.resolve())
        return run([backfillctl(), "reconcile", "--once"], cwd=folder, env=env)

    for folder in (empty, repo):  # not timed: the first pass indexes the specs, the second writes the rest summary
        once(folder)
        once(folder)
    actions = {"empty": lambda _i: once(empty), "history": lambda _i: once(repo)}
    if args.before:  # on copies with stores of their own (`for_before`), readied alike
        olds = [for_before(folder, args.before) for folder in (empty, repo)]
        for old in olds:
            once(old, True)
            once(old, True)
        actions |= {
            "empty (before)": lambda _i: once(olds[0], True),
            "history (before)": lambda _i: once(olds[1], True),
        }
    print(load_note(), flush=True)
    results = alternate(args.rounds, actions)
    print(load_note())
    rows = []
    for name, runs in results.items():
        done = [r for r in runs if isinstance(r, Run)]
        wall, cpu = median([r.wall for r in done]), median([r.cpu for r in done])
        rows.append([name, secs(wall), secs(cpu), f"{max(r.rss_kb for r in done) // 1024} MB"])
    title = f"reconcile --once over {args.specs:,} finished specs ({args.specs // PER_COMMIT:,} commits) vs none"
    title += ", a gate decision kept for each" if args.decisions else ""
    print(table(title, ["specs folder", "wall (median)", "CPU (median)", "peak RSS"], rows))


if __name__ == "__main__":
    main()
