"""The package works installed: the sdist and the wheel built from this tree with `python -m build` (the sdist
carries the schemas; the wheel is built from it), the wheel installed into a fresh virtualenv outside the
repository (its dependencies from the package index), runs `--version`, `init`, `validate` and `plan` there
with no checkout on its path. One version, in one place: controller/__init__.py, the wheel's name, the
changelog's latest release and the comment beside the commit `init` pins."""

from __future__ import annotations

import os
import re
import secrets
import shutil
import subprocess
import sys
import tarfile
import zipfile
from datetime import date, timedelta
from pathlib import Path

import pytest
import yaml

from controller import __version__
from controller.core.documents.starter import StarterOptions, starter_files

REPO = Path(__file__).resolve().parents[2]
USES = re.compile(
    r"^\s*uses: (\S+)(?: # backfillctl \S+)?$", re.MULTILINE
)  # a caller's job calling a reusable workflow
# days of its own on every run (an Airflow kept from an earlier session has run others)
FIRST = date(2004, 1, 1) + timedelta(days=3 * secrets.randbelow(600))
LAST = FIRST + timedelta(days=2)
SPEC = f"""version: 1
name: packaged-demo
dag_id: demo_daily
from_date: "{FIRST}"
to_date: "{LAST}"
reprocess_behavior: none
max_active_runs: 1
expected_runs: 3
ticket: CHG-7
reason: The installed wheel plans against the real Airflow.
requested_by: etl-oncall
approvers: [data-platform-lead]
"""


def run(command: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=300)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the sdist, the wheel) as a release builds them: `python -m build`, the wheel made from the sdist."""
    base = tmp_path_factory.mktemp("dist")
    assert not base.is_relative_to(REPO)
    made = run([sys.executable, "-m", "build", "--outdir", str(base), str(REPO)], base)
    assert made.returncode == 0, made.stdout[-3000:] + made.stderr[-3000:]
    (sdist,) = base.glob("*.tar.gz")
    (wheel,) = base.glob("*.whl")
    return sdist, wheel


@pytest.fixture(scope="module")
def installed(built: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the wheel, the virtualenv's bin folder): installed once for this file (about a minute)."""
    base = tmp_path_factory.mktemp("package")
    _, wheel = built
    venv = base / "venv"
    made = run([sys.executable, "-m", "venv", str(venv)], base)
    assert made.returncode == 0, made.stderr
    done = run([str(venv / "bin" / "python"), "-m", "pip", "install", "-q", str(wheel)], base)
    assert done.returncode == 0, done.stderr
    return wheel, venv / "bin"


def outside(bin_dir: Path, cwd: Path, **more: str) -> dict[str, str]:
    """An environment that knows nothing of the checkout: the virtualenv first on PATH, no PYTHONPATH."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "BACKFILLCTL_", "VIRTUAL_ENV"))}
    return {**keep, "PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(cwd), **more}


@pytest.mark.slow
def test_the_wheel_carries_the_schemas_and_one_version(installed: tuple[Path, Path], tmp_path: Path) -> None:
    wheel, bin_dir = installed
    assert wheel.name == f"airflow_backfill_controller-{__version__}-py3-none-any.whl"
    names = zipfile.ZipFile(wheel).namelist()
    schemas = ("backfill-spec", "policy", "evidence")
    assert {f"controller/_schemas/{name}.schema.json" for name in schemas} <= set(names)
    version = run([str(bin_dir / "backfillctl"), "--version"], tmp_path, outside(bin_dir, tmp_path))
    assert (version.returncode, version.stdout, version.stderr) == (0, f"backfillctl {__version__}\n", "")
    where = run([str(bin_dir / "python"), "-c", "import controller; print(controller.__file__)"], tmp_path)
    assert Path(where.stdout.strip()).is_relative_to(bin_dir.parent), where.stdout  # not the checkout's


@pytest.mark.slow
def test_the_sdist_carries_the_schemas_and_the_sources(built: tuple[Path, Path]) -> None:
    sdist, _ = built
    assert sdist.name == f"airflow_backfill_controller-{__version__}.tar.gz"
    top = f"airflow_backfill_controller-{__version__}"
    with tarfile.open(sdist) as archive:
        names = set(archive.getnames())
        info = archive.extractfile(f"{top}/PKG-INFO")
        assert info is not None
        metadata = info.read().decode()
    schemas = {f"{top}/schemas/{name}.schema.json" for name in ("backfill-spec", "policy", "evidence")}
    assert schemas <= names
    assert {f"{top}/pyproject.toml", f"{top}/controller/__init__.py", f"{top}/README.md"} <= names
    for name in schemas:  # the same bytes as the tree's (the wheel is built from the sdist)
        assert archive_bytes(sdist, name) == (REPO / "schemas" / name.rsplit("/", 1)[1]).read_bytes()
    assert f"\nVersion: {__version__}\n" in metadata
    assert "\nRequires-Python: >=3.11\n" in metadata


def archive_bytes(sdist: Path, name: str) -> bytes:
    with tarfile.open(sdist) as archive:
        member = archive.extractfile(name)
        assert member is not None
        return member.read()


@pytest.mark.slow
def test_the_installed_wheel_validates_the_example_specs(installed: tuple[Path, Path], tmp_path: Path) -> None:
    """The repository's example specs, copied out of the checkout, validate with the packaged schemas."""
    _, bin_dir = installed
    shutil.copytree(REPO / "specs", tmp_path / "specs")
    done = run([str(bin_dir / "backfillctl"), "validate"], tmp_path, outside(bin_dir, tmp_path))
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        "OK: 5 specs valid (6 files including the policy specs/policy.yaml, 0 warnings).\n",
        "note: not checked: each spec's DAG in Airflow (BACKFILLCTL_AIRFLOW_URL is not set)\n",  # offline, said
    )


