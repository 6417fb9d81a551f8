"""The README's install lines, as written, in a fresh clone of this repository (its URL the clone's path): the
release `scripts/release` builds (wheel, sdist, lock, CycloneDX SBOM, SHA256SUMS), the locked install of the
wheel, and the git URL at the commit's SHA; `init` from each install pins that commit."""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from controller import __version__

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.slow
URL = "https://github.com/OWNER/airflow-backfill-controller"


def readme_block(after: str) -> list[str]:
    """The command lines of the first ```bash block after `after` in the README (comments cut)."""
    readme = (REPO / "README.md").read_text()
    block = readme[readme.index(after) :].split("```bash\n", 1)[1].split("```", 1)[0]
    return [re.sub(r"\s+# .*$", "", line) for line in block.splitlines() if line.strip()]


def sh(script: str, cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", "-eo", "pipefail", "-c", script], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """This repository at its HEAD, as a remote to clone (the README's URL stands for it)."""
    base = tmp_path_factory.mktemp("origin")
    origin = base / "airflow-backfill-controller"
    done = subprocess.run(
        ["git", "clone", "-q", "--no-hardlinks", str(REPO), str(origin)], capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return origin


PIP_USER_CONFIGS = (".config/pip/pip.conf", ".pip/pip.conf")  # where pip reads a user's index settings


def environment(home: Path) -> dict[str, str]:
    """A clean HOME, with this machine's pip configuration in it: the package index as configured here (an offline
    machine's index is often only in the user's pip.conf, which a new HOME would lose)."""
    keep = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "BACKFILLCTL_", "VIRTUAL_ENV"))}
    for config in PIP_USER_CONFIGS:
        mine = Path.home() / config
        if mine.is_file():
            (home / config).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(mine, home / config)
    return {
        **keep,
        "HOME": str(home),
        "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin",
        "GIT_CONFIG_NOSYSTEM": "1",
    }


def test_the_readmes_install_lines_work_as_written_in_a_fresh_clone(clone: Path, tmp_path: Path) -> None:
    lines = readme_block("## Install\n")
    assert lines[0] == f"git clone {URL} && cd airflow-backfill-controller"
    assert lines[-1] == "backfillctl --version"
    env = environment(tmp_path)
    env["PIP_CONFIG_FILE"] = os.environ.get("PIP_CONFIG_FILE", "")  # the package index as configured here
    script = "\n".join(lines).replace(URL, str(clone))
    done = sh(script, tmp_path, env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert done.stdout.splitlines()[-1] == f"backfillctl {__version__}"
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True, check=True
    ).stdout.strip()
    dist = tmp_path / "airflow-backfill-controller" / "dist"
    names = sorted(p.name for p in dist.iterdir())
    assert names == sorted(
        [
            f"airflow_backfill_controller-{__version__}-py3-none-any.whl",
            f"airflow_backfill_controller-{__version__}.tar.gz",
            f"airflow_backfill_controller-{__version__}.cdx.json",
            "requirements-reconcile.txt",
            "SHA256SUMS",
        ]
    )
    sums = dict(reversed(line.split("  ")) for line in (dist / "SHA256SUMS").read_text().splitlines())
    assert sums == {n: hashlib.sha256((dist / n).read_bytes()).hexdigest() for n in names if n != "SHA256SUMS"}
    check_sbom(json.loads((dist / f"airflow_backfill_controller-{__version__}.cdx.json").read_text()), dist, head)

    # the installed wheel pins the commit it was built from
    init = sh(". ~/.backfillctl/bin/activate && backfillctl init team --workflows-repo acme/backfillctl", tmp_path, env)
    assert init.returncode == 0, init.stderr
    assert f"pinned to {head} (backfillctl {__version__}), from the package (recorded when it was built)" in init.stdout
    assert (
        f"reusable-backfill-reconcile.yml@{head} # backfillctl {__version__}"
        in (tmp_path / "team" / ".github" / "workflows" / "backfill-reconcile.yml").read_text()
    )


def test_the_git_url_at_a_sha_installs_and_pins_that_commit(clone: Path, tmp_path: Path) -> None:
    (line,) = [line for line in readme_block("Or straight from git") if line.startswith("pip install")]
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True, check=True
    ).stdout.strip()
    env = environment(tmp_path)
    install = line.replace(URL, f"file://localhost{clone}")  # a host: older pips want one in a VCS URL
    install = install.replace("@SHA", f"@{head}")
    script = f"python3 -m venv venv && . venv/bin/activate\n{install}"
    done = sh(script + "\nbackfillctl init team --workflows-repo acme/backfillctl", tmp_path, env)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"pinned to {head} (backfillctl {__version__}), from the package (recorded when it was built)" in done.stdout


def check_sbom(bom: dict[str, object], dist: Path, head: str) -> None:
    """CycloneDX 1.5, structurally: the required fields and types, refs that resolve, the lock's hashes."""
    assert (bom["bomFormat"], bom["specVersion"], bom["version"]) == ("CycloneDX", "1.5", 1)
    assert re.fullmatch(
        r"urn:uuid:[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}", str(bom["serialNumber"])
    )
    metadata = bom["metadata"]
    assert isinstance(metadata, dict)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", metadata["timestamp"])
    subject = metadata["component"]
    wheel = dist / f"airflow_backfill_controller-{__version__}-py3-none-any.whl"
    assert subject["type"] == "application"
    assert subject["purl"] == subject["bom-ref"] == f"pkg:pypi/airflow-backfill-controller@{__version__}"
    assert subject["hashes"] == [{"alg": "SHA-256", "content": hashlib.sha256(wheel.read_bytes()).hexdigest()}]
    assert subject["properties"] == [{"name": "backfillctl:commit", "value": head}]
    components = bom["components"]
    assert isinstance(components, list)
    lock = (dist / "requirements-reconcile.txt").read_text()
    assert len(components) == lock.count("==") > 20
    refs = {subject["bom-ref"]}
    for component in components:
        assert set(component) == {"type", "bom-ref", "name", "version", "purl", "hashes"}
        assert component["type"] == "library"
        assert component["purl"] == component["bom-ref"] == f"pkg:pypi/{component['name']}@{component['version']}"
        assert f"{component['name']}=={component['version']} \\\n" in lock
        for digest in component["hashes"]:
            assert digest["alg"] == "SHA-256"
            assert f"--hash=sha256:{digest['content']}" in lock
        refs.add(component["bom-ref"])
    assert len(refs) == len(components) + 1  # unique
    dependencies = bom["dependencies"]
    assert isinstance(dependencies, list)
    assert {d["ref"] for d in dependencies} == refs
    assert all(set(d.get("dependsOn", [])) <= refs for d in dependencies)
