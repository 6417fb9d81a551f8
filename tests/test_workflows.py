"""The GitHub workflows: well-formed (offline: check-jsonschema's vendored schemas), and the CI trust boundary
(docs/ci-trust.md) asserted on the parsed YAML and by running the workflows' own `run:` scripts."""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from controller.commands.pr_comment import read_changed
from controller.core.checks.approval import latest_decisions, parse_reviews
from controller.core.render.pr_comment import MARKER

REPO = Path(__file__).resolve().parents[1]
GITHUB = REPO / ".github"
WORKFLOWS = sorted((GITHUB / "workflows").glob("*.yml"))
PINNED = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}$")
SHA_LINE = re.compile(r"^\s*(?:- )?uses: (\S+) # v\d+\.\d+\.\d+$")
PR, RECONCILE = "reusable-backfill-pr.yml", "reusable-backfill-reconcile.yml"  # the callers' one definition
STOP = "reusable-backfill-stop.yml"
CALLERS = {"backfill-pr.yml": PR, "backfill-reconcile.yml": RECONCILE, "backfill-stop.yml": STOP}


def load(name: str) -> dict[Any, Any]:
    workflow: dict[Any, Any] = yaml.safe_load((GITHUB / "workflows" / name).read_text())
    return workflow


def job(name: str) -> dict[str, Any]:
    (only,) = load(name)["jobs"].values()
    return dict(only)


def steps(name: str) -> dict[str, str]:
    return {step["id"]: step["run"] for step in job(name)["steps"] if "id" in step}


def step(name: str, step_id: str) -> dict[str, Any]:
    (found,) = [s for s in job(name)["steps"] if s.get("id") == step_id]
    return dict(found)


def all_steps() -> list[tuple[str, dict[str, Any]]]:
    return [(p.name, s) for p in WORKFLOWS for j in load(p.name)["jobs"].values() for s in j.get("steps", [])]


def run_step(name: str, step_id: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """A step's script the way `shell: bash` runs it on GitHub (`bash --noprofile --norc -eo pipefail`)."""
    base = {"PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", steps(name)[step_id]],
        cwd=cwd,
        env={**base, **env},
        capture_output=True,
        text=True,
        check=False,
    )


def test_the_workflows_exist() -> None:
    assert [p.name for p in WORKFLOWS] == [
        "backfill-pr.yml",
        "backfill-reconcile.yml",
        "backfill-stop.yml",
        "ci.yml",
        PR,
        RECONCILE,
        STOP,
    ]


