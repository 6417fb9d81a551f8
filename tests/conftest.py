from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture
def repo_root() -> Path:
    return REPO


@pytest.fixture(autouse=True)
def _no_airflow_from_the_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    """A shell that ran `eval "$(scripts/airflow-local env)"` must not point the tests at its Airflow (validate
    checks DAGs when BACKFILLCTL_AIRFLOW_URL is set): tests that need Airflow pass it explicitly (`airflow_url`)."""
    for name in ("URL", "TOKEN", "USERNAME", "PASSWORD"):
        monkeypatch.delenv(f"BACKFILLCTL_AIRFLOW_{name}", raising=False)


@pytest.fixture(scope="session")
def airflow_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Apache Airflow 3.3.2: BACKFILLCTL_TEST_AIRFLOW_URL if set, else one started for this session."""
    given = os.environ.get("BACKFILLCTL_TEST_AIRFLOW_URL")
    if given:
        yield given.rstrip("/")
        return
    home = tmp_path_factory.mktemp("airflow")
    script = str(REPO / "scripts" / "airflow-local")
    started = subprocess.run(
        [sys.executable, script, "up", "--dir", str(home), "--fresh"], capture_output=True, text=True, check=False
    )
    if started.returncode != 0:
        pytest.fail(f"could not start the local Airflow:\n{started.stderr[-3000:]}")
    try:
        yield started.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run(
            [sys.executable, script, "down", "--dir", str(home), "--purge"], capture_output=True, check=False
        )
