"""What a newcomer meets at the command line, against the real Apache Airflow 3.3.2: reconcile names the spec files
it does not apply (not committed). Dry runs only here: nothing is created, so no other test's DAG queue is touched.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.commands.reconcile.harness import Bench
from tests.support.logcheck import untimed

pytestmark = pytest.mark.airflow


@pytest.fixture
def bench(tmp_path: Path, airflow_url: str) -> Iterator[Bench]:
    b = Bench(tmp_path, url=airflow_url)
    yield b
    b.close()


def git(root: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "alice",
        "GIT_AUTHOR_EMAIL": "alice@example.com",
        "GIT_COMMITTER_NAME": "alice",
        "GIT_COMMITTER_EMAIL": "alice@example.com",
        "PATH": "/usr/bin:/bin",
        "HOME": str(root),
        "GIT_CONFIG_NOSYSTEM": "1",
    }
    done = subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True, text=True)
    return done.stdout.strip()


def test_reconcile_names_the_spec_files_it_does_not_apply(bench: Bench) -> None:
    git(bench.root, "init", "-q", "-b", "main")
    (bench.root / ".gitignore").write_text("state.db*\n")
    bench.spec("reviewed", dag="demo_daily", start="2021-03-01", end="2021-03-02")
    git(bench.root, "add", "-A")
    git(bench.root, "commit", "-q", "-m", "reviewed")
    head = git(bench.root, "rev-parse", "HEAD")
    bench.spec("local-try", dag="demo_tz", start="2021-03-01", end="2021-03-02")
    done = bench.cli("reconcile", "--dry-run")
    assert done.returncode == 0, done.stderr
    assert (
        untimed(done.stderr)
        == (  # log lines: their time taken away
            "warning: not applied: specs/local-try.yaml (untracked); reconcile applies what is committed at HEAD "
            f"{head[:12]}: commit it, or pass --allow-dirty for a local experiment\n"
        )
    )
    assert [line.split()[2] for line in done.stdout.splitlines() if line.startswith(("+", "=", "…"))] == ["reviewed"]
    dirty = bench.cli("reconcile", "--dry-run", "--allow-dirty")
    assert untimed(dirty.stderr) == (
        f"warning: --allow-dirty: applying specs/local-try.yaml (untracked), which HEAD {head[:12]} does not hold\n"
    )
    assert "local-try" in dirty.stdout
