"""What `backfillctl reconcile --once` imports, measured on the real process (`python -X importtime`) against a
loopback server answering like Airflow: what a pass does not use stays out. The metrics, the status page and its
server (a port's), the report renderers (a terminal notification's), rich (the live view's), the GitHub client (the
watch process's own evidence) and the Prometheus client (a policy's analysis) load only where they are used;
SQLAlchemy's PostgreSQL dialect (with its async drivers) only on PostgreSQL."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from controller.commands.loop.run import _provided
from controller.commands.runtime.settings import Settings
from controller.errors import ConfigError
from tests.fakes.loopback import serving

EMPTY_PLAN = "Plan: 0 to create, 0 to pause, 0 to cancel, 0 queued, 0 blocked."
REPO = Path(__file__).resolve().parents[3]
CUT = (
    "rich",
    "pygments",
    "prometheus_client",
    "controller.adapters.github",
    "controller.adapters.pageserver",
    "controller.adapters.prometheus",
    "controller.commands.loop.forge",
    "controller.core.render.change_record",
    "controller.core.render.report_markdown",
    "controller.core.render.heatmap",
    "controller.core.render.status",
    "controller.core.render.status_page",
    "controller.core.rules.rs256",
    "controller.core.rules.rsakey",
    "sqlalchemy.dialects.postgresql",
)


@pytest.fixture
def airflow() -> Iterator[str]:
    with serving() as url:  # the preflight's answers: a pass over no specs makes no other call
        yield url


def imported(tmp_path: Path, url: str, *args: str) -> set[str]:
    """Every module the command imported (the process's own import log), after it exited 0, on a migrated store."""
    (tmp_path / "specs").mkdir()
    base = {k: v for k, v in os.environ.items() if not k.startswith(("BACKFILLCTL_", "PYTHON"))}
    env = {
        **base,
        "PYTHONPATH": str(REPO),  # this checkout's controller, whatever the virtualenv installed
        "BACKFILLCTL_AIRFLOW_URL": url,
        "BACKFILLCTL_AIRFLOW_TOKEN": "token-of-the-import-test",
        "BACKFILLCTL_SPECS_DIR": str(tmp_path / "specs"),
        "BACKFILLCTL_STORE_URL": f"sqlite:///{tmp_path}/state.db",
    }
    # a reconciler's store exists after its first run: its migration (alembic, mako) is not a pass's
    subprocess.run([sys.executable, "-m", "controller", "store", "migrate"], env=env, cwd=tmp_path, check=True)
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "controller", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
        check=False,
        timeout=120,
    )
    assert (done.returncode, done.stdout) == (0, f"{EMPTY_PLAN}\nChecksum: 4f53cda18c2baa0c\n")
    return set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", done.stderr, re.MULTILINE))


def test_a_pass_once_imports_none_of_what_it_does_not_use(tmp_path: Path, airflow: str) -> None:
    modules = imported(tmp_path, airflow, "reconcile", "--once")
    assert {"controller.commands.loop.passhooks", "controller.adapters.monitor", "sqlalchemy"} <= modules  # it ran
    assert sorted(m for m in modules if m in CUT or m.partition(".")[0] in CUT) == []


def test_the_forge_is_still_opened_by_any_github_variable() -> None:
    """Only no BACKFILLCTL_GITHUB_* at all leaves the forge unimported: a credential without its repository is
    still refused where it always was."""
    with _provided(Settings(environ={"BACKFILLCTL_GITHUB_REPOSITORY": " "})) as provider:
        assert provider is None
    with pytest.raises(ConfigError) as caught, _provided(Settings(environ={"BACKFILLCTL_GITHUB_TOKEN": "t"})):
        pass
    assert caught.value.message == "BACKFILLCTL_GITHUB_REPOSITORY is not set, but GitHub credentials are"
