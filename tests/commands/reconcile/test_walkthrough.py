"""The README's walk-through, scripted: `backfillctl init` → branch → add spec → validate --base → plan → reviews
with approval → merge → reconcile → status → report, running the `run:` lines of the reusable workflows the
init'ed callers name, in the init'ed repository (its policy and workflows), against the real Airflow 3.3.2. The
audit trail must name the commit, the author and the approver of the spec.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.adapters.store import Store
from controller.adapters.store.audit_log import EventFilter
from controller.core.documents.starter import EXAMPLE_SPEC

pytestmark = pytest.mark.airflow
REPO = Path(__file__).resolve().parents[3]
# three days of its own on every run, so the walk-through also runs again on an Airflow kept from an earlier
# session (reprocess none: days that already ran would leave nothing to create)
FIRST = date(2010, 1, 1) + timedelta(days=3 * secrets.randbelow(600))
LAST = FIRST + timedelta(days=2)
SPEC = f"""version: 1
name: walk-demo
dag_id: demo_daily
from_date: "{FIRST}"
to_date: "{LAST}"
reprocess_behavior: none
max_active_runs: 2
expected_runs: 3
ticket: CHG-4242
reason: Walk-through of the pull-request workflow.
requested_by: alice
approvers: [bob]
"""


HELD_WARNING = (
    "::warning title=backfillctl evidence::cannot read the pull request behind {merge} (HTTP 404: Not Found); its "
    "changes are held\n"
)
HELD = "! approval-gate: held: the evidence of commit {short} could not be fetched; decided again next pass\n"
PR, RECONCILE = "reusable-backfill-pr.yml", "reusable-backfill-reconcile.yml"  # what every caller runs
# GitHub's answers to the evidence script, by API path (a path it has no answer for fails as GitHub would)
FAKE_GH = """import json, os, sys
args = [a for a in sys.argv[1:] if a not in ("api", "--paginate", "--slurp")]
if args == ["auth", "setup-git"]:
    sys.exit(0)
answers = json.loads(os.environ["GH_ANSWERS"])
if args[0] not in answers:
    sys.stderr.write("HTTP 404: Not Found")
    sys.exit(1)
answer = answers[args[0]]
print(answer if isinstance(answer, str) else json.dumps(answer))
"""


def workflow_steps(name: str) -> dict[str, str]:
    """The run steps by id of the workflow's first job (the one holding the secrets: reconcile, stop, the check)."""
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / name).read_text())
    job = next(iter(workflow["jobs"].values()))
    return {step["id"]: step["run"] for step in job["steps"] if "id" in step and "run" in step}


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

    def step(
        self, workflow: str, step_id: str, cwd: Path | None = None, **env: str
    ) -> subprocess.CompletedProcess[str]:
        script = workflow_steps(workflow)[step_id]
        return subprocess.run(
            ["bash", "-eo", "pipefail", "-c", script],
            cwd=cwd or self.work,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            check=False,
        )


