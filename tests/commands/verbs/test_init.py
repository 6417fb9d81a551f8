"""`backfillctl init DIR`: a specs repository that validates as it is, whose workflows call this repository's
reusable workflows at the pinned ref; it never overwrites a file without --force."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import controller
from controller import __version__
from controller.cli import main
from controller.core.documents.starter import EXAMPLE_SPEC, PLACEHOLDER_REPO

REPO = Path(__file__).resolve().parents[3]
FILES = [
    "specs/policy.yaml",
    f"specs/{EXAMPLE_SPEC}.yaml",
    ".pre-commit-config.yaml",
    ".github/workflows/backfill-pr.yml",
    ".github/workflows/backfill-reconcile.yml",
    ".github/workflows/backfill-stop.yml",
    ".github/CODEOWNERS",
    "README.md",
    ".gitignore",
]
NOTE = (
    f"note: the workflows and the pre-commit hook call {PLACEHOLDER_REPO}, a placeholder: run init again with "
    "--workflows-repo OWNER/REPO --force, or replace it in those files\n"
)


def init(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["init", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_init_writes_a_repository_that_validates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "team-backfills"
    code, out, err = init(capsys, str(target), "--workflows-repo", "acme/backfillctl", "--ref", "v0.1.0")
    assert (code, err.startswith("warning: --ref v0.1.0 is not a full commit SHA")) == (0, True)
    assert out == (
        "".join(f"wrote {target / f}\n" for f in FILES)
        + "pinned to v0.1.0, as given (not a full commit SHA: a tag or a branch can be moved to other code); to "
        'upgrade: README.md, "Upgrading backfillctl"\n'
        + f"next: cd {target} && backfillctl validate; then delete the example spec before the first merge\n"
    )
    assert sorted(str(p.relative_to(target)) for p in target.rglob("*") if p.is_file()) == sorted(FILES)
    monkeypatch.chdir(target)
    monkeypatch.delenv("BACKFILLCTL_SPECS_DIR", raising=False)
    assert main(["validate"]) == 0
    assert capsys.readouterr().out == "OK: 1 spec valid (2 files including the policy specs/policy.yaml, 0 warnings).\n"


def test_the_workflows_call_the_reusable_ones_at_the_pinned_ref(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert init(capsys, str(tmp_path), "--workflows-repo", "acme/backfillctl", "--ref", "0" * 40)[0] == 0
    workflows = sorted((tmp_path / ".github" / "workflows").glob("*.yml"))
    checker = Path(sys.executable).parent / "check-jsonschema"
    for schema in ("vendor.github-workflows", "custom.github-workflows-require-timeout"):
        done = subprocess.run(
            [str(checker), "--builtin-schema", schema, *map(str, workflows)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert (done.returncode, done.stdout.strip()) == (0, "ok -- validation done"), done.stdout + done.stderr
    called = {}
    for path in workflows:
        (job,) = yaml.safe_load(path.read_text())["jobs"].values()
        called[path.name] = job
        assert job["with"]["backfillctl-repository"] == "acme/backfillctl"
        assert job["with"]["backfillctl-version"] == "0" * 40
        assert job["with"]["specs-dir"] == "specs"
    assert (
        called["backfill-pr.yml"]["uses"] == f"acme/backfillctl/.github/workflows/reusable-backfill-pr.yml@{'0' * 40}"
    )
    assert called["backfill-reconcile.yml"]["uses"] == (
        f"acme/backfillctl/.github/workflows/reusable-backfill-reconcile.yml@{'0' * 40}"
    )
    assert called["backfill-reconcile.yml"]["with"]["environment"] == "backfill-production"
    assert called["backfill-stop.yml"]["uses"] == (
        f"acme/backfillctl/.github/workflows/reusable-backfill-stop.yml@{'0' * 40}"
    )
    stop = yaml.safe_load((tmp_path / ".github" / "workflows" / "backfill-stop.yml").read_text())
    assert list(stop[True]) == ["workflow_dispatch"]  # by hand only: an owner's emergency stop
    assert {
        k: v for k, v in called["backfill-stop.yml"]["with"].items() if k in stop[True]["workflow_dispatch"]["inputs"]
    } == {
        "downstream": "${{ inputs.downstream }}",
        "reason": "${{ inputs.reason }}",
        "expires": "${{ inputs.expires }}",
        "lift": "${{ inputs.lift }}",
    }
    assert called["backfill-stop.yml"]["with"]["environment"] == "backfill-production"
    assert stop["permissions"] == {"contents": "read", "id-token": "write"}  # the stop job's OIDC token
    for job in called.values():  # each called file exists here, and declares what the caller passes
        own = yaml.safe_load((REPO / job["uses"].split("/", 2)[2].split("@")[0]).read_text())
        assert set(job["secrets"]) == set(own[True]["workflow_call"]["secrets"])
        inputs = own[True]["workflow_call"]["inputs"]
        assert set(job["with"]) <= set(inputs)
        assert {name for name, spec in inputs.items() if spec.get("required")} <= set(job["with"])
        assert all(v == f"${{{{ secrets.{k} }}}}" for k, v in job["secrets"].items())
    (hook_repo,) = yaml.safe_load((tmp_path / ".pre-commit-config.yaml").read_text())["repos"]
    assert hook_repo == {
        "repo": "https://github.com/acme/backfillctl",
        "rev": "0" * 40,
        "hooks": [{"id": "backfillctl-validate"}],
    }


def test_codeowners_names_the_approvers_and_downstream_owners(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert init(capsys, str(tmp_path))[0] == 0
    policy = yaml.safe_load((tmp_path / "specs" / "policy.yaml").read_text())
    example = yaml.safe_load((tmp_path / "specs" / f"{EXAMPLE_SPEC}.yaml").read_text())
    owners = {o for budget in policy["downstream"].values() for o in budget["owners"]} | set(example["approvers"])
    rules = [line.split() for line in (tmp_path / ".github" / "CODEOWNERS").read_text().splitlines() if line[:1] != "#"]
    assert rules[0] == ["/specs/", *sorted(f"@{o}" for o in owners)]
    assert [r[0] for r in rules] == ["/specs/", "/specs/policy.yaml", "/.github/"]


def test_the_default_pins_the_commit_of_this_checkout_with_its_version_and_names_the_placeholder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An editable install (this test run) has no build record: init pins the HEAD of the checkout it runs from."""
    head = git_head(REPO)
    code, out, _ = init(capsys, str(tmp_path))
    assert code == 0
    assert NOTE in out
    assert (
        f"pinned to {head} (backfillctl {__version__}), from the HEAD of the checkout {REPO}; {PLACEHOLDER_REPO} "
        'must hold that commit; to upgrade: README.md, "Upgrading backfillctl"\n'
    ) in out
    (hook_repo,) = yaml.safe_load((tmp_path / ".pre-commit-config.yaml").read_text())["repos"]
    assert hook_repo["rev"] == head
    assert f'    rev: "{head}" # backfillctl {__version__}\n' in (tmp_path / ".pre-commit-config.yaml").read_text()
    text = (tmp_path / ".github" / "workflows" / "backfill-pr.yml").read_text()
    assert (
        f"    uses: {PLACEHOLDER_REPO}/.github/workflows/reusable-backfill-pr.yml@{head} # backfillctl {__version__}\n"
        in text
    )
    assert f'      backfillctl-version: "{head}" # backfillctl {__version__}\n' in text


