"""The README's walk-through, scripted: branch → add spec → validate --base → plan → reviews with approval →
merge → reconcile → status → report, running the workflows' own `run:` lines against a real git repository
and the real Airflow 3.3.2. The audit trail must name the commit, the author and the approver of the spec.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from controller.adapters.store import EventFilter, Store

pytestmark = pytest.mark.airflow
REPO = Path(__file__).resolve().parents[2]
SPEC = """version: 1
name: walk-demo
dag_id: demo_daily
from_date: "2022-03-01"
to_date: "2022-03-03"
reprocess_behavior: none
max_active_runs: 2
expected_runs: 3
ticket: CHG-4242
reason: Walk-through of the pull-request workflow.
requested_by: alice
approvers: [bob]
"""


def workflow_steps(name: str) -> dict[str, str]:
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / name).read_text())
    (job,) = workflow["jobs"].values()
    return {step["id"]: step["run"] for step in job["steps"] if "id" in step}


class Walk:
    def __init__(self, tmp: Path, airflow_url: str) -> None:
        self.tmp, self.work = tmp, tmp / "work"
        self.env = {
            **os.environ,
            "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
            "BACKFILLCTL_SPECS_DIR": "specs",
            "BACKFILLCTL_STORE_URL": f"sqlite:///{tmp}/state.db",
            "BACKFILLCTL_AIRFLOW_URL": airflow_url,
            "BACKFILLCTL_AIRFLOW_USERNAME": "admin",
            "BACKFILLCTL_AIRFLOW_PASSWORD": "admin",
            "BACKFILLCTL_ACTOR": "github-actions",
            "RUNNER_TEMP": str(tmp),
            "GITHUB_STEP_SUMMARY": str(tmp / "summary.md"),
            "GIT_CONFIG_NOSYSTEM": "1",
        }

    def git(self, *args: str, who: str = "alice", cwd: Path | None = None) -> str:
        identity = {
            "GIT_AUTHOR_NAME": who,
            "GIT_AUTHOR_EMAIL": f"{who}@example.com",
            "GIT_COMMITTER_NAME": who,
            "GIT_COMMITTER_EMAIL": f"{who}@example.com",
        }
        done = subprocess.run(
            ["git", *args],
            cwd=cwd or self.work,
            env={**self.env, **identity},
            check=True,
            capture_output=True,
            text=True,
        )
        return done.stdout.strip()

    def step(self, workflow: str, step_id: str, **env: str) -> subprocess.CompletedProcess[str]:
        script = workflow_steps(workflow)[step_id]
        return subprocess.run(
            ["bash", "-eo", "pipefail", "-c", script],
            cwd=self.work,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            check=False,
        )


def test_pull_request_to_change_record(tmp_path: Path, airflow_url: str) -> None:
    walk = Walk(tmp_path, airflow_url)
    walk.git("init", "-q", "--bare", "-b", "main", str(tmp_path / "origin.git"), cwd=tmp_path)
    walk.git("clone", "-q", str(tmp_path / "origin.git"), str(walk.work), cwd=tmp_path)
    (walk.work / "specs").mkdir()
    (walk.work / "specs" / "policy.yaml").write_text(
        "version: 1\nticket_pattern: '^CHG-[0-9]+$'\nauthor_logins: {alice@example.com: alice, bob@example.com: bob}\n"
    )
    walk.git("add", "-A")
    walk.git("commit", "-q", "-m", "policy")
    walk.git("push", "-q", "origin", "HEAD:main")

    walk.git("checkout", "-q", "-b", "add-walk-demo")  # branch → add spec
    (walk.work / "specs" / "walk-demo.yaml").write_text(SPEC)
    walk.git("add", "-A")
    walk.git("commit", "-q", "-m", "Backfill demo_daily for CHG-4242")
    head = walk.git("rev-parse", "HEAD")
    pr = {"BASE_REF": "main", "PR_AUTHOR": "alice", "HEAD_SHA": head}

    validated = walk.step("backfill-pr.yml", "validate", **pr)
    assert (validated.returncode, validated.stdout) == (
        0,
        "OK: 1 spec valid (2 files including the policy specs/policy.yaml, 0 warnings).\n",
    )
    planned = walk.step("backfill-pr.yml", "plan", **pr)
    assert planned.returncode == 0, planned.stderr
    plan_md = (tmp_path / "plan.md").read_text()
    assert "| `+` | `walk-demo` | `demo_daily` | create | 3 of 3 | Pending |" in plan_md

    (tmp_path / "reviews.json").write_text(json.dumps([]))
    unapproved = walk.step("backfill-pr.yml", "approvals", **pr)
    assert unapproved.returncode == 1
    assert (
        "::error file=specs/walk-demo.yaml,line=12,col=13,title=backfillctl validate::$.approvers[0]: walk-demo: "
        "'bob' has not approved the pull request"
    ) in unapproved.stdout
    (tmp_path / "reviews.json").write_text(
        json.dumps(
            [
                {
                    "id": 1,
                    "user": {"login": "carol"},
                    "state": "COMMENTED",
                    "commit_id": head,
                    "submitted_at": "2026-11-29T10:00:00Z",
                },
                {
                    "id": 2,
                    "user": {"login": "bob"},
                    "state": "APPROVED",
                    "commit_id": head,
                    "submitted_at": "2026-11-29T10:05:00Z",
                    "author_association": "MEMBER",
                    "permission": "write",  # the reviews step adds each reviewer's repository permission
                },
            ]
        )
    )
    approved = walk.step("backfill-pr.yml", "approvals", **pr)
    assert approved.returncode == 0, approved.stdout

    walk.git("checkout", "-q", "main")  # merge
    walk.git("merge", "-q", "--no-ff", "add-walk-demo", "-m", "Merge pull request #1", who="bob")
    merge = walk.git("rev-parse", "HEAD")

    reconciled = walk.step("backfill-reconcile.yml", "reconcile")
    assert reconciled.returncode == 0, reconciled.stderr
    lines = reconciled.stdout.splitlines()
    checksum = lines[2].removeprefix("Checksum: ")
    assert lines == [
        "+ create    walk-demo  demo_daily  2022-03-01 → 2022-03-03  reprocess none  max_active_runs 2  forward  "
        "runs 3 of 3 in range  up to 32 tasks at once  approvers bob  ticket CHG-4242  [Pending]",
        "Plan: 1 to create, 0 to pause, 0 to cancel, 0 queued, 0 blocked.",
        f"Checksum: {checksum}",
        f"+ create walk-demo: created backfill #{lines[3].rsplit('#', 1)[-1]}",
    ]
    assert lines[3].rsplit("#", 1)[-1].isdigit()
    finish = subprocess.run(
        [sys.executable, "-m", "controller", "reconcile", "--until-complete", "--interval", "3"],
        cwd=walk.work,
        env=walk.env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )
    assert finish.returncode == 0, finish.stderr
    assert walk.step("backfill-reconcile.yml", "status").returncode == 0
    summary = (tmp_path / "summary.md").read_text().splitlines()
    assert summary[:3] == ["### backfillctl status", "```", summary[2]]
    assert summary[2].split()[:4] == ["SPEC", "DAG", "PHASE", "BACKFILL"]
    assert summary[4:] == ["```"]
    row = summary[3].split()
    backfill_id = int(row[3])
    assert row == [
        "walk-demo",
        "demo_daily",
        "Succeeded",
        str(backfill_id),
        "3",  # OK
        "0",  # FAIL
        "0",  # RUN
        "0",  # QUE
        "3",  # TOTAL
        "100%",
        "-",
        "3",
        "run(s)",
        "succeeded",
    ]
    assert walk.step("backfill-reconcile.yml", "export").returncode == 0
    exported = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]

    report = subprocess.run(
        [sys.executable, "-m", "controller", "report", "walk-demo"],
        cwd=walk.work,
        env=walk.env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert f"- **Outcome**: Succeeded (backfill #{backfill_id})\n" in report
    assert "- **Intervals**: 3 complete, 0 failed (none), 0 skipped of 3 in range\n" in report
    assert "- **Ticket**: CHG-4242" in report
    assert "- **Requested by**: alice; **approved by**: bob" in report
    assert f"at commit `{merge}`" in report

    store = Store(walk.env["BACKFILLCTL_STORE_URL"])
    try:
        (intent,) = [e for e in store.events(EventFilter(spec="walk-demo")) if e.entry.phase == "intent"]
    finally:
        store.close()
    assert intent.entry.git_commit == merge
    assert intent.entry.spec_commit == head
    assert intent.entry.message == (
        "requested by alice, spec authored by alice@example.com, approved by bob; ticket CHG-4242"
    )
    assert intent.entry.actor == "github-actions"
    assert [e["seq"] for e in exported] == list(range(1, len(exported) + 1))
    trail = [(e["action"], e["phase"], e["outcome"], e["backfill_id"], e["message"]) for e in exported]
    assert [t for t, e in zip(trail, exported, strict=True) if e["spec_name"] == "walk-demo"] == [
        ("create", "intent", None, None, intent.entry.message),
        ("create", "outcome", "created", backfill_id, None),
        ("observe", "observation", "Succeeded", backfill_id, "3 run(s) succeeded"),
    ]
    passes = [t for t, e in zip(trail, exported, strict=True) if e["spec_name"] is None]
    assert passes[0] == ("reconcile", "observation", "applied", None, f"1 change(s); plan {checksum}")
    # --until-complete's idle passes write nothing; the one that saw the backfill succeed writes one record
    assert passes[1:] == [("reconcile", "observation", "no-changes", None, passes[1][4])]
    assert passes[1][4].startswith("0 change(s); plan ")
    assert len(exported) == 3 + len(passes)