def test_pull_request_to_change_record(tmp_path: Path, airflow_url: str) -> None:
    walk = Walk(tmp_path, airflow_url)
    walk.git("init", "-q", "--bare", "-b", "main", str(tmp_path / "origin.git"), cwd=tmp_path)
    walk.git("clone", "-q", str(tmp_path / "origin.git"), str(walk.work), cwd=tmp_path)
    ref = walk.git("rev-parse", "HEAD", cwd=REPO)  # the callers pin the backfillctl under test
    init = ["init", str(walk.work), "--workflows-repo", "acme/backfillctl", "--ref", ref]
    made = subprocess.run(
        [sys.executable, "-m", "controller", *init],
        env=walk.env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (made.returncode, made.stderr) == (0, ""), made.stdout
    for caller, called in (("backfill-pr.yml", PR), ("backfill-reconcile.yml", RECONCILE)):
        (job,) = yaml.safe_load((walk.work / ".github" / "workflows" / caller).read_text())["jobs"].values()
        assert job["uses"] == f"acme/backfillctl/.github/workflows/{called}@{ref}"
        assert job["with"]["specs-dir"] == walk.env["BACKFILLCTL_SPECS_DIR"]
    (walk.work / "specs" / f"{EXAMPLE_SPEC}.yaml").unlink()  # as the team README says: its DAG is not here
    policy = walk.work / "specs" / "policy.yaml"  # the team maps its git authors to their logins
    commented = "# author_logins: {alice@example.com: alice}\n"
    assert commented in policy.read_text()
    policy.write_text(
        policy.read_text().replace(commented, "author_logins: {alice@example.com: alice, bob@example.com: bob}\n")
    )
    walk.git("add", "-A")
    walk.git("commit", "-q", "-m", "backfillctl init")
    walk.git("push", "-q", "origin", "HEAD:main")

    walk.git("checkout", "-q", "-b", "add-walk-demo")  # branch → add spec
    (walk.work / "specs" / "walk-demo.yaml").write_text(SPEC)
    walk.git("add", "-A")
    walk.git("commit", "-q", "-m", "Backfill demo_daily for CHG-4242")
    head = walk.git("rev-parse", "HEAD")
    pr = {"BASE_REF": "main", "PR_AUTHOR": "alice", "HEAD_SHA": head}

    validated = walk.step(PR, "validate", **pr)
    assert (validated.returncode, validated.stdout) == (
        0,
        "OK: 1 spec valid (2 files including the policy specs/policy.yaml, 0 warnings).\n",
    )
    planned = walk.step(PR, "plan", **pr)
    assert planned.returncode == 0, planned.stderr
    plan_md = (tmp_path / "plan.md").read_text()
    assert "| `+` | `walk-demo` | `demo_daily` | create | 3 of 3 | Pending |" in plan_md

    (tmp_path / "reviews.json").write_text(json.dumps([]))
    unapproved = walk.step(PR, "approvals", **pr)
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
    approved = walk.step(PR, "approvals", **pr)
    assert approved.returncode == 0, approved.stdout

    walk.git("checkout", "-q", "main")  # merge
    walk.git("merge", "-q", "--no-ff", "add-walk-demo", "-m", "Merge pull request #1", who="bob")
    merge = walk.git("rev-parse", "HEAD")

    # reconcile finds the merged pull request and its reviews (a fake gh), with the workflow's own scripts
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gh").write_text(f"#!{sys.executable}\n{FAKE_GH}")
    (bin_dir / "gh").chmod(0o755)
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "trusted").symlink_to(REPO)
    walk.git("push", "-q", "origin", "add-walk-demo:refs/pull/1/head")  # GitHub keeps each pull request's head
    repo = "repos/acme/team-backfills"
    pull = {
        "number": 1,
        "html_url": "https://github.com/acme/team-backfills/pull/1",
        "user": {"login": "alice"},
        "head": {"sha": head},
        "merge_commit_sha": merge,
        "merged_at": "2026-11-29T11:00:00Z",
        "commits": 1,
    }
    reviews = json.loads((tmp_path / "reviews.json").read_text())
    answers: dict[str, Any] = {
        f"{repo}/commits/{merge}/pulls": [pull],
        f"{repo}/pulls/1": pull,
        f"{repo}/pulls/1/reviews": [[{k: v for k, v in r.items() if k != "permission"} for r in reviews]],
        f"{repo}/collaborators/bob/permission": "write",
        f"{repo}/collaborators/carol/permission": "read",
    }
    gh = {
        "PATH": f"{bin_dir}:{walk.env['PATH']}",
        "GITHUB_REPOSITORY": "acme/team-backfills",
        "GITHUB_SHA": merge,
        "GITHUB_WORKSPACE": str(tmp_path / "workspace"),
    }
    outage = {k: v for k, v in answers.items() if not k.endswith("/pulls")}  # GitHub does not answer for the merge
    found = walk.step(RECONCILE, "evidence", **gh, GH_ANSWERS=json.dumps(outage))
    assert (found.returncode, found.stdout) == (0, HELD_WARNING.format(merge=merge)), found.stderr
    assert (tmp_path / "evidence" / "args").read_text() == f"--evidence-unavailable\n{merge}\n"
    held = walk.step(RECONCILE, "reconcile")
    assert held.returncode == 0, held.stderr
    assert HELD.format(short=merge[:12]) in held.stdout, held.stdout
    assert "Plan: 0 to create, 0 to pause, 0 to cancel, 1 queued, 0 blocked." in held.stdout
    store = Store(walk.env["BACKFILLCTL_STORE_URL"])
    try:
        assert [e.entry.action for e in store.events(EventFilter(spec="walk-demo"))] == ["finding"]  # nothing created
    finally:
        store.close()

    found = walk.step(RECONCILE, "evidence", **gh, GH_ANSWERS=json.dumps(answers))  # GitHub answers again
    assert (found.returncode, found.stdout) == (0, ""), found.stderr
    assert (tmp_path / "evidence" / "args").read_text() == f"--evidence\n{tmp_path}/evidence/pr-1.json\n"
    reconciled = walk.step(RECONCILE, "reconcile")
    assert reconciled.returncode == 0, reconciled.stderr
    lines = reconciled.stdout.splitlines()
    checksum = lines[3].removeprefix("Checksum: ")
    assert lines == [
        f"+ create    walk-demo  demo_daily  {FIRST} → {LAST}  reprocess none  max_active_runs 2  forward  "
        "runs 3 of 3 in range  up to 32 tasks at once  "
        "Airflow 3.3.2, DAG version 1: every run: the latest DAG version (run_on_latest_version: true)  approvers bob  "
        "ticket CHG-4242  [Pending]",
        # the init'ed policy's downstream budget; walk-demo lists no downstream system
        "Load: warehouse budget 8: no unfinished spec (0 requested; at most 8 at once)",
        "Plan: 1 to create, 0 to pause, 0 to cancel, 0 queued, 0 blocked.",
        f"Checksum: {checksum}",
        f"+ create walk-demo: created backfill #{lines[4].rsplit('#', 1)[-1]}",
    ]
    assert lines[4].rsplit("#", 1)[-1].isdigit()
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
    assert walk.step(RECONCILE, "status").returncode == 0
    summary = (tmp_path / "summary.md").read_text().splitlines()
    assert summary[:3] == ["### backfillctl status", "```", "1 spec: 1 Succeeded"]  # the counts per phase first
    assert summary[3].split()[:4] == ["SPEC", "DAG", "PHASE", "BACKFILL"]
    assert summary[5:] == ["```"]
    row = summary[4].split()
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
        "·",  # and its version coverage, measured when it ended
        "version",
        "coverage:",
        "3",
        "of",
        "3",
        "intervals",
        "on",
        "DAG",
        "version",
        row[-1],
    ]
    assert row[-1].isdigit()
    verified = walk.step(RECONCILE, "audit")
    assert verified.returncode == 0, verified.stderr
    verdict = verified.stdout.splitlines()[0]
    assert f"### backfillctl audit verify\n```\n{verdict}\n" in (tmp_path / "summary.md").read_text()
    exported_text = subprocess.run(
        [sys.executable, "-m", "controller", "audit", "export"],
        cwd=walk.work,
        env=walk.env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    exported = [json.loads(line) for line in exported_text.splitlines()]
    assert verdict.startswith(f"OK: {len(exported)} events, chain intact; head seq {len(exported)} hash ")

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
    assert r"- **Requested by**: alice; **approved by**: bob in \#1 \(review 2, 2026-11-29T10:05Z\)" "\n" in report
    assert f"at commit `{merge}`" in report

    store = Store(walk.env["BACKFILLCTL_STORE_URL"])
    try:
        (intent,) = [e for e in store.events(EventFilter(spec="walk-demo")) if e.entry.phase == "intent"]
    finally:
        store.close()
    assert intent.entry.git_commit == merge
    assert intent.entry.spec_commit == head
    assert intent.entry.message == (
        "requested by alice, spec authored by alice@example.com, approved by bob in #1 (review 2, 2026-11-29T10:05Z); "
        "ticket CHG-4242"
    )
    assert intent.entry.actor == "github-actions"
    assert [e["seq"] for e in exported] == list(range(1, len(exported) + 1))
    trail = [(e["action"], e["phase"], e["outcome"], e["backfill_id"], e["message"]) for e in exported]
    assert [t for t, e in zip(trail, exported, strict=True) if e["spec_name"] == "walk-demo"] == [
        ("finding", "observation", "approval-gate", None, HELD.format(short=merge[:12]).split(": ", 1)[1].strip()),
        ("create", "intent", None, None, intent.entry.message),
        ("create", "outcome", "created", backfill_id, None),
        ("observe", "observation", "Succeeded", backfill_id, "3 run(s) succeeded"),
    ]
    passes = [t for t, e in zip(trail, exported, strict=True) if e["spec_name"] is None]
    assert passes[0][:3] == ("reconcile", "observation", "no-changes")  # the held pass changed nothing
    assert passes[1] == ("reconcile", "observation", "applied", None, f"1 change(s); plan {checksum}")
    # --until-complete's idle passes write nothing; the one that saw the backfill succeed writes one record
    assert passes[2:] == [("reconcile", "observation", "no-changes", None, passes[2][4])]
    assert passes[2][4].startswith("0 change(s); plan ")
    assert len(exported) == 4 + len(passes)
