from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from controller.core.model.capabilities import Capabilities, judge

REPO = Path(__file__).resolve().parents[1]
# The Airflow release the session's `airflow_url` runs (the harness starts it): 3.3.2, or another supported
# release for the `every_line` subset (scripts/test runs it on 3.1.8, 3.2.2 and the preview 3.4.0b2 after the main run)
AIRFLOW_VERSION = os.environ.get("BACKFILLCTL_TEST_AIRFLOW_VERSION", "3.3.2")

# Property tests must not depend on the machine's speed: no per-example deadline, no "too slow" health
# check (2 cores shared with `pytest -n 2` and with other jobs). Explicit @settings still set the counts.
settings.register_profile("backfillctl", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("backfillctl")

# Fixtures that need a service. A test needs it when the fixture is in its closure (`item.fixturenames`,
# which includes fixtures requested by other fixtures), or when a parametrized fixture requests it
# dynamically (`request.getfixturevalue`) for one of its parameters: those are listed by (fixture, param).
SERVICE_FIXTURES = {
    "airflow_url": "airflow",
    "staging_airflow_url": "airflow",  # a second Airflow: the same group, so one worker starts both
    "postgres_admin": "postgres",
    "prometheus_server": "prometheus",
}
SERVICE_PARAMS = {
    ("store_url", "postgresql"): "postgres",
    ("make_client", "real"): "airflow",
    ("history_client", "real"): "airflow",
}


def services(item: pytest.Item) -> set[str]:
    names = set(getattr(item, "fixturenames", ()))
    found = {marker for fixture, marker in SERVICE_FIXTURES.items() if fixture in names}
    callspec = getattr(item, "callspec", None)
    params = dict(callspec.params) if callspec is not None else {}
    found |= {marker for (fixture, value), marker in SERVICE_PARAMS.items() if params.get(fixture) == value}
    return found


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Markers at collection, so `-m airflow` / `-m 'not airflow'` / `-m postgres` select what they say.

    Every test that needs the real Airflow also joins one xdist group: with `pytest -n 2` (addopts sets
    `--dist loadgroup`) they all run on one worker, which starts one Airflow for the session, instead of
    each worker starting its own (two Airflows do not fit on a 2-core machine and would race on ports).
    """
    for item in items:
        for marker in sorted(services(item)):
            item.add_marker(getattr(pytest.mark, marker))
        if "airflow" in services(item) or item.get_closest_marker("airflow") is not None:
            item.add_marker(pytest.mark.xdist_group("airflow"))
        elif "prometheus" in services(item):  # one real Prometheus per session too (tests/adapters/prometheus)
            item.add_marker(pytest.mark.xdist_group("prometheus"))


@pytest.fixture(scope="session")
def airflow_caps() -> Capabilities:
    """What the session's real Airflow release has (the tests that differ per line ask this)."""
    verdict = judge(AIRFLOW_VERSION)
    assert verdict.capabilities is not None, verdict.message
    return verdict.capabilities


@pytest.fixture
def repo_root() -> Path:
    return REPO


@pytest.fixture(autouse=True)
def _no_airflow_from_the_shell(monkeypatch: pytest.MonkeyPatch) -> None:
    """A shell that ran `eval "$(scripts/airflow-local env)"` must not point the tests at its Airflow (validate
    checks DAGs when BACKFILLCTL_AIRFLOW_URL is set): tests that need Airflow pass it explicitly (`airflow_url`)."""
    for name in ("URL", "TOKEN", "USERNAME", "PASSWORD"):
        monkeypatch.delenv(f"BACKFILLCTL_AIRFLOW_{name}", raising=False)
        monkeypatch.delenv(f"BACKFILLCTL_STAGING_AIRFLOW_{name}", raising=False)  # the issue-28 example's staging


@pytest.fixture(autouse=True)
def _admin_identity_known(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests log in as the harness's admin on purpose: the preflight's least-privilege warning would be on
    every command's stderr. tests/commands/reconcile/test_least_privilege_real.py unsets this to see it."""
    monkeypatch.setenv("BACKFILLCTL_ALLOW_ADMIN_IDENTITY", "1")


@pytest.fixture(autouse=True)
def _no_width_from_the_runner(monkeypatch: pytest.MonkeyPatch) -> None:
    """pytest-xdist's workers run with COLUMNS=80 and LINES=24, and output fits COLUMNS: a test that is about
    the width sets it itself, the others see the width of a pipe (none), as with a serial run."""
    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.delenv("LINES", raising=False)


@pytest.fixture(scope="session")
def airflow_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real Apache Airflow (AIRFLOW_VERSION): BACKFILLCTL_TEST_AIRFLOW_URL if set (it must run that
    release), else one the harness starts for this session."""
    yield from _harness_airflow(tmp_path_factory, "BACKFILLCTL_TEST_AIRFLOW_URL", "airflow")


@pytest.fixture(scope="session")
def staging_airflow_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A second real Airflow of the same release, independent of `airflow_url` (its own home, port, metadata
    database and JWT secret): the staging environment of issue 28. BACKFILLCTL_TEST_STAGING_AIRFLOW_URL if set,
    else one the harness starts for this session (about 20 s more, ~0.6 GB PSS)."""
    yield from _harness_airflow(tmp_path_factory, "BACKFILLCTL_TEST_STAGING_AIRFLOW_URL", "staging-airflow")


def _harness_airflow(factory: pytest.TempPathFactory, variable: str, name: str) -> Iterator[str]:
    """The Airflow at `variable`'s URL, else one scripts/airflow-local starts in a fresh directory (stopped and
    purged at the end of the session)."""
    given = os.environ.get(variable)
    if given:
        yield given.rstrip("/")
        return
    home = factory.mktemp(name)
    script = str(REPO / "scripts" / "airflow-local")
    started = subprocess.run(
        [sys.executable, script, "up", "--dir", str(home), "--fresh", "--version", AIRFLOW_VERSION],
        capture_output=True,
        text=True,
        check=False,
    )
    if started.returncode != 0:
        pytest.fail(f"could not start the local Airflow {AIRFLOW_VERSION} ({name}):\n{started.stderr[-3000:]}")
    try:
        yield started.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run(
            [sys.executable, script, "down", "--dir", str(home), "--purge"], capture_output=True, check=False
        )
