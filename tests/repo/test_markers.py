"""`-m airflow` / `-m postgres` select exactly the tests that need those services (markers set at collection)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
REAL_AIRFLOW_ONLY = (
    "tests/commands/reconcile/test_walkthrough.py",
    "tests/adapters/airflow/test_contract.py::test_partitioned_",
    "tests/commands/runtime/test_secrets_shown.py::test_a_wrong_password_against_the_real_airflow",
    "tests/repo/test_package.py::test_plan_with_the_installed_wheel",
    "tests/repo/test_readme_walkthrough.py::test_first_backfill_in_5_minutes",
)

POSTGRES_PARAMETRISED = (
    "tests/adapters/store/",
    "tests/commands/reconcile/test_hostile_values_fake.py",
    "tests/adapters/test_notify_hostile.py",
)


def collect(*args: str) -> set[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode in (0, 5), done.stdout + done.stderr
    return {line for line in done.stdout.splitlines() if "::" in line}


def needs_airflow(test_id: str) -> bool:
    """Independent of the conftest hook: by file, or the contract tests' `real` parameter."""
    file = test_id.split("::", 1)[0]
    return (
        file.endswith("_real.py")
        or test_id.startswith(REAL_AIRFLOW_ONLY)
        or (
            file in ("tests/adapters/airflow/test_contract.py", "tests/adapters/airflow/test_history_listing.py")
            and "[real" in test_id
        )
    )


POSTGRES_ONLY = ("tests/adapters/store/test_store_roles.py",)  # the database roles exist on PostgreSQL only


def needs_postgres(test_id: str) -> bool:
    parametrised = re.search(r"[\[-]postgresql[\]-]", test_id) is not None
    return test_id.startswith(POSTGRES_ONLY) or (test_id.startswith(POSTGRES_PARAMETRISED) and parametrised)


def test_markers_select_exactly_the_tests_that_need_a_service() -> None:
    everything = collect()
    airflow, postgres = collect("-m", "airflow"), collect("-m", "postgres")
    assert airflow == {t for t in everything if needs_airflow(t)}
    assert postgres == {t for t in everything if needs_postgres(t)}
    assert len(airflow) >= 26
    assert len(postgres) >= 14
