"""Benchmark: `backfillctl validate` vs `check-jsonschema` on the same 1,000 generated specs.

Run: .venv/bin/python bench/validate_1000.py [--count N] [--repeat R]
Both are timed as whole commands (process start included), best of R runs.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SPEC = """version: 1
name: spec-{i:05d}
dag_id: dag_{dag}
from_date: "2025-{month:02d}-01"
to_date: "2025-{month:02d}-28"
reprocess_behavior: failed
max_active_runs: 3
expected_runs: 28
dag_run_conf: {{batch: {i}, full_refresh: true}}
ticket: CHG-{i}
reason: Generated spec number {i} for the benchmark.
requested_by: requester-{dag}
approvers: [approver-a, approver-b]
downstream: [warehouse.table_{dag}]
"""


def generate(folder: Path, count: int) -> list[Path]:
    paths = []
    for i in range(count):
        path = folder / f"spec-{i:05d}.yaml"
        path.write_text(SPEC.format(i=i, dag=i % 10, month=i % 12 + 1))
        paths.append(path)
    return paths


def best_of(repeat: int, command: list[str], cwd: Path) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
        times.append(time.perf_counter() - started)
        if result.returncode != 0:
            sys.exit(f"{command[0]} failed ({result.returncode}):\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--count", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    bin_dir = Path(sys.executable).parent
    checker = shutil.which("check-jsonschema", path=str(bin_dir)) or shutil.which("check-jsonschema")
    if checker is None:
        sys.exit("check-jsonschema is not installed: pip install -e '.[dev]'")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "specs"
        folder.mkdir()
        paths = generate(folder, args.count)
        ours = best_of(args.repeat, [str(bin_dir / "backfillctl"), "validate", str(folder)], Path(tmp))
        schema = str(REPO / "schemas" / "backfill-spec.schema.json")
        theirs = best_of(args.repeat, [checker, "--schemafile", schema, *map(str, paths)], Path(tmp))
    print(f"{args.count} specs, best of {args.repeat}:")
    print(f"  backfillctl validate (schema + semantic + policy): {ours:.2f} s ({ours / args.count * 1000:.2f} ms/spec)")
    per_spec = theirs / args.count * 1000
    print(f"  check-jsonschema --schemafile (schema only):       {theirs:.2f} s ({per_spec:.2f} ms/spec)")
    print(f"  ratio: {theirs / ours:.2f}x")


if __name__ == "__main__":
    main()
