"""The image: the Dockerfile passes hadolint at its strictest threshold and keeps its promises (a base pinned by
digest, the hashed lock, a non-root user, `backfillctl` as entrypoint, a HEALTHCHECK on /healthz); where a
container engine answers, it is built and runs `--version`."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from controller import __version__

HADOLINT = Path(sys.executable).with_name("hadolint")


def instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) of each instruction, continuation lines joined, comments dropped."""
    joined = re.sub(r"\\\n\s*", " ", dockerfile.read_text(encoding="utf-8"))
    found = []
    for line in joined.splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            word, _, rest = stripped.partition(" ")
            found.append((word.upper(), " ".join(rest.split())))
    return found


def test_hadolint_finds_nothing_even_at_style_level(repo_root: Path) -> None:
    done = subprocess.run(
        [str(HADOLINT), "--no-color", "--format", "json", "--failure-threshold", "style", "Dockerfile"],
        cwd=repo_root,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, json.loads(done.stdout), done.stderr) == (0, [], "")


def test_hadolint_is_the_one_that_fails_a_bad_dockerfile(tmp_path: Path) -> None:
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get install git\n")
    done = subprocess.run(
        [str(HADOLINT), "--no-color", "--format", "json", str(bad)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 1
    codes = {finding["code"] for finding in json.loads(done.stdout)}
    assert codes >= {"DL3007", "DL3014", "DL3015"}  # the tag `latest`, no -y, no --no-install-recommends


def test_the_image_keeps_its_promises(repo_root: Path) -> None:
    steps = instructions(repo_root / "Dockerfile")
    args = dict(rest.split("=", 1) for word, rest in steps if word == "ARG")
    assert re.fullmatch(r"python:3\.11-slim-bookworm@sha256:[0-9a-f]{64}", args["PYTHON_IMAGE"])
    assert [rest for word, rest in steps if word == "FROM"] == ["${PYTHON_IMAGE} AS build", "${PYTHON_IMAGE}"]
    runs = " ".join(rest for word, rest in steps if word == "RUN")
    assert "pip install --require-hashes --no-deps --only-binary=:all: -r requirements/reconcile.txt" in runs
    assert "pip install --no-deps --no-build-isolation --no-index ." in runs
    users = [rest for word, rest in steps if word == "USER"]
    assert users == ["10001:10001"]  # numeric: runAsNonRoot can check it
    assert steps[-2:] == [
        ("ENTRYPOINT", '["backfillctl"]'),
        ("CMD", '["reconcile", "--watch", "--metrics-port", "9108", "--metrics-host", "0.0.0.0"]'),
    ]
    (health,) = [rest for word, rest in steps if word == "HEALTHCHECK"]
    assert "http://127.0.0.1:9108/healthz" in health
    ignored = (repo_root / ".dockerignore").read_text(encoding="utf-8").splitlines()
    assert ignored[1] == "*"  # everything but what the build reads: no .git, .venv, tests or local state


def _engine() -> str | None:
    """The container engine that answers (docker or podman), or None."""
    for name in ("docker", "podman"):
        if shutil.which(name) is None:
            continue
        done = subprocess.run([name, "info"], capture_output=True, text=True, check=False, timeout=30)
        if done.returncode == 0:
            return name
    return None


def test_the_image_builds_and_runs_version(repo_root: Path) -> None:
    engine = _engine()
    if engine is None:
        pytest.skip("no container engine answers here (docker/podman missing, or `docker info` fails): not built")
    tag = "backfillctl-test:latest"
    subprocess.run([engine, "build", "-q", "-t", tag, str(repo_root)], check=True, capture_output=True, timeout=900)
    done = subprocess.run([engine, "run", "--rm", tag, "--version"], capture_output=True, text=True, check=True)
    assert done.stdout.strip().endswith(__version__)
    user = subprocess.run(
        [engine, "run", "--rm", "--entrypoint", "id", tag, "-u"], capture_output=True, text=True, check=True
    )
    assert user.stdout.strip() == "10001"