@pytest.mark.parametrize("schema", ["vendor.github-workflows", "custom.github-workflows-require-timeout"])
def test_workflows_match_the_schema(schema: str) -> None:
    checker = Path(sys.executable).parent / "check-jsonschema"
    result = subprocess.run(
        [str(checker), "--builtin-schema", schema, *map(str, WORKFLOWS)], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "ok -- validation done"


def test_dependabot_keeps_actions_and_pip_current() -> None:
    checker = Path(sys.executable).parent / "check-jsonschema"
    config = GITHUB / "dependabot.yml"
    command = [str(checker), "--builtin-schema", "vendor.dependabot", str(config)]
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    assert (result.returncode, result.stdout.strip()) == (0, "ok -- validation done"), result.stderr
    updates = yaml.safe_load(config.read_text())["updates"]
    assert [(u["package-ecosystem"], u["directory"]) for u in updates] == [("github-actions", "/"), ("pip", "/")]


# --- the trust boundary, structurally --------------------------------------------------------------------


def test_every_checkout_persists_no_credentials() -> None:
    checkouts = [(name, s) for name, s in all_steps() if s.get("uses", "").startswith("actions/checkout@")]
    assert len(checkouts) == 8  # the stop workflow checks out the specs and the trusted backfillctl too
    for name, checkout in checkouts:
        assert checkout["with"]["persist-credentials"] is False, (name, checkout)


def test_every_action_is_pinned_to_a_full_commit_sha_with_its_version() -> None:
    used = [s["uses"] for _, s in all_steps() if "uses" in s]
    assert len(used) == 14
    for uses in used:
        assert PINNED.match(uses), uses
    lines = [line for p in WORKFLOWS for line in p.read_text().splitlines() if re.match(r"^\s*(- )?uses:", line)]
    local = [line.strip() for line in lines if "uses: ./" in line]  # a job calling a reusable workflow of this tree
    assert local == [f"uses: ./.github/workflows/{called}" for called in CALLERS.values()]
    lines = [line for line in lines if "uses: ./" not in line]
    assert len(lines) == len(used)
    for line in lines:
        assert SHA_LINE.match(line), f"not `uses: owner/repo@<sha> # vX.Y.Z`: {line.strip()}"


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_no_credential_at_workflow_or_job_level(path: Path) -> None:
    workflow = load(path.name)
    scopes = [workflow.get("env", {})] + [j.get("env", {}) for j in workflow["jobs"].values()]
    for env in scopes:
        for key, value in env.items():
            assert "secrets." not in str(value), key
            assert "github.token" not in str(value), key


def credentials_by_step(name: str) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for s in job(name)["steps"]:
        text = json.dumps(s)
        hits = re.findall(r"secrets\.[A-Z_]+|github\.token", text)
        if hits:
            found[s.get("id", s.get("name", "?"))] = sorted(set(hits))
    return found


def test_pr_workflow_secrets_only_where_used() -> None:
    airflow = [
        "secrets.BACKFILLCTL_AIRFLOW_PASSWORD",
        "secrets.BACKFILLCTL_AIRFLOW_TOKEN",
        "secrets.BACKFILLCTL_AIRFLOW_URL",
        "secrets.BACKFILLCTL_AIRFLOW_USERNAME",
    ]
    assert credentials_by_step(PR) == {
        "reviews": ["github.token"],
        "plan": airflow,
        "comment": ["github.token"],
    }
    assert "STORE_URL" not in (GITHUB / "workflows" / "backfill-pr.yml").read_text()
    assert "STORE_URL" not in (GITHUB / "workflows" / PR).read_text()


def test_reconcile_workflow_secrets_only_where_used() -> None:
    airflow = [
        "secrets.BACKFILLCTL_AIRFLOW_PASSWORD",
        "secrets.BACKFILLCTL_AIRFLOW_TOKEN",
        "secrets.BACKFILLCTL_AIRFLOW_URL",
        "secrets.BACKFILLCTL_AIRFLOW_USERNAME",
    ]
    store = ["secrets.BACKFILLCTL_STORE_URL"]
    assert credentials_by_step(RECONCILE) == {
        "secrets": sorted(airflow + store),
        "pr": ["github.token"],
        "reconcile": sorted([*airflow, *store, "secrets.BACKFILLCTL_AUDIT_KEY"]),
        "status": sorted(airflow + store),
        "export": store,
    }
    assert all(" != ''" in value for value in step(RECONCILE, "secrets")["env"].values())


def test_pr_workflow_runs_only_the_trusted_backfillctl() -> None:
    trusted, pr = (s for s in job(PR)["steps"] if s.get("uses", "").startswith("actions/checkout@"))
    assert trusted["with"] == {
        "repository": "${{ inputs.backfillctl-repository }}",
        "ref": "${{ inputs.backfillctl-version }}",
        "path": "trusted",
        "persist-credentials": False,
    }
    assert pr["with"] == {
        "ref": "${{ github.event.pull_request.head.sha }}",
        "path": "pr",
        "fetch-depth": 0,
        "persist-credentials": False,
    }
    install = step(PR, "install")
    assert (install["working-directory"], install["run"]) == ("trusted", "pip install .")
    assert job(PR)["defaults"]["run"] == {"shell": "bash", "working-directory": "pr"}
    assert job(PR)["env"] == {"BACKFILLCTL_SPECS_DIR": "${{ inputs.specs-dir }}"}
    for step_id, script in steps(PR).items():
        if step_id != "install":  # nothing else installs or runs Python from the pull request's tree
            assert not re.search(r"\bpip\b|\bpython\b|\./|\bmake\b|\bnpm\b|\bsource\b", script), step_id
    # this repository's own check: its base branch's backfillctl, as before the reusable workflow
    assert job("backfill-pr.yml")["with"] == {
        "specs-dir": "specs",
        "backfillctl-repository": "${{ github.repository }}",
        "backfillctl-version": "${{ github.event.pull_request.base.ref }}",
    }


@pytest.mark.parametrize(("caller", "called"), sorted(CALLERS.items()))
def test_this_repositorys_workflows_call_the_reusable_ones(caller: str, called: str) -> None:
    calling, declared = job(caller), load(called)[True]["workflow_call"]
    assert calling["uses"] == f"./.github/workflows/{called}"
    assert set(calling["with"]) <= set(declared["inputs"])
    assert {k for k, v in declared["inputs"].items() if v.get("required")} <= set(calling["with"])
    assert set(calling["secrets"]) == set(declared["secrets"])
    assert all(v == f"${{{{ secrets.{k} }}}}" for k, v in calling["secrets"].items())  # named, never `inherit`
    assert load(caller)["permissions"] == load(called)["permissions"]


def test_pr_workflow_validates_gates_and_plans_without_a_store() -> None:
    runs = steps(PR)
    assert list(runs) == ["changes", "install", "validate", "reviews", "approvals", "plan", "comment"]
    assert runs["validate"] == 'backfillctl validate --base "origin/$BASE_REF" --format github'
    assert runs["reviews"] == REVIEWS_SCRIPT
    assert steps(RECONCILE)["pr"].count(REVIEWS_SCRIPT.replace("$PR_NUMBER", "$number")) == 1  # one script, both
    assert runs["approvals"] == (
        'backfillctl validate --base "origin/$BASE_REF" --pr-reviews "$RUNNER_TEMP/reviews.json" '
        '--pr-author "$PR_AUTHOR" --head-sha "$HEAD_SHA" --format github'
    )
    assert (
        'backfillctl plan --no-store --format markdown --pr-comment "$RUNNER_TEMP/changed.txt" > "$RUNNER_TEMP/plan.md"'
    ) in runs["plan"]


REVIEWS_SCRIPT = 'bash "$GITHUB_WORKSPACE/trusted/.github/scripts/pr-reviews" "$PR_NUMBER" "$RUNNER_TEMP/reviews.json"'


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.name)
def test_no_step_swallows_errors(path: Path) -> None:
    text = path.read_text()
    assert not re.search(r"\|\|\s*(true|:)|continue-on-error|set \+e", text)


