"""The README's promises: the spec reference matches the schemas, and the set-up commands exist."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_spec_reference_matches_the_schemas() -> None:
    result = subprocess.run([sys.executable, "scripts/spec_reference.py", "--check"], cwd=REPO, check=False)
    assert result.returncode == 0, "README spec reference is stale: run python scripts/spec_reference.py"


def test_ci_runs_the_readme_test_command() -> None:
    readme = (REPO / "README.md").read_text()
    assert "./scripts/test     # the whole test suite" in readme
    assert "./scripts/demo     # the main job" in readme
    assert (REPO / ".ci" / "run").read_text().strip().endswith("exec ./scripts/test")


def test_example_specs_validate() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "controller", "validate"], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout
    assert result.stdout == "OK: 5 specs valid (6 files including the policy specs/policy.yaml, 0 warnings).\n"