def git_head(path: Path) -> str:
    return subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=path, capture_output=True, text=True, check=True
    ).stdout.strip()


def test_init_never_overwrites_without_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "README.md").write_text("ours\n")
    (tmp_path / ".github").mkdir()
    (tmp_path / ".github" / "CODEOWNERS").write_text("* @us\n")
    code, out, err = init(capsys, str(tmp_path), "--workflows-repo", "acme/backfillctl")
    assert (code, out) == (2, "")
    assert err == (
        "error: not written: 2 file(s) exist already: "
        f"{tmp_path}/.github/CODEOWNERS, {tmp_path}/README.md\n"
        "  hint: nothing was changed; pass --force to overwrite them, or init into an empty folder\n"
    )
    assert sorted(p.name for p in tmp_path.rglob("*")) == [".github", "CODEOWNERS", "README.md"]
    assert (tmp_path / "README.md").read_text() == "ours\n"

    code, out, _ = init(capsys, str(tmp_path), "--workflows-repo", "acme/backfillctl", "--force")
    assert code == 0
    verbs = {line.split()[1]: line.split()[0] for line in out.splitlines() if line.startswith(("wrote", "overwrote"))}
    assert verbs == {
        str(tmp_path / f): "overwrote" if f in ("README.md", ".github/CODEOWNERS") else "wrote" for f in FILES
    }
    assert (tmp_path / "README.md").read_text().startswith("# Backfills\n")