def test_the_shared_reviews_script_swallows_no_error() -> None:
    text = (GITHUB / "scripts" / "pr-reviews").read_text()
    assert "set -eo pipefail" in text
    assert not re.search(r"\|\|\s*(true|:)|set \+e", text)


def test_the_required_check_reports_on_every_pull_request() -> None:
    triggers = load("backfill-pr.yml")[True]  # YAML 1.1 reads the `on` key as True
    assert triggers == {"pull_request": None, "pull_request_review": {"types": ["submitted", "dismissed"]}}
    gated = job(PR)["steps"][3:]  # after the two checkouts and `changes`
    assert all("steps.changes.outputs.specs == 'true'" in s["if"] for s in gated)


# --- the trust boundary, by running the workflows' own scripts ----------------------------------------------


def git(cwd: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@x", "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@x"}
    env = {**os.environ, **env, "GIT_CONFIG_NOSYSTEM": "1"}
    done = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.fixture
def pr(tmp_path: Path) -> Path:
    """A clone whose `origin/main` has one spec, on a branch: what the PR checkout looks like."""
    origin, work = tmp_path / "origin.git", tmp_path / "pr"
    git(tmp_path, "init", "-q", "--bare", "-b", "main", str(origin))
    git(tmp_path, "clone", "-q", str(origin), str(work))
    (work / "specs").mkdir()
    (work / "specs" / "old.yaml").write_text("name: old\n")
    (work / "README.md").write_text("demo\n")
    git(work, "add", "-A")
    git(work, "commit", "-q", "-m", "base")
    git(work, "push", "-q", "origin", "HEAD:main")
    git(work, "checkout", "-q", "-b", "change")
    return work


def fake(bin_dir: Path, name: str, script: str) -> None:
    bin_dir.mkdir(exist_ok=True)
    path = bin_dir / name
    path.write_text(f"#!{sys.executable}\n{script}")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)


