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
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from controller import __version__
from controller.commands.verbs.pr_comment import read_changed
from controller.core.checks.approval import latest_decisions, parse_reviews
from controller.core.documents.secret_places import PR as PR_JOB
from controller.core.documents.secret_places import RECONCILE as RECONCILE_JOB
from controller.core.documents.secret_places import SECRETS, Place, secrets_table
from controller.core.documents.secret_places import STOP as STOP_JOB
from controller.core.render.pr_comment import MARKER

REPO = Path(__file__).resolve().parents[2]
GITHUB = REPO / ".github"
WORKFLOWS = sorted((GITHUB / "workflows").glob("*.yml"))
PINNED = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_./-]+@[0-9a-f]{40}$")
SHA_LINE = re.compile(r"^\s*(?:- )?uses: (\S+) # v\d+\.\d+\.\d+$")
PR, RECONCILE = "reusable-backfill-pr.yml", "reusable-backfill-reconcile.yml"  # the callers' one definition
STOP = "reusable-backfill-stop.yml"
CALLERS = {"backfill-pr.yml": PR, "backfill-reconcile.yml": RECONCILE, "backfill-stop.yml": STOP}


def place_of(name: str) -> Place:
    """Where the secrets table says `name` lives (exactly one row names it)."""
    (found,) = [row.place for row in SECRETS if name in row.names]
    return found


def load(name: str) -> dict[Any, Any]:
    workflow: dict[Any, Any] = yaml.safe_load((GITHUB / "workflows" / name).read_text())
    return workflow


MAIN_JOB = {RECONCILE: "reconcile"}  # a workflow of several jobs: the one `job(name)` means


def job(name: str, which: str | None = None) -> dict[str, Any]:
    jobs = load(name)["jobs"]
    if which is not None or len(jobs) > 1:
        return dict(jobs[which or MAIN_JOB[name]])
    (only,) = jobs.values()
    return dict(only)


def steps(name: str, which: str | None = None) -> dict[str, str]:
    return {step["id"]: step["run"] for step in job(name, which)["steps"] if "id" in step and "run" in step}


def step(name: str, step_id: str) -> dict[str, Any]:
    (found,) = [s for s in job(name)["steps"] if s.get("id") == step_id]
    return dict(found)


def all_steps() -> list[tuple[str, dict[str, Any]]]:
    return [(p.name, s) for p in WORKFLOWS for j in load(p.name)["jobs"].values() for s in j.get("steps", [])]


