"""Benchmark: `backfillctl validate` vs `check-jsonschema` on the same 100 / 1,000 / 10,000 generated specs.

Run: .venv/bin/python bench/validate_scale.py [--counts 100,1000,10000] [--rounds 3]
Both run as whole processes on the same files, in turn (A B A B …); the table shows medians of wall time,
CPU (user+sys) and peak RSS. check-jsonschema checks the JSON Schema only (its `--schemafile`, formats
on); backfillctl also runs the strict YAML loader, the semantic rules, the policy and the tree rules.
No Airflow needed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import BIN, REPO, alternate, backfillctl, load_note, median, run, table

SPEC = """version: 1
name: spec-{i:05d}
dag_id: dag_{dag}
from_date: "2025-{month:02d}-01"
to_date: "2025-{month:02d}-28"
reprocess_behavior: failed
max_active_runs: 3
expected_runs: 28
dag_run_conf: {{batch: {i}, full_refresh: true}}
ticket: CHG-{ticket}
reason: Generated spec number {i} for the benchmark.
requested_by: requester-{dag}
approvers: [approver-a, approver-b]
downstream: [warehouse.table_{dag}]
"""


def generate(folder: Path, count: int) -> list[str]:
    """`count` valid specs in folder/specs (returned relative to `folder`)."""
    specs = folder / "specs"
    specs.mkdir(parents=True)
    names = []
    for i in range(count):
        path = specs / f"spec-{i:05d}.yaml"
        path.write_text(SPEC.format(i=i, ticket=i + 1000, dag=i % 10, month=i % 12 + 1))
        names.append(f"specs/{path.name}")
    return names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--counts", default="100,1000,10000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", type=Path, help="also time this checkout's controller/ (PYTHONPATH), e.g. main's")
    args = parser.parse_args()
    checker = shutil.which("check-jsonschema", path=str(BIN)) or shutil.which("check-jsonschema")
    if checker is None:
        sys.exit("check-jsonschema is not installed: pip install -e '.[dev]'")
    schema = str(REPO / "schemas" / "backfill-spec.schema.json")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BACKFILLCTL_AIRFLOW")}
    rows, before = [], load_note()
    for count in (int(c) for c in args.counts.split(",")):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            names = generate(folder, count)
            commands = {
                "check-jsonschema": [checker, "--schemafile", schema, *names],
                "backfillctl": [backfillctl(), "validate", "specs"],
            }
            envs = {k: {**env, "BACKFILLCTL_SPECS_DIR": "specs"} for k in commands}
            if args.before:
                commands["backfillctl (before)"] = commands["backfillctl"]
                envs["backfillctl (before)"] = {**envs["backfillctl"], "PYTHONPATH": str(args.before.resolve())}
            runs = alternate(
                args.rounds,
                {k: (lambda _i, c=c, e=envs[k], f=folder: run(c, cwd=f, env=e)) for k, c in commands.items()},
            )
        theirs = median([r.wall for r in runs["check-jsonschema"]])  # type: ignore[union-attr]
        for name, results in runs.items():
            wall = median([r.wall for r in results])  # type: ignore[union-attr]
            rows.append(
                [
                    f"{count:,}",
                    name,
                    f"{wall:.2f} s",
                    f"{median([r.cpu for r in results]):.2f} s",  # type: ignore[union-attr]
                    f"{wall / count * 1000:.2f} ms",
                    f"{max(r.rss_kb for r in results) / 1024:.0f} MB",  # type: ignore[union-attr]
                    f"{wall / theirs:.2f}×",
                ]
            )
    print(
        table(
            f"validate, medians of {args.rounds} alternating rounds (whole processes)",
            ["files", "command", "wall", "CPU", "per file", "peak RSS", "backfillctl / check-jsonschema"],
            rows,
        )
    )
    print(f"before: {before}; after: {load_note()}")


if __name__ == "__main__":
    main()