def test_a_pull_request_without_spec_changes_passes_and_skips_the_work(pr: Path, tmp_path: Path) -> None:
    (pr / "README.md").write_text("changed\n")
    git(pr, "commit", "-qam", "docs only")
    env = {"BASE_REF": "main", "GITHUB_OUTPUT": str(tmp_path / "out"), "GITHUB_STEP_SUMMARY": str(tmp_path / "sum")}
    env["BACKFILLCTL_SPECS_DIR"] = "specs"
    done = run_step(PR, "changes", pr, env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out").read_text() == "specs=false\n"
    assert (tmp_path / "sum").read_text() == (
        "This pull request changes nothing under specs/: nothing to validate or plan.\n"
    )
    (pr / "specs" / "new.yaml").write_text("name: new\n")
    git(pr, "add", "-A")
    git(pr, "commit", "-qm", "a spec")
    assert run_step(PR, "changes", pr, env).returncode == 0
    assert (tmp_path / "out").read_text() == "specs=false\nspecs=true\n"


def test_the_plan_step_plans_without_a_store_and_never_swallows_a_failure(pr: Path, tmp_path: Path) -> None:
    (pr / "specs" / "new.yaml").write_text("name: new\n")
    git(pr, "add", "-A")
    git(pr, "commit", "-qm", "a spec")
    bin_dir = tmp_path / "bin"
    fake(
        bin_dir,
        "backfillctl",
        "import json, os, sys\n"
        "open(os.environ['CALLS'], 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n"
        "print('partial output')\n"
        "sys.exit(int(os.environ['EXIT']))\n",
    )
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "BASE_REF": "main",
        "BACKFILLCTL_SPECS_DIR": "specs",
        "RUNNER_TEMP": str(tmp_path),
        "CALLS": str(tmp_path / "calls"),
        "BACKFILLCTL_AIRFLOW_URL": "http://airflow.invalid",
    }
    for code in (1, 3, 5):  # 5: reconcile would refuse a spec of the PR; the comment step still posts plan.md
        failed = run_step(PR, "plan", pr, {**env, "EXIT": str(code)})
        assert failed.returncode == code
    assert run_step(PR, "plan", pr, {**env, "EXIT": "0"}).returncode == 0
    calls = [json.loads(line) for line in (tmp_path / "calls").read_text().splitlines()]
    assert calls == [["plan", "--no-store", "--format", "markdown", "--pr-comment", f"{tmp_path}/changed.txt"]] * 4
    assert (tmp_path / "changed.txt").read_text() == "specs/new.yaml\0"  # -z: unquoted, NUL-separated
    assert (tmp_path / "plan.md").read_text() == "partial output\n"

    offline = run_step(PR, "plan", pr, {**env, "BACKFILLCTL_AIRFLOW_URL": "", "EXIT": "0"})
    assert offline.returncode == 0
    assert len((tmp_path / "calls").read_text().splitlines()) == 4  # backfillctl was not run
    assert (tmp_path / "plan.md").read_text() == (
        f"{MARKER}\n### backfillctl plan\n\n"
        "Airflow is not configured for this repository (secret BACKFILLCTL_AIRFLOW_URL), so there is no plan:\n"
        "the specs were validated; run counts come from Airflow's dry run once it is configured.\n"
    )