@pytest.mark.slow
def test_init_then_validate_with_the_installed_wheel(installed: tuple[Path, Path], tmp_path: Path) -> None:
    _, bin_dir = installed
    env = outside(bin_dir, tmp_path)
    made = run([str(bin_dir / "backfillctl"), "init", "team", "--workflows-repo", "acme/backfillctl"], tmp_path, env)
    assert made.returncode == 0, made.stderr
    assert made.stdout.splitlines()[0] == "wrote team/specs/policy.yaml"
    validated = run([str(bin_dir / "backfillctl"), "validate"], tmp_path / "team", env)
    assert (validated.returncode, validated.stdout) == (
        0,
        "OK: 1 spec valid (2 files including the policy specs/policy.yaml, 0 warnings).\n",
    ), validated.stderr
    (tmp_path / "team" / "specs" / "broken.yaml").write_text("version: 1\nname: broken\n")
    broken = run([str(bin_dir / "backfillctl"), "validate"], tmp_path / "team", env)
    assert broken.returncode == 1
    assert "specs/broken.yaml:1:1: missing required field 'dag_id'\n" in broken.stdout  # the packaged schema's words
    assert broken.stdout.endswith("9 errors, 0 warnings in 3 files including the policy specs/policy.yaml.\n")


@pytest.mark.slow
def test_plan_with_the_installed_wheel_against_the_real_airflow(
    installed: tuple[Path, Path], tmp_path: Path, airflow_url: str
) -> None:
    _, bin_dir = installed
    env = outside(bin_dir, tmp_path)
    assert run([str(bin_dir / "backfillctl"), "init", "team"], tmp_path, env).returncode == 0
    specs = tmp_path / "team" / "specs"
    (specs / "example-orders-2025-01.yaml").unlink()
    (specs / "packaged-demo.yaml").write_text(SPEC)
    airflow = {
        "BACKFILLCTL_AIRFLOW_URL": airflow_url,
        "BACKFILLCTL_AIRFLOW_USERNAME": "admin",
        "BACKFILLCTL_AIRFLOW_PASSWORD": "admin",
    }
    planned = run([str(bin_dir / "backfillctl"), "plan", "--no-store"], tmp_path / "team", {**env, **airflow})
    assert planned.returncode == 0, planned.stderr
    lines = planned.stdout.splitlines()
    # created, or queued behind a backfill someone else's test left running on the shared Airflow's demo_daily
    head = f"packaged-demo  demo_daily  {FIRST} → {LAST}  reprocess none  max_active_runs 1  forward  "
    assert re.match(rf"^(\+ create |… queued ) +{re.escape(head)}", lines[0]), lines[0]
    (summary,) = [line for line in lines if line.startswith("Plan: ")]
    assert re.fullmatch(r"Plan: [01] to create, 0 to pause, 0 to cancel, [01] queued, 0 blocked\.", summary)


def test_the_release_is_named_alike_everywhere() -> None:
    releases = re.findall(r"^## \[(\d+\.\d+\.\d+)\] - \d{4}-\d{2}-\d{2}$", (REPO / "CHANGELOG.md").read_text(), re.M)
    assert releases[0] == __version__
    readme = (REPO / "README.md").read_text()
    snippet = re.search(r"```yaml\n(repos:\n.*?)```", readme, re.S)
    assert snippet is not None
    (hook_repo,) = yaml.safe_load(snippet.group(1))["repos"]
    assert hook_repo["rev"] == "<full commit SHA>"  # a release is a commit: init pins its SHA
    assert f'rev: "<full commit SHA>" # backfillctl {__version__}\n' in snippet.group(1)
    hatch = re.search(r'\[tool\.hatch\.version\]\npath = "([^"]+)"', (REPO / "pyproject.toml").read_text())
    assert hatch is not None
    assert hatch.group(1) == "controller/__init__.py"


def test_the_pinned_commit_carries_the_hook_and_the_reusable_workflows(tmp_path: Path) -> None:
    """What `init` pins (a full commit SHA: a release is a commit) has what the pins point at, in a clone."""
    clone = tmp_path / "clone"
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1"}
    assert run(["git", "clone", "-q", "--no-hardlinks", str(REPO), str(clone)], tmp_path, env).returncode == 0
    commit = run(["git", "rev-parse", "HEAD"], clone, env).stdout.strip()
    # what `init`'s files point at: the hook, and each reusable workflow its callers name with `uses:`
    options = StarterOptions("acme/backfillctl", commit, version=__version__)
    called = sorted(
        {use.split("/", 2)[2].split("@")[0] for _, text in starter_files(options) for use in USES.findall(text)}
    )
    assert called == [
        ".github/workflows/reusable-backfill-pr.yml",
        ".github/workflows/reusable-backfill-reconcile.yml",
        ".github/workflows/reusable-backfill-stop.yml",
    ]
    for path in (".pre-commit-hooks.yaml", "requirements/reconcile.txt", *called):
        shown = run(["git", "show", f"{commit}:{path}"], clone, env)
        assert shown.returncode == 0, f"{path} is not in {commit}: {shown.stderr}"
        if path in called:  # callable from another repository
            assert list(yaml.safe_load(shown.stdout)[True]) == ["workflow_call"], path
    hooks = yaml.safe_load(run(["git", "show", f"{commit}:.pre-commit-hooks.yaml"], clone, env).stdout)
    assert "backfillctl-validate" in [hook["id"] for hook in hooks]
    version = run(["git", "show", f"{commit}:controller/__init__.py"], clone, env).stdout
    assert f'__version__ = "{__version__}"' in version
