"""Benchmark: how long the strict loader and `validate` take on the hostile example specs.

The tests assert that hostile input is refused early by counting work (parser events); the time it takes
is measured here, not asserted in the test suite (wall-clock asserts fail under load and `pytest -n 2`).

Run: .venv/bin/python bench/hostile_yaml.py [--repeat R]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import time
from pathlib import Path

from controller.cli import main as cli
from controller.core.documents.yamlsafe import load_document

EXAMPLES = Path(__file__).resolve().parents[1] / "tests" / "examples"
HOSTILE = (
    "alias-bomb",
    "python-object-apply",
    "merge-key",
    "too-large",
    "not-utf8",
    "duplicate-key",
    "empty",
    "list-not-mapping",
    "typo-dagid",
    "two-documents",
    "custom-tag",
)


def best_of(repeat: int, action: object) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()  # type: ignore[operator]
        times.append(time.perf_counter() - started)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=20)
    args = parser.parse_args()
    os.chdir(EXAMPLES)
    os.environ["BACKFILLCTL_SPECS_DIR"] = "."
    print(f"{'case':<22} {'load (ms)':>10} {'validate (ms)':>14}")
    for name in HOSTILE:
        path = Path("invalid") / f"{name}.yaml"
        raw = path.read_bytes()

        def validate(p: Path = path) -> None:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                cli(["validate", str(p)])

        load = best_of(args.repeat, lambda r=raw, n=name: load_document(n, r))
        whole = best_of(args.repeat, validate)
        print(f"{name:<22} {load * 1000:>10.2f} {whole * 1000:>14.2f}")


if __name__ == "__main__":
    main()