def test_force_never_follows_a_link(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    outside = tmp_path / "outside.md"
    outside.write_text("keep\n")
    target = tmp_path / "repo"
    target.mkdir()
    (target / "README.md").symlink_to(outside)
    code, out, err = init(capsys, str(target), "--force")
    assert (code, out) == (2, "")
    assert err == (
        f"error: not written: {target}/README.md is not a regular file\n"
        "  hint: move it away and run init again; nothing was changed\n"
    )
    assert outside.read_text() == "keep\n"
    assert [p.name for p in target.iterdir()] == ["README.md"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workflows-repo", "acme"], "--workflows-repo: 'acme' is not OWNER/REPO"),
        (["--workflows-repo", "acme/x\nname: evil"], "--workflows-repo: 'acme/x\\nname: evil' is not OWNER/REPO"),
        (["--ref", "v1 # comment"], "--ref: 'v1 # comment' is not a tag, branch or commit SHA"),
        (["--ref", "a/../b"], "--ref: 'a/../b' is not a tag, branch or commit SHA"),
        (["--environment", "prod: x"], "--environment: 'prod: x' is not an environment name"),
    ],
)
def test_values_that_would_break_the_files_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], message: str
) -> None:
    option = args[0]
    code, out, err = init(capsys, str(tmp_path / "repo"), *args)
    assert (code, out) == (2, "")
    assert err == f"error: {message}\n  hint: `backfillctl init --help` says what {option} takes\n"
    assert not (tmp_path / "repo").exists()


# --- shell completion ---------------------------------------------------------------------------------------


