"""The project's own pre-commit hooks run exactly the lint stage of scripts/test (the README's test command), so a
commit that passes the hooks passes CI's lint stage, and a check added to one is added to the other."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def hook_entries() -> dict[str, str]:
    config = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text(encoding="utf-8"))
    (repo,) = config["repos"]
    assert repo["repo"] == "local"  # no download: the hooks use the tools ./scripts/bootstrap installs
    return {hook["id"]: hook["entry"] for hook in repo["hooks"]}


def lint_stage() -> list[str]:
    """The commands of scripts/test between `== ruff` and `== pytest` (the lint stage)."""
    lines = (ROOT / "scripts" / "test").read_text(encoding="utf-8").splitlines()
    start = lines.index('echo "== ruff"')
    end = next(i for i, line in enumerate(lines) if line.startswith('echo "== pytest'))
    return [line.strip() for line in lines[start:end] if line.startswith(".venv/bin/")]


def test_the_hooks_are_the_lint_stage_of_the_test_command() -> None:
    entries = hook_entries()
    assert sorted(lint_stage()) == sorted(entry for hook, entry in entries.items() if hook != "backfillctl-validate")
    assert list(entries) == ["ruff", "ruff-format", "mypy", "import-linter", "backfillctl-validate"]


def test_the_spec_hook_validates_the_files_pre_commit_passes_it() -> None:
    entries = hook_entries()
    spec = next(iter(sorted((ROOT / "specs").glob("*.yaml"))))
    done = subprocess.run(
        [*entries["backfillctl-validate"].split(), str(spec.relative_to(ROOT))],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": str(ROOT)},
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stderr == "note: not checked: each spec's DAG in Airflow (BACKFILLCTL_AIRFLOW_URL is not set)\n"
    assert done.stdout == "OK: 1 spec valid (2 files including the policy specs/policy.yaml, 0 warnings).\n"