def test_the_plan_step_lists_changed_paths_unquoted(pr: Path, tmp_path: Path) -> None:
    odd = ["specs/équipe/spec-b.yaml", 'specs/a b"c/spec-c.yaml', "specs/new\nline/spec-d.yaml"]
    for name in odd:
        (pr / name).parent.mkdir()
        (pr / name).write_text("name: x\n")
    git(pr, "add", "-A")
    git(pr, "commit", "-qm", "odd folders")
    fake(tmp_path / "bin", "backfillctl", "print('plan')\n")
    env = {"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "BASE_REF": "main", "RUNNER_TEMP": str(tmp_path)}
    env["BACKFILLCTL_SPECS_DIR"] = "specs"
    done = run_step(PR, "plan", pr, {**env, "BACKFILLCTL_AIRFLOW_URL": "http://airflow.invalid"})
    assert done.returncode == 0, done.stderr
    assert sorted(read_changed(tmp_path / "changed.txt")) == sorted(odd)


FAKE_GH = """import json, os, subprocess, sys
args = sys.argv[1:]
entry = {"args": args}
if "--input" in args:
    entry["input"] = json.load(open(args[args.index("--input") + 1]))
open(os.environ["GH_LOG"], "a").write(json.dumps(entry) + "\\n")
if "--jq" in args:  # like gh: the filter runs on each page, raw output
    jq = args[args.index("--jq") + 1]
    for page in json.loads(os.environ["GH_PAGES"]):
        sys.stdout.write(subprocess.run(["jq", "-r", jq], input=json.dumps(page), capture_output=True,
                                        text=True, check=True).stdout)
"""
BOT = {"login": "github-actions[bot]", "type": "Bot"}
MALLORY = {"login": "mallory", "type": "User"}


@pytest.mark.skipif(shutil.which("jq") is None, reason="the comment step needs jq (preinstalled on GitHub runners)")
@pytest.mark.parametrize(
    ("pages", "plan_md", "expected_call", "expected_body"),
    [
        pytest.param(
            [
                [{"id": 11, "user": MALLORY, "body": f"{MARKER}\nplanted"}, {"id": 12, "user": BOT, "body": "hi"}],
                [{"id": 13, "user": BOT, "body": f"{MARKER}\nold plan"}, {"id": 14, "user": BOT, "body": MARKER}],
            ],
            f"{MARKER}\n### backfillctl plan\n| a | b |\n",
            ["api", "-X", "PATCH", "repos/o/r/issues/comments/13", "--input", "comment.json"],
            f"{MARKER}\n### backfillctl plan\n| a | b |\n",
            id="updates its own comment, not a planted one",
        ),
        pytest.param(
            [[{"id": 11, "user": MALLORY, "body": f"{MARKER}\nplanted"}], []],
            f"{MARKER}\nplan\n",
            ["api", "-X", "POST", "repos/o/r/issues/7/comments", "--input", "comment.json"],
            f"{MARKER}\nplan\n",
            id="creates one when only someone else's carries the marker",
        ),
        pytest.param(
            [[]],
            None,
            ["api", "-X", "POST", "repos/o/r/issues/7/comments", "--input", "comment.json"],
            f"{MARKER}\n### backfillctl plan\n\nNo plan: the `plan` step failed, see "
            "[the workflow run](https://github.com/o/r/actions/runs/5).\n",
            id="says so when the plan failed",
        ),
        pytest.param(
            [[]],
            "not a comment\n",
            ["api", "-X", "POST", "repos/o/r/issues/7/comments", "--input", "comment.json"],
            f"{MARKER}\n### backfillctl plan\n\nNo plan: the `plan` step failed, see "
            "[the workflow run](https://github.com/o/r/actions/runs/5).\n",
            id="never posts output that is not the comment",
        ),
    ],
)
def test_the_sticky_comment_is_found_by_marker_and_author(
    tmp_path: Path,
    pages: list[list[dict[str, Any]]],
    plan_md: str | None,
    expected_call: list[str],
    expected_body: str,
) -> None:
    fake(tmp_path / "bin", "gh", FAKE_GH)
    if plan_md is not None:
        (tmp_path / "plan.md").write_text(plan_md)
    env = {
        "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
        "RUNNER_TEMP": str(tmp_path),
        "GITHUB_REPOSITORY": "o/r",
        "PR_NUMBER": "7",
        "RUN_URL": "https://github.com/o/r/actions/runs/5",
        "GH_LOG": str(tmp_path / "gh.log"),
        "GH_PAGES": json.dumps(pages),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "SAME_REPO": "true",
    }
    done = run_step(PR, "comment", tmp_path, env)
    assert done.returncode == 0, done.stderr
    listed, posted = [json.loads(line) for line in (tmp_path / "gh.log").read_text().splitlines()]
    assert listed["args"][:4] == ["api", "--paginate", "repos/o/r/issues/7/comments", "--jq"]
    assert posted == {"args": expected_call, "input": {"body": expected_body}}
    assert (tmp_path / "summary.md").read_text() == expected_body


def test_a_fork_gets_the_plan_in_the_job_summary(tmp_path: Path) -> None:
    fake(tmp_path / "bin", "gh", FAKE_GH)
    (tmp_path / "plan.md").write_text(f"{MARKER}\nplan\n")
    env = {
        "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
        "GH_LOG": str(tmp_path / "gh.log"),
        "GITHUB_STEP_SUMMARY": str(tmp_path / "summary.md"),
        "SAME_REPO": "false",
    }
    done = run_step(PR, "comment", tmp_path, env)
    assert (done.returncode, done.stdout) == (
        0,
        "A pull request from a fork gets a read-only token: the plan is in the job summary, not a comment.\n",
    )
    assert (tmp_path / "summary.md").read_text() == f"{MARKER}\nplan\n"
    assert not (tmp_path / "gh.log").exists()


FAKE_GH_REVIEWS = """import json, os, sys
args = sys.argv[1:]
open(os.environ["GH_LOG"], "a").write(json.dumps(args) + "\\n")
path = next(a for a in args if a.startswith("repos/"))
if path.endswith("/reviews"):
    print(os.environ["GH_PAGES"])
else:
    known = json.loads(os.environ["GH_PERMISSIONS"])
    login = path.split("/")[-2]
    if login not in known:
        sys.exit("gh: Not Found (HTTP 404)")
    print(known[login])
"""


def workspace(tmp_path: Path) -> Path:
    """The runner's workspace: this repository checked out as `trusted/` (the shared reviews script is there)."""
    (tmp_path / "workspace").mkdir()
    (tmp_path / "workspace" / "trusted").symlink_to(REPO)
    return tmp_path / "workspace"


def gh_env(tmp_path: Path, pages: list[Any], permissions: dict[str, str], **more: str) -> dict[str, str]:
    """A step's environment with the fake gh of FAKE_GH_REVIEWS: these review pages and permissions."""
    return {
        "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
        "RUNNER_TEMP": str(tmp_path),
        "GITHUB_REPOSITORY": "o/r",
        "GITHUB_WORKSPACE": str(workspace(tmp_path)),
        "GH_LOG": str(tmp_path / "gh.log"),
        "GH_PAGES": json.dumps(pages),
        "GH_PERMISSIONS": json.dumps(permissions),
        **more,
    }


def gh_review(login: str | None, state: str, association: str = "MEMBER") -> dict[str, Any]:
    return {"user": None if login is None else {"login": login}, "state": state, "author_association": association}


@pytest.mark.skipif(shutil.which("jq") is None, reason="the reviews step needs jq (preinstalled on GitHub runners)")
def test_the_reviews_step_adds_each_reviewers_repository_permission(tmp_path: Path) -> None:
    pages = [
        [gh_review("dave", "APPROVED"), gh_review("puppet", "APPROVED", "NONE")],
        [gh_review("dave", "COMMENTED"), gh_review(None, "APPROVED"), gh_review("copilot[bot]", "COMMENTED", "NONE")],
        [gh_review("erin", "APPROVED")],
    ]
    fake(tmp_path / "bin", "gh", FAKE_GH_REVIEWS)
    # erin: the permission cannot be read
    env = gh_env(tmp_path, pages, {"dave": "write", "puppet": "none"}, PR_NUMBER="7")
    done = run_step(PR, "reviews", tmp_path, env)
    assert (done.returncode, done.stdout) == (
        0,
        "::warning title=backfillctl approvals::cannot read the repository permission of erin; their approval "
        "counts only if they own the repository\n",
    )
    calls = [json.loads(line) for line in (tmp_path / "gh.log").read_text().splitlines()]
    assert calls == [
        ["api", "--paginate", "--slurp", "repos/o/r/pulls/7/reviews"],
        *[
            ["api", f"repos/o/r/collaborators/{login}/permission", "--jq", ".permission"]
            for login in ("dave", "erin", "puppet")
        ],
    ]
    permissions = {"dave": "write", "puppet": "none"}
    assert json.loads((tmp_path / "reviews.json").read_text()) == [
        {**r, "permission": permissions.get((r["user"] or {}).get("login", ""))} for page in pages for r in page
    ]
    reviews, _ = parse_reviews(json.loads((tmp_path / "reviews.json").read_text()), "reviews.json")
    assert {r.login: r.permission for r in latest_decisions(reviews).values()} == {
        "dave": "write",
        "puppet": "none",
        "erin": None,
    }


def test_the_comment_marker_is_the_renderers() -> None:
    assert f"marker='{MARKER}'" in steps(PR)["comment"]
    assert f'echo "{MARKER}"' in steps(PR)["plan"]


@pytest.mark.parametrize(
    ("present", "code", "errors"),
    [
        pytest.param(
            {"AIRFLOW_URL", "AIRFLOW_TOKEN"},
            1,
            [
                "BACKFILLCTL_STORE_URL (the production store, e.g. postgresql+psycopg://…; without it reconcile "
                "would use a throw-away SQLite file and lose the lease and the audit log)"
            ],
            id="no store",
        ),
        pytest.param(
            {"STORE_URL", "AIRFLOW_URL", "AIRFLOW_USERNAME"},
            1,
            ["BACKFILLCTL_AIRFLOW_TOKEN, or BACKFILLCTL_AIRFLOW_USERNAME and BACKFILLCTL_AIRFLOW_PASSWORD"],
            id="half a login",
        ),
        pytest.param(
            set(),
            1,
            [
                "BACKFILLCTL_STORE_URL (the production store, e.g. postgresql+psycopg://…; without it reconcile "
                "would use a throw-away SQLite file and lose the lease and the audit log)",
                "BACKFILLCTL_AIRFLOW_URL (Airflow's base URL)",
                "BACKFILLCTL_AIRFLOW_TOKEN, or BACKFILLCTL_AIRFLOW_USERNAME and BACKFILLCTL_AIRFLOW_PASSWORD",
            ],
            id="nothing",
        ),
        pytest.param({"STORE_URL", "AIRFLOW_URL", "AIRFLOW_TOKEN"}, 0, [], id="token"),
        pytest.param({"STORE_URL", "AIRFLOW_URL", "AIRFLOW_USERNAME", "AIRFLOW_PASSWORD"}, 0, [], id="login"),
    ],
)
def test_reconcile_fails_without_the_production_store(
    tmp_path: Path, present: set[str], code: int, errors: list[str]
) -> None:
    names = ["STORE_URL", "AIRFLOW_URL", "AIRFLOW_TOKEN", "AIRFLOW_USERNAME", "AIRFLOW_PASSWORD"]
    env = {f"HAS_{name}": "true" if name in present else "false" for name in names}
    done = run_step(RECONCILE, "secrets", tmp_path, env)
    assert done.returncode == code
    assert done.stdout.splitlines() == [
        f"::error title=backfillctl reconcile::repository secret not set: {e}" for e in errors
    ]
    if code:
        assert done.stderr == "Set them under Settings → Secrets and variables → Actions; nothing was reconciled.\n"


def test_reconcile_steps_run_only_after_the_secrets_check() -> None:
    assert list(steps(RECONCILE)) == ["install", "secrets", "pr", "reconcile", "status", "export"]
    assert "if" not in step(RECONCILE, "reconcile")  # success(): the check passed
    after_check = "${{ !cancelled() && steps.secrets.outcome == 'success' }}"
    for step_id in ("status", "export"):
        assert step(RECONCILE, step_id)["if"] == after_check
    assert job(RECONCILE)["if"] == "github.ref == format('refs/heads/{0}', inputs.branch)"
    assert job(RECONCILE)["environment"] == "${{ inputs.environment }}"
    inputs = load(RECONCILE)[True]["workflow_call"]["inputs"]
    assert (inputs["branch"]["default"], inputs["environment"]["default"]) == ("main", "backfill-production")
    assert job("backfill-reconcile.yml")["with"]["environment"] == "backfill-production"
    assert job("backfill-reconcile.yml")["with"]["backfillctl-version"] == "${{ github.sha }}"


def test_reconcile_workflow_never_overlaps() -> None:
    workflow = load("backfill-reconcile.yml")
    assert workflow["concurrency"] == {"group": "backfill-reconcile", "cancel-in-progress": False}
    assert job(RECONCILE)["concurrency"] == {
        "group": "backfillctl-reconcile-${{ inputs.environment }}",  # not the caller's group: no deadlock
        "cancel-in-progress": False,
    }
    assert workflow[True]["schedule"] == [{"cron": "*/15 * * * *"}]
    assert steps(RECONCILE)["reconcile"] == (
        'backfillctl reconcile --once --wait-lock ${PLAN_CHECKSUM:+--plan-checksum "$PLAN_CHECKSUM"} '
        '${PR_NUMBER:+--pr-reviews "$RUNNER_TEMP/reviews.json" --pr-number "$PR_NUMBER" --pr-author "$PR_AUTHOR"}'
    )


@pytest.mark.parametrize(
    ("checksum", "pr", "args"),
    [
        ("", {}, ["reconcile", "--once", "--wait-lock"]),
        ("0123abcd", {}, ["reconcile", "--once", "--wait-lock", "--plan-checksum", "0123abcd"]),
        (
            "",
            {"PR_NUMBER": "41", "PR_AUTHOR": "alice"},
            [
                *["reconcile", "--once", "--wait-lock", "--pr-reviews", "/t/reviews.json"],
                *["--pr-number", "41", "--pr-author", "alice"],
            ],
        ),
    ],
)
def test_a_dispatch_may_pin_the_reviewed_plan(
    tmp_path: Path, checksum: str, pr: dict[str, str], args: list[str]
) -> None:
    fake(tmp_path / "bin", "backfillctl", "import json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    assert step(RECONCILE, "reconcile")["env"]["PLAN_CHECKSUM"] == "${{ inputs.plan-checksum }}"
    assert job("backfill-reconcile.yml")["with"]["plan-checksum"] == "${{ inputs.plan_checksum || '' }}"
    env = {"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "PLAN_CHECKSUM": checksum, "RUNNER_TEMP": "/t", **pr}
    done = run_step(RECONCILE, "reconcile", tmp_path, env)
    assert (done.returncode, json.loads(done.stdout)) == (0, args)


FAKE_GH_MERGED = FAKE_GH_REVIEWS.replace(
    'if path.endswith("/reviews"):',
    'if path.endswith("/pulls"):\n    print(os.environ["GH_PULLS"])\nelif path.endswith("/reviews"):',
)


@pytest.mark.skipif(shutil.which("jq") is None, reason="the pr step needs jq (preinstalled on GitHub runners)")
@pytest.mark.parametrize(
    ("pulls", "outputs"),
    [
        pytest.param(
            [
                {"number": 40, "merged_at": None, "merge_commit_sha": "abc", "user": {"login": "mallory"}},
                {"number": 41, "merged_at": "2026-11-01T11:00:00Z", "merge_commit_sha": "abc", "user": {"login": "al"}},
            ],
            "number=41\nauthor=al\n",
            id="the pull request that merged the commit",
        ),
        pytest.param(
            [{"number": 7, "merged_at": "2026-11-01T11:00:00Z", "merge_commit_sha": "other", "user": {"login": "x"}}],
            "",
            id="a commit that merged no pull request",
        ),
    ],
)
def test_the_pr_step_finds_the_merged_pull_request_and_its_reviews(
    tmp_path: Path, pulls: list[dict[str, Any]], outputs: str
) -> None:
    fake(tmp_path / "bin", "gh", FAKE_GH_MERGED)
    env = gh_env(
        tmp_path,
        [[gh_review("bob", "APPROVED")]],
        {"bob": "write"},
        GITHUB_SHA="abc",
        GITHUB_OUTPUT=str(tmp_path / "out"),
        GH_PULLS=json.dumps(pulls),
    )
    (tmp_path / "out").write_text("")
    done = run_step(RECONCILE, "pr", tmp_path, env)
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "out").read_text() == outputs
    calls = [json.loads(line) for line in (tmp_path / "gh.log").read_text().splitlines()]
    if outputs:
        assert done.stdout == ""
        assert calls == [
            ["api", "repos/o/r/commits/abc/pulls"],
            ["api", "--paginate", "--slurp", "repos/o/r/pulls/41/reviews"],
            ["api", "repos/o/r/collaborators/bob/permission", "--jq", ".permission"],
        ]
        assert json.loads((tmp_path / "reviews.json").read_text()) == [
            {**gh_review("bob", "APPROVED"), "permission": "write"}
        ]
    else:
        assert done.stdout == (
            "::warning title=backfillctl approvals::abc is no pull request's merge: specs it adds are created with "
            '"approval not recorded"\n'
        )
        assert calls == [["api", "repos/o/r/commits/abc/pulls"]]
        assert not (tmp_path / "reviews.json").exists()


def test_ci_workflow_runs_ci_run() -> None:
    assert load("ci.yml")["jobs"]["test"]["steps"][-1]["run"] == "bash .ci/run"


def test_ci_runs_the_every_line_subset_on_each_older_airflow_line() -> None:
    lines = load("ci.yml")["jobs"]["lines"]
    assert lines["strategy"]["matrix"]["airflow"] == ["3.1.8", "3.2.2"]
    assert lines["steps"][-1]["env"] == {"BACKFILLCTL_TEST_AIRFLOW_VERSION": "${{ matrix.airflow }}"}
    assert "every_line" in lines["steps"][-1]["run"]
    assert load("ci.yml")["jobs"]["test"]["steps"][-1]["env"] == {"BACKFILLCTL_TEST_LINES": ""}  # not twice


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