def run_step(
    name: str, step_id: str, cwd: Path, env: dict[str, str], which: str | None = None
) -> subprocess.CompletedProcess[str]:
    """A step's script the way `shell: bash` runs it on GitHub (`bash --noprofile --norc -eo pipefail`)."""
    base = {"PATH": os.environ["PATH"], "HOME": str(cwd), "GIT_CONFIG_NOSYSTEM": "1"}
    return subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", steps(name, which)[step_id]],
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
    assert len(used) == 15  # the reconcile result is handed to the pr-result job as an artifact (up and down)
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
    airflow = [  # the plan's own read-only login: repository secrets of their own names
        "secrets.BACKFILLCTL_PLAN_AIRFLOW_PASSWORD",
        "secrets.BACKFILLCTL_PLAN_AIRFLOW_TOKEN",
        "secrets.BACKFILLCTL_PLAN_AIRFLOW_URL",
        "secrets.BACKFILLCTL_PLAN_AIRFLOW_USERNAME",
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
        "evidence": sorted(["github.token", *store]),
        "reconcile": sorted([*airflow, *store, "secrets.BACKFILLCTL_AUDIT_KEY"]),
        "status": sorted(airflow + store),
        "audit": sorted([*store, "secrets.BACKFILLCTL_AUDIT_KEY"]),
    }
    presence = {k: v for k, v in step(RECONCILE, "secrets")["env"].items() if k.startswith("HAS_")}
    assert len(presence) == 5
    assert all(" != ''" in value for value in presence.values())  # whether each is set, never its value


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
    assert (install["working-directory"], install["run"]) == ("trusted", LOCKED_INSTALL)
    assert job(PR)["defaults"]["run"] == {"shell": "bash", "working-directory": "pr"}
    assert job(PR)["env"] == {"BACKFILLCTL_SPECS_DIR": "${{ inputs.specs-dir }}"}
    for step_id, script in steps(PR).items():
        if step_id != "install":  # nothing else installs or runs Python from the pull request's tree
            assert not re.search(r"\bpip\b|\bpython\b|\./|\bmake\b|\bnpm\b|\bsource\b", script), step_id
    # this repository's own check: its base branch's backfillctl plans, and reconcile runs the merged code
    assert job("backfill-pr.yml")["with"] == {
        "specs-dir": "specs",
        "backfillctl-repository": "${{ github.repository }}",
        "backfillctl-version": "${{ github.event.pull_request.base.ref }}",
        "reconcile-version": "${{ github.event.pull_request.head.sha }}",
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
    assert list(runs) == ["changes", "install", "validate", "reviews", "approvals", "plan", "versions", "comment"]
    assert runs["validate"] == 'backfillctl validate --base "origin/$BASE_REF" --format github'
    assert runs["reviews"] == REVIEWS_SCRIPT
    assert runs["approvals"] == (
        'backfillctl validate --base "origin/$BASE_REF" --pr-reviews "$RUNNER_TEMP/reviews.json" '
        '--pr-author "$PR_AUTHOR" --head-sha "$HEAD_SHA" --format github'
    )
    assert (
        'backfillctl plan --no-store --format markdown --pr-comment "$RUNNER_TEMP/changed.txt" > "$RUNNER_TEMP/plan.md"'
    ) in runs["plan"]


LOCKED_INSTALL = """\
python -m pip install --require-hashes --no-deps --only-binary=:all: -r requirements/reconcile.txt
python -m pip install --no-deps --no-build-isolation --no-index .
python -m pip check
"""
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
        "BACKFILLCTL_AIRFLOW_TOKEN": "plan-token",
    }
    for code in (1, 3, 5):  # 5: reconcile would refuse a spec of the PR; the comment step still posts plan.md
        failed = run_step(PR, "plan", pr, {**env, "EXIT": str(code)})
        assert failed.returncode == code
    assert run_step(PR, "plan", pr, {**env, "EXIT": "0"}).returncode == 0
    calls = [json.loads(line) for line in (tmp_path / "calls").read_text().splitlines()]
    assert calls == [["plan", "--no-store", "--format", "markdown", "--pr-comment", f"{tmp_path}/changed.txt"]] * 4
    assert (tmp_path / "changed.txt").read_text() == "specs/new.yaml\0"  # -z: unquoted, NUL-separated
    assert (tmp_path / "plan.md").read_text() == "partial output\n"

    no_plan = "no plan: repository secret not set: {} (Settings → Secrets and variables → Actions → Repository "
    no_plan += "secrets; this job reads no environment's secrets)"
    url = "BACKFILLCTL_PLAN_AIRFLOW_URL"
    login = "BACKFILLCTL_PLAN_AIRFLOW_TOKEN, or BACKFILLCTL_PLAN_AIRFLOW_USERNAME and BACKFILLCTL_PLAN_AIRFLOW_PASSWORD"
    for unset, missing in (
        ({"BACKFILLCTL_AIRFLOW_URL": ""}, url),
        ({"BACKFILLCTL_AIRFLOW_TOKEN": "", "BACKFILLCTL_AIRFLOW_USERNAME": "plan"}, login),
    ):
        offline = run_step(PR, "plan", pr, {**env, **unset, "EXIT": "0"})
        assert offline.returncode == 0
        assert len((tmp_path / "calls").read_text().splitlines()) == 4  # backfillctl was not run
        # a warning on the pull request (an annotation) and in the comment, never a silent green
        assert offline.stdout == f"::warning title=backfillctl plan::{no_plan.format(missing)}\n"
        assert (tmp_path / "plan.md").read_text() == (
            f"{MARKER}\n### backfillctl plan\n\n> [!WARNING]\n> **No plan:** {no_plan[9:].format(missing)}.\n>\n"
            "> The specs were validated and the approvals checked, but Airflow's dry run did not count the runs: "
            "a spec\n"
            "> that reconcile will refuse (more runs than expected, a DAG Airflow does not know) is first seen after "
            "the merge.\n"
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
    done = run_step(
        PR, "plan", pr, {**env, "BACKFILLCTL_AIRFLOW_URL": "http://airflow.invalid", "BACKFILLCTL_AIRFLOW_TOKEN": "t"}
    )
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
    env["ENVIRONMENT"] = "backfill-production"
    assert step(RECONCILE, "secrets")["env"]["ENVIRONMENT"] == "${{ inputs.environment }}"
    done = run_step(RECONCILE, "secrets", tmp_path, env)
    assert done.returncode == code
    assert done.stdout.splitlines() == [
        f"::error title=backfillctl reconcile::environment secret not set in backfill-production: {e}" for e in errors
    ]
    if code:
        assert done.stderr == (
            "Set them as environment secrets: Settings → Environments → backfill-production → Environment secrets "
            "(never as repository secrets, which every branch's workflows can read); nothing was reconciled.\n"
        )


def test_reconcile_steps_run_only_after_the_secrets_check() -> None:
    assert list(steps(RECONCILE)) == ["install", "secrets", "evidence", "reconcile", "validate", "status", "audit"]
    assert "if" not in step(RECONCILE, "reconcile")  # success(): the check passed
    assert step(RECONCILE, "validate")["if"] == "${{ !cancelled() && steps.install.outcome == 'success' }}"
    after_check = "${{ !cancelled() && steps.secrets.outcome == 'success' }}"
    for step_id in ("status", "audit"):
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
        'mapfile -t evidence < "$RUNNER_TEMP/evidence/args"\n'
        'backfillctl reconcile --once --wait-lock ${PLAN_CHECKSUM:+--plan-checksum "$PLAN_CHECKSUM"} \\\n'
        '  --result-dir "$RUNNER_TEMP/result" "${evidence[@]}"\n'
    )


