"""The GitHub workflows and the pre-commit hook are well-formed (offline: check-jsonschema's vendored schemas)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]
WORKFLOWS = sorted((REPO / ".github" / "workflows").glob("*.yml"))


def test_the_three_workflows_exist() -> None:
    assert [p.name for p in WORKFLOWS] == ["backfill-pr.yml", "backfill-reconcile.yml", "ci.yml"]


@pytest.mark.parametrize("schema", ["vendor.github-workflows", "custom.github-workflows-require-timeout"])
def test_workflows_match_the_schema(schema: str) -> None:
    checker = Path(sys.executable).parent / "check-jsonschema"
    result = subprocess.run(
        [str(checker), "--builtin-schema", schema, *map(str, WORKFLOWS)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "ok -- validation done"


def steps(name: str) -> dict[str, str]:
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / name).read_text())
    (job,) = workflow["jobs"].values()
    return {step["id"]: step["run"] for step in job["steps"] if "id" in step}


def test_pr_workflow_validates_gates_and_plans() -> None:
    runs = steps("backfill-pr.yml")
    assert list(runs) == ["validate", "reviews", "approvals", "plan", "comment"]
    assert runs["validate"] == 'backfillctl validate --base "origin/$BASE_REF" --format github'
    assert "--pr-reviews" in runs["approvals"]
    assert "--head-sha" in runs["approvals"]
    assert "backfillctl plan --format markdown" in runs["plan"]


def test_reconcile_workflow_never_overlaps() -> None:
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "backfill-reconcile.yml").read_text())
    assert workflow["concurrency"] == {"group": "backfill-reconcile", "cancel-in-progress": False}
    assert workflow[True]["schedule"] == [{"cron": "*/15 * * * *"}]  # YAML 1.1 reads the `on` key as True
    assert list(steps("backfill-reconcile.yml")) == ["reconcile", "status", "export"]


def test_ci_workflow_runs_ci_run() -> None:
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "ci.yml").read_text())
    assert workflow["jobs"]["test"]["steps"][-1] == {"run": "bash .ci/run"}


def test_pre_commit_hook_manifest() -> None:
    (hook,) = yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())
    assert hook == {
        "id": "backfillctl-validate",
        "name": "backfillctl validate",
        "description": "Validate backfill specs (strict YAML, JSON Schema, semantic rules, policy).",
        "entry": "backfillctl validate",
        "language": "python",
        "files": "^specs/.*\\.ya?ml$",
        "pass_filenames": True,
    }