def test_help_offers_shell_completion(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "--install-completion" in out
    assert "--show-completion" in out


def test_completion_completes_commands_and_options(tmp_path: Path) -> None:
    backfillctl = Path(sys.executable).parent / "backfillctl"
    for words, cword, expected in (
        ("backfillctl va", "1", ["validate"]),
        ("backfillctl reconcile --pr-", "2", ["--pr-reviews", "--pr-number", "--pr-author"]),
    ):
        env = {"PATH": "/usr/bin:/bin", "_BACKFILLCTL_COMPLETE": "complete_bash", "COMP_WORDS": words}
        done = subprocess.run(
            [str(backfillctl)],
            cwd=tmp_path,
            env={**env, "COMP_CWORD": cword},
            capture_output=True,
            text=True,
            check=False,
        )
        assert (done.returncode, done.stdout.split()) == (0, expected), done.stderr


# what the README's placeholders stand for in the test's repository (the example spec's DAG and approver)
FILLED = {
    "NAME": "orders-2025-01-rerun",
    "DAG": "orders_daily",
    "DAG_ID": "orders_daily",
    "LOGIN": "data-platform-lead",
}


def readme_new_command(readme: str) -> list[str]:
    """The `backfillctl new …` command of the team README, as a shell reads it (continuation lines joined)."""
    start = readme.index("backfillctl new ")
    line = re.split(r"[`\n]", readme[start:].replace("\\\n", " "), maxsplit=1)[0]
    return shlex.split(line)


def test_the_readmes_new_command_works_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert init(capsys, str(tmp_path), "--workflows-repo", "acme/backfillctl")[0] == 0
    words = readme_new_command((tmp_path / "README.md").read_text())
    assert words[:2] == ["backfillctl", "new"]
    args = [FILLED.get(word, word) for word in words[2:]]
    assert [word for word in args if re.fullmatch(r"[A-Z_]+", word)] == []  # every placeholder filled in
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BACKFILLCTL_SPECS_DIR", raising=False)
    monkeypatch.setenv("BACKFILLCTL_ACTOR", "alice")  # the requester; no Airflow (conftest unsets it)
    assert (main(["new", *args]), capsys.readouterr().out) == (
        0,
        "wrote specs/orders-2025-01-rerun.yaml\nrequested_by: alice (from BACKFILLCTL_ACTOR; --requested-by says "
        "otherwise)\nnext: `backfillctl plan`, then open a pull request with the file\n",
    )
    assert main(["validate"]) == 0
    assert capsys.readouterr().out == (
        "OK: 2 specs valid (3 files including the policy specs/policy.yaml, 0 warnings).\n"
    )


# --- the runner, the pin, .gitignore --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("runner", "written", "labels"),
    [
        ("ubuntu-latest", "'ubuntu-latest'", "ubuntu-latest"),
        ("airflow-vpn", "'airflow-vpn'", "airflow-vpn"),
        ('["self-hosted", "linux", "airflow-vpn"]', """'["self-hosted","linux","airflow-vpn"]'""", None),
    ],
)
def test_the_runner_goes_into_every_caller(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], runner: str, written: str, labels: str | None
) -> None:
    assert init(capsys, str(tmp_path), "--workflows-repo", "acme/backfillctl", "--runner", runner)[0] == 0
    for name in ("backfill-pr.yml", "backfill-reconcile.yml", "backfill-stop.yml"):
        text = (tmp_path / ".github" / "workflows" / name).read_text()
        assert f"      runner: {written} # a label, or a JSON list of labels: it must reach Airflow's API" in text
        (job,) = yaml.safe_load(text)["jobs"].values()
        value = job["with"]["runner"]  # a string input: the reusable workflows read a list with fromJSON
        assert value == (labels if labels is not None else '["self-hosted","linux","airflow-vpn"]')


@pytest.mark.parametrize(
    "runner", ["ubuntu latest", "it's", "[]", '["ok", 1]', '{"group": "g"}', "[not json", '["a b"]', "-x"]
)
def test_a_runner_that_is_no_label_or_list_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], runner: str
) -> None:
    code, out, err = init(capsys, str(tmp_path / "repo"), "--runner", runner)
    assert (code, out) == (2, "")
    assert err == (
        f"error: --runner: {runner!r} is not a runner label or a JSON list of labels\n"
        "  hint: `backfillctl init --help` says what --runner takes\n"
    )
    assert not (tmp_path / "repo").exists()


def test_the_local_store_is_never_committed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The walk-through's `git add -A` after a reconcile on the laptop leaves the SQLite store out."""
    assert init(capsys, str(tmp_path), "--workflows-repo", "acme/backfillctl")[0] == 0
    assert (tmp_path / ".gitignore").read_text() == (
        "# backfillctl's local store (a SQLite file when BACKFILLCTL_STORE_URL is not set): never committed\n"
        ".backfillctl/\n"
    )
    (tmp_path / ".backfillctl").mkdir()
    (tmp_path / ".backfillctl" / "state.db").write_bytes(b"SQLite format 3\x00")
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "GIT_CONFIG_NOSYSTEM": "1"}
    for command in (["git", "init", "-q"], ["git", "add", "-A"]):
        subprocess.run(command, cwd=tmp_path, env=env, check=True)
    staged = subprocess.run(
        ["git", "diff", "--cached", "--name-only"], cwd=tmp_path, env=env, capture_output=True, check=True
    )
    assert sorted(staged.stdout.decode().split()) == sorted(FILES)