@pytest.mark.parametrize(
    ("checksum", "evidence", "args"),
    [
        ("", "", ["reconcile", "--once", "--wait-lock", "--result-dir", "RESULT"]),
        (
            "0123abcd",
            "",
            ["reconcile", "--once", "--wait-lock", "--plan-checksum", "0123abcd", "--result-dir", "RESULT"],
        ),
        (
            "",
            "--evidence\n/t/evidence/pr-41.json\n--evidence-unavailable\nabc def\n",
            [
                *[
                    "reconcile",
                    "--once",
                    "--wait-lock",
                    "--result-dir",
                    "RESULT",
                    "--evidence",
                    "/t/evidence/pr-41.json",
                ],
                *["--evidence-unavailable", "abc def"],  # one argument per line, spaces and all
            ],
        ),
    ],
)
def test_reconcile_gets_the_reviewed_plan_and_each_changes_evidence(
    tmp_path: Path, checksum: str, evidence: str, args: list[str]
) -> None:
    fake(tmp_path / "bin", "backfillctl", "import json, sys\nprint(json.dumps(sys.argv[1:]))\n")
    assert step(RECONCILE, "reconcile")["env"]["PLAN_CHECKSUM"] == "${{ inputs.plan-checksum }}"
    assert job("backfill-reconcile.yml")["with"]["plan-checksum"] == "${{ inputs.plan_checksum || '' }}"
    (tmp_path / "evidence").mkdir()
    (tmp_path / "evidence" / "args").write_text(evidence)
    env = {"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "PLAN_CHECKSUM": checksum, "RUNNER_TEMP": str(tmp_path)}
    done = run_step(RECONCILE, "reconcile", tmp_path, env)
    result = str(tmp_path / "result")
    assert (done.returncode, json.loads(done.stdout)) == (0, [result if a == "RESULT" else a for a in args])


def test_the_evidence_step_runs_the_trusted_script_over_the_full_history() -> None:
    assert steps(RECONCILE)["evidence"] == (
        'bash "$GITHUB_WORKSPACE/trusted/.github/scripts/evidence" "$RUNNER_TEMP/evidence"'
    )
    checkout = next(s for s in job(RECONCILE)["steps"] if s.get("with", {}).get("path") == "repo")
    assert checkout["with"]["fetch-depth"] == 0  # what changed since the last reconciled commit needs history
    assert load(RECONCILE)["permissions"] == {"contents": "read", "pull-requests": "read"}


def test_ci_workflow_runs_ci_run() -> None:
    assert load("ci.yml")["jobs"]["test"]["steps"][-1]["run"] == "bash .ci/run"


def test_ci_runs_the_every_line_subset_on_each_older_airflow_line_and_the_preview() -> None:
    lines = load("ci.yml")["jobs"]["lines"]
    assert lines["strategy"]["matrix"]["airflow"] == ["3.1.8", "3.2.2", "3.4.0b2"]
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


@pytest.mark.parametrize(("code", "summary"), [(0, ""), (1, "invalid")])
def test_after_each_merge_main_is_validated_as_a_whole_naming_the_files(
    tmp_path: Path, code: int, summary: str
) -> None:
    """A semantic merge race (two changes valid alone) is named on the run that merged it, never swallowed."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stub = bin_dir / "backfillctl"
    stub.write_text(
        "#!/bin/sh\n"
        f'[ "$*" = "validate --format github" ] || exit 9\n'
        f"[ {code} = 0 ] && exit 0\n"
        "echo '::error file=specs/new-one.yaml,line=7,col=18::max_active_runs 4 is over the limit of 2'\n"
        "echo 'specs/new-one.yaml:7:18: $.max_active_runs: max_active_runs 4 is over the limit of 2'\n"
        "exit 1\n"
    )
    stub.chmod(0o755)
    out = tmp_path / "summary.md"
    env = {"PATH": f"{bin_dir}:{os.environ['PATH']}", "RUNNER_TEMP": str(tmp_path), "GITHUB_STEP_SUMMARY": str(out)}
    done = run_step(RECONCILE, "validate", tmp_path, env)
    assert done.returncode == code
    if not summary:
        assert not out.exists()
        return
    assert done.stdout.splitlines()[0] == (
        "::error file=specs/new-one.yaml,line=7,col=18::max_active_runs 4 is over the limit of 2"
    )
    assert out.read_text().splitlines() == [
        "### backfillctl validate: main holds invalid specs",
        "Each is Blocked alone; every other spec was reconciled. Two changes valid alone may have merged",
        "into them: fix the files, and require branches to be up to date or a merge queue (docs/ci-trust.md).",
        "```",
        "specs/new-one.yaml:7:18: $.max_active_runs: max_active_runs 4 is over the limit of 2",
        "```",
    ]


# --- runners, locked installs, the audit head, which backfillctl planned ---------------------------------------

REUSABLE = (PR, RECONCILE, STOP)
RUNS_ON = "${{ startsWith(inputs.runner, '[') && fromJSON(inputs.runner) || inputs.runner }}"


@pytest.mark.parametrize("name", REUSABLE)
def test_every_reusable_workflow_takes_its_runner_as_an_input(name: str) -> None:
    inputs = load(name)[True]["workflow_call"]["inputs"]
    assert inputs["runner"] == {
        "description": "Where the job runs, a label or a JSON list of labels (self-hosted in Airflow's network; "
        "docs/deploy.md).",
        "type": "string",
        "default": "ubuntu-latest",
    }
    assert job(name)["runs-on"] == RUNS_ON
    assert "ubuntu-latest" not in json.dumps(load(name)["jobs"])


@pytest.mark.parametrize("name", REUSABLE)
def test_every_reusable_workflow_installs_from_the_hash_lock_and_resolves_nothing(name: str) -> None:
    install = step(name, "install")
    assert (install["working-directory"], install["run"]) == ("trusted", LOCKED_INSTALL)
    (python,) = [s for s in job(name)["steps"] if s.get("uses", "").startswith("actions/setup-python@")]
    assert python["with"] == {
        "python-version": "3.11",  # the lock's interpreter (scripts/lock)
        "cache": "${{ inputs.pip-cache && 'pip' || '' }}",
        "cache-dependency-path": "trusted/requirements/reconcile.txt",
    }
    every_run = " ".join(s.get("run", "") for s in job(name)["steps"])
    assert every_run.count("pip install") == 2  # no other install anywhere in the job


def lock_lines() -> dict[str, tuple[str, list[str]]]:
    """name → (version, hashes) of requirements/reconcile.txt."""
    text = (REPO / "requirements" / "reconcile.txt").read_text().replace("\\\n", " ")
    found = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        requirement, *hashes = line.split()
        name, version = requirement.split("==")
        found[name] = (version, [h.removeprefix("--hash=sha256:") for h in hashes])
    return found


def test_the_lock_pins_every_dependency_with_hashes_within_pyprojects_ranges() -> None:
    lock = lock_lines()
    assert all(re.fullmatch(r"[0-9a-f]{64}", h) for _, hashes in lock.values() for h in hashes)
    assert all(hashes for _, hashes in lock.values())
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    wanted = [
        *project["project"]["dependencies"],
        *project["project"]["optional-dependencies"]["postgres"],
        *project["build-system"]["requires"],  # the workflows build backfillctl with --no-build-isolation
    ]
    for text in wanted:
        requirement = Requirement(text)
        version, _ = lock[canonicalize_name(requirement.name)]
        assert requirement.specifier.contains(version), (text, version)
    assert "airflow-backfill-controller" not in lock  # itself: the checkout at its commit


@pytest.mark.slow
def test_the_install_step_installs_from_the_lock_alone(tmp_path: Path) -> None:
    """The reconcile job's own install step, run in a fresh virtualenv against this checkout's lock: it installs
    with --require-hashes (a wrong hash fails it), and the result runs backfillctl with every dependency met."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    trusted = tmp_path / "trusted"
    git(tmp_path, "clone", "-q", "--no-hardlinks", str(REPO), str(trusted))
    (trusted / "requirements" / "reconcile.txt").write_text((REPO / "requirements" / "reconcile.txt").read_text())
    env = {"PATH": f"{venv / 'bin'}:{os.environ['PATH']}", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
    env |= {k: v for k, v in os.environ.items() if k.startswith("PIP_")}
    done = run_step(RECONCILE, "install", trusted, env)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "No broken requirements found."
    version = subprocess.run(
        [str(venv / "bin" / "backfillctl"), "--version"], capture_output=True, text=True, check=False
    )
    assert version.stdout == f"backfillctl {__version__}\n"
    record = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import controller._build as b; print(b.COMMIT)"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert record.stdout.strip() == git(trusted, "rev-parse", "HEAD").strip()  # init pins what the job runs

    lock = trusted / "requirements" / "reconcile.txt"  # one hash changed: pip refuses, nothing installed
    text = lock.read_text()
    name = next(iter(lock_lines()))
    _, (first, *_) = lock_lines()[name]
    lock.write_text(text.replace(first, "0" * 64))
    subprocess.run([str(venv / "bin" / "python"), "-m", "pip", "uninstall", "-qy", name], check=True)
    tampered = run_step(RECONCILE, "install", trusted, env)
    assert tampered.returncode == 1
    assert "THESE PACKAGES DO NOT MATCH THE HASHES FROM THE REQUIREMENTS FILE" in tampered.stderr


@pytest.mark.parametrize(("code", "verdict"), [(0, "OK: 3 events, chain intact; head seq 3 hash abc"), (1, "FORGED")])
def test_the_audit_step_puts_the_chains_head_in_the_job_summary(tmp_path: Path, code: int, verdict: str) -> None:
    fake(tmp_path / "bin", "backfillctl", f"import sys\nprint({verdict!r})\nsys.exit({code})\n")
    summary = tmp_path / "summary.md"
    env = {"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "RUNNER_TEMP": str(tmp_path)}
    done = run_step(RECONCILE, "audit", tmp_path, {**env, "GITHUB_STEP_SUMMARY": str(summary)})
    assert (done.returncode, done.stdout) == (code, f"{verdict}\n")  # a broken chain fails the run
    assert summary.read_text() == f"### backfillctl audit verify\n```\n{verdict}\n```\n"
    uploaded = [s["with"] for _, s in all_steps() if "upload-artifact" in s.get("uses", "")]
    assert uploaded == [  # the audit log is never one: only the pass's result for the pull requests, for a day
        {"name": "backfillctl-result", "path": "${{ runner.temp }}/result", "retention-days": 1}
    ]


OLD, NEW = "a" * 40, "b" * 40


@pytest.mark.parametrize(
    ("reconcile_caller", "given", "note"),
    [
        pytest.param(f"uses: acme/b/.github/workflows/{RECONCILE}@{OLD} # backfillctl 0.1.0\n", "", None, id="same"),
        pytest.param(
            f"uses: acme/b/.github/workflows/{RECONCILE}@{NEW} # backfillctl 0.2.0\n",
            "",
            f"planned by backfillctl 0.1.0 ({OLD[:12]}); reconcile runs backfillctl 0.2.0 ({NEW[:12]}) after the merge",
            id="a bump of the reconcile pin",
        ),
        pytest.param(
            f"uses: acme/b/.github/workflows/{RECONCILE}@{NEW}\n",
            "",
            f"planned by backfillctl 0.1.0 ({OLD[:12]}); reconcile runs ({NEW[:12]}) after the merge",
            id="a pin without its version",
        ),
        pytest.param(
            f"uses: ./.github/workflows/{RECONCILE}\n",
            NEW,
            f"planned by backfillctl 0.1.0 ({OLD[:12]}); reconcile runs ({NEW[:12]}) after the merge",
            id="this repository: the merged commit",
        ),
        pytest.param(f"uses: acme/b/.github/workflows/{RECONCILE}@v1\n", "", None, id="no SHA pin: not known"),
    ],
)
def test_the_comment_says_when_reconcile_runs_another_backfillctl(
    tmp_path: Path, reconcile_caller: str, given: str, note: str | None
) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "trusted").mkdir(parents=True)
    fake(tmp_path / "bin", "git", f"print({OLD!r})\n")  # the trusted checkout's HEAD
    fake(tmp_path / "bin", "backfillctl", "print('backfillctl 0.1.0')\n")
    pr = workspace / "pr"
    (pr / ".github" / "workflows").mkdir(parents=True)
    (pr / ".github" / "workflows" / "backfill-reconcile.yml").write_text(f"jobs:\n  backfill:\n    {reconcile_caller}")
    plan = f"{MARKER}\n### backfillctl plan\n"
    (tmp_path / "plan.md").write_text(plan)
    env = {
        "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
        "GITHUB_WORKSPACE": str(workspace),
        "RUNNER_TEMP": str(tmp_path),
        "RECONCILE_VERSION": given,
    }
    done = run_step(PR, "versions", pr, env)
    assert done.returncode == 0, done.stderr
    if note is None:
        assert (done.stdout, (tmp_path / "plan.md").read_text()) == ("", plan)
        return
    assert done.stdout == f"::notice title=backfillctl plan::{note}: its plan may differ (docs/upgrade.md)\n"
    assert (tmp_path / "plan.md").read_text() == (
        f"{plan}\n> [!NOTE]\n> **{note}**: its plan may differ from this one (backfillctl's docs/upgrade.md).\n"
    )


def test_a_comment_at_githubs_limit_gets_the_note_in_the_log_only(tmp_path: Path) -> None:
    workspace = tmp_path / "workspace"
    (workspace / "trusted").mkdir(parents=True)
    (workspace / "pr").mkdir()
    fake(tmp_path / "bin", "git", f"print({OLD!r})\n")
    fake(tmp_path / "bin", "backfillctl", "print('backfillctl 0.1.0')\n")
    full = f"{MARKER}\n" + "x" * 65_400 + "\n"
    (tmp_path / "plan.md").write_text(full)
    env = {"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "GITHUB_WORKSPACE": str(workspace)}
    done = run_step(PR, "versions", workspace / "pr", {**env, "RUNNER_TEMP": str(tmp_path), "RECONCILE_VERSION": NEW})
    assert done.returncode == 0
    assert done.stdout.startswith("::notice title=backfillctl plan::planned by backfillctl 0.1.0")
    assert (tmp_path / "plan.md").read_text() == full


# --- one story for secrets --------------------------------------------------------------------------------------


def secret_messages(tmp_path: Path) -> list[str]:
    """Every line the workflows print about a secret that is not set: their scripts run with none set."""
    reconcile = run_step(RECONCILE, "secrets", tmp_path, {"ENVIRONMENT": "backfill-production"})
    fake(tmp_path / "bin", "git", "")
    env = {"PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}", "RUNNER_TEMP": str(tmp_path), "BASE_REF": "main"}
    plan = run_step(PR, "plan", tmp_path, {**env, "BACKFILLCTL_SPECS_DIR": "specs"})
    assert (reconcile.returncode, plan.returncode) == (1, 0)
    printed = [reconcile.stdout, reconcile.stderr, plan.stdout, (tmp_path / "plan.md").read_text()]
    return [line for text in printed for line in text.splitlines() if "secret" in line]


def test_every_message_about_a_secret_names_its_place(tmp_path: Path) -> None:
    messages = secret_messages(tmp_path)
    assert len(messages) == 6  # three missing reconcile secrets, the hint, the PR warning and its comment
    for line in messages:
        named = set(re.findall(r"BACKFILLCTL_[A-Z_]+", line))
        places = {place_of(secret) for secret in named} or {Place.environment}  # the hint names none
        assert len(places) == 1, line
        (place,) = places
        assert f"{place} secret" in line, line
        other = Place.environment if place is Place.repository else Place.repository
        assert f"{other} secret not set" not in line, line
        assert f"Set them as {other} secrets" not in line, line


def test_the_steps_that_read_each_secret_are_the_tables() -> None:
    workflows = {PR_JOB: PR, RECONCILE_JOB: RECONCILE, STOP_JOB: STOP}
    read: dict[tuple[str, str], set[str]] = {}
    for job_name, workflow in workflows.items():
        for s in job(workflow)["steps"]:
            for key, value in s.get("env", {}).items():
                secret = re.fullmatch(r"\$\{\{ secrets\.([A-Z_]+) }}", str(value))
                if secret and not key.startswith("HAS_"):
                    read.setdefault((job_name, s["id"]), set()).add(secret.group(1))
    table: dict[tuple[str, str], set[str]] = {}
    for row in SECRETS:
        for job_name, step_ids in row.read_by:
            for step_id in step_ids:
                table.setdefault((job_name, step_id), set()).update(row.names)
    assert read == table


def test_least_privilege_carries_the_one_table() -> None:
    assert secrets_table() in (REPO / "docs" / "least-privilege.md").read_text()


def test_the_stop_job_asks_for_its_oidc_token_only_to_stop() -> None:
    granted = {"contents": "read", "id-token": "write"}
    assert job(STOP)["permissions"] == granted  # the job's token proves the stop_workflow made the stop
    assert job("backfill-stop.yml")["permissions"] == granted  # a caller must grant what the called job asks
    script = steps(STOP)["stop"]
    fetch = script.index('"$ACTIONS_ID_TOKEN_REQUEST_URL&audience=backfillctl"')
    assert script.index('if [ "$LIFT" != true ]') < fetch < script.index('echo "::add-mask::$BACKFILLCTL_OIDC_TOKEN"')
    assert "BACKFILLCTL_OIDC_TOKEN" not in json.dumps(step(STOP, "stop").get("env", {}))  # never a step's input


# --- the result of a reconcile reaches the merged pull requests ------------------------------------------------------


def test_only_the_pr_result_job_may_write_to_pull_requests_and_it_holds_no_secret() -> None:
    workflow = load(RECONCILE)
    assert workflow["permissions"] == {"contents": "read", "pull-requests": "read"}
    assert list(workflow["jobs"]) == ["reconcile", "pr-result"]
    assert "permissions" not in job(RECONCILE)  # the reconcile job, with the secrets, reads only
    posting = job(RECONCILE, "pr-result")
    assert posting["permissions"] == {"contents": "read", "pull-requests": "write"}
    assert posting["needs"] == "reconcile"
    assert posting["if"] == "${{ !cancelled() && needs.reconcile.outputs.result == 'success' }}"
    assert "environment" not in posting  # no environment: none of its secrets can reach this job
    assert re.findall(r"secrets\.[A-Za-z_]+|github\.token", json.dumps(posting)) == ["github.token"]  # the post
    assert posting["runs-on"] == RUNS_ON
    assert job(RECONCILE)["outputs"] == {"result": "${{ steps.result.outcome }}"}
    (download,) = [s for s in posting["steps"] if "download-artifact" in s.get("uses", "")]
    assert download["with"] == {"name": "backfillctl-result", "path": "result"}
    caller = job("backfill-reconcile.yml")
    assert caller["permissions"] == {"contents": "read", "pull-requests": "write"}  # granted to the call, used by one


RESULT = "<!-- backfillctl-reconcile-result -->"


@pytest.mark.skipif(shutil.which("jq") is None, reason="the post step needs jq (preinstalled on GitHub runners)")
@pytest.mark.parametrize(
    ("pages", "expected"),
    [
        pytest.param([[]], ["POST", "repos/o/r/issues/41/comments"], id="posts one when there is none"),
        pytest.param(
            [
                [
                    {"id": 5, "user": MALLORY, "body": f"{RESULT}\nplanted"},
                    {"id": 6, "user": BOT, "body": f"{RESULT}\nold"},
                ]
            ],
            ["PATCH", "repos/o/r/issues/comments/6"],
            id="edits its own in place when the state changed, never a planted one",
        ),
        pytest.param(
            [[{"id": 6, "user": BOT, "body": f"{RESULT}\n| `a` | created |\n"}]],
            None,
            id="leaves it alone when nothing changed",
        ),
    ],
)
def test_the_result_is_posted_on_its_pull_request_only_when_it_changed(
    tmp_path: Path, pages: list[list[dict[str, Any]]], expected: list[str] | None
) -> None:
    fake(tmp_path / "bin", "gh", FAKE_GH)
    (tmp_path / "result").mkdir()
    (tmp_path / "result" / "pr-41.md").write_text(f"{RESULT}\n| `a` | created |\n")
    env = {
        "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
        "GITHUB_REPOSITORY": "o/r",
        "GH_LOG": str(tmp_path / "gh.log"),
        "GH_PAGES": json.dumps(pages),
    }
    done = run_step(RECONCILE, "post", tmp_path, env, which="pr-result")
    assert done.returncode == 0, done.stderr
    calls = [json.loads(line) for line in (tmp_path / "gh.log").read_text().splitlines()]
    assert calls[0]["args"][:3] == ["api", "--paginate", "repos/o/r/issues/41/comments"]
    if expected is None:
        assert (len(calls), done.stdout) == (1, "#41: unchanged\n")
        return
    (_listed, written) = calls
    assert written == {
        "args": ["api", "-X", *expected, "--input", "comment.json"],
        "input": {"body": f"{RESULT}\n| `a` | created |\n"},
    }


def test_a_result_file_not_named_for_a_pull_request_fails_the_job(tmp_path: Path) -> None:
    (tmp_path / "result").mkdir()
    (tmp_path / "result" / "pr-4x1.md").write_text("x")
    done = run_step(RECONCILE, "post", tmp_path, {"GITHUB_REPOSITORY": "o/r"}, which="pr-result")
    assert (done.returncode, done.stdout) == (1, "::error::not a pull request's result file: result/pr-4x1.md\n")


def test_the_marker_is_the_renderers() -> None:
    from controller.core.render.pr_result import MARKER as RESULT_MARKER  # noqa: PLC0415

    assert RESULT_MARKER == RESULT
    assert f'startswith("{RESULT}")' in steps(RECONCILE, "pr-result")["post"]