class Record:
    """controller/_build.py as the build hook writes it (hatch_build.py)."""

    COMMIT = "1" * 40
    DIRTY = False


def test_an_installed_package_pins_the_commit_it_was_built_from(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "controller._build", Record)
    code, out, _ = init(capsys, str(tmp_path), "--workflows-repo", "acme/backfillctl")
    assert code == 0
    assert (
        f"pinned to {'1' * 40} (backfillctl {__version__}), from the package (recorded when it was built); "
        'acme/backfillctl must hold that commit; to upgrade: README.md, "Upgrading backfillctl"\n'
    ) in out
    (job,) = yaml.safe_load((tmp_path / ".github" / "workflows" / "backfill-reconcile.yml").read_text())[
        "jobs"
    ].values()
    assert job["uses"] == f"acme/backfillctl/.github/workflows/reusable-backfill-reconcile.yml@{'1' * 40}"
    monkeypatch.setattr(Record, "DIRTY", True)
    code, out, _ = init(capsys, str(tmp_path / "again"), "--workflows-repo", "acme/backfillctl")
    assert ", built with uncommitted changes: that commit is not all of the code you ran; " in out


def test_without_a_build_record_or_a_checkout_init_says_how_to_pin(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A wheel built outside git: no record, and its site-packages is no checkout. --ref is the way out."""
    site = tmp_path / "site-packages" / "controller"
    site.mkdir(parents=True)
    monkeypatch.setattr(controller, "__file__", str(site / "__init__.py"))
    code, out, err = init(capsys, str(tmp_path / "repo"), "--workflows-repo", "acme/backfillctl")
    assert (code, out) == (2, "")
    assert err == (
        f"error: cannot pin the workflows: this backfillctl {__version__} does not know the commit it was built from "
        "(a wheel built outside git, or a copy without .git)\n"
        "  hint: pass --ref with the full commit SHA of backfillctl that your workflows should run (`git rev-parse "
        "HEAD` in its clone), or install backfillctl from git or from the wheel scripts/release builds\n"
    )
    assert not (tmp_path / "repo").exists()
    assert init(capsys, str(tmp_path / "repo"), "--workflows-repo", "acme/backfillctl", "--ref", "2" * 40)[0] == 0


def test_init_never_writes_through_a_link_out_of_its_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target, elsewhere = tmp_path / "repo", tmp_path / "elsewhere"
    target.mkdir()
    elsewhere.mkdir()
    (target / ".github").symlink_to(elsewhere, target_is_directory=True)
    args = ["init", str(target), "--workflows-repo", "acme/backfillctl", "--ref", "a" * 40]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: not written: {target}/.github/")
    assert "leads outside" in err
    assert list(elsewhere.iterdir()) == []
    assert not (target / "specs").exists()  # nothing at all was written


@pytest.mark.parametrize("repo", ["../..", "acme/..", "acme/.", "-acme/x", "acme/x/y", "ac me/x"])
def test_init_refuses_a_workflows_repo_that_is_no_owner_name(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], repo: str
) -> None:
    assert main(["init", str(tmp_path / "r"), "--workflows-repo", repo, "--ref", "a" * 40]) == 2
    assert capsys.readouterr().err.startswith(f"error: --workflows-repo: {repo!r} is not OWNER/REPO\n")
    assert not (tmp_path / "r").exists()


def test_init_warns_when_the_ref_is_no_full_commit_sha(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["init", str(tmp_path / "r"), "--workflows-repo", "acme/backfillctl", "--ref", "v1.2.3"]) == 0
    assert capsys.readouterr().err == (
        "warning: --ref v1.2.3 is not a full commit SHA: whoever can move it decides what runs with your production "
        "secrets; pin a commit (`git rev-parse v1.2.3` in backfillctl's clone)\n"
    )
