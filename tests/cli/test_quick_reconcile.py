"""A scheduled `reconcile` (`--once`, `--wait-lock`, `--lock-timeout S`, …) runs the typer command's own function
without typer building its parameters (pydantic stays unimported: ~0.15 s of CPU a start), and says and exits
exactly what the typer path does; any other option, spelling or bound goes to typer, which owns its messages."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from controller.cli.quick import plain_reconcile


@pytest.mark.parametrize(
    ("argv", "chosen"),
    [
        (["reconcile"], {}),
        (["reconcile", "--once"], {"once": True}),
        (
            ["reconcile", "--once", "--wait-lock", "--lock-timeout", "60"],
            {"once": True, "wait_lock": True, "lock_timeout": 60.0},
        ),
        (["reconcile", "--lock-timeout=0.5", "--dry-run"], {"lock_timeout": 0.5, "dry_run": True}),
        (["reconcile", "--fail-on-failures", "--allow-dirty"], {"fail_on_failures": True, "allow_dirty": True}),
        (["reconcile", "--lock-timeout", "86400"], {"lock_timeout": 86400.0}),
    ],
)
def test_a_scheduled_reconcile_is_parsed_without_typer(argv: list[str], chosen: dict[str, Any]) -> None:
    assert plain_reconcile(argv) == chosen


@pytest.mark.parametrize(
    "argv",
    [
        ["reconcile", "--help"],
        ["reconcile", "--watch"],
        ["reconcile", "--once", "--once"],
        ["reconcile", "--once=yes"],
        ["reconcile", "--lock-timeout"],
        ["reconcile", "--lock-timeout", "86401"],
        ["reconcile", "--lock-timeout", "-1"],
        ["reconcile", "--lock-timeout", "1e3"],
        ["reconcile", "--lock-timeout", "nan"],
        ["reconcile", "--lock-timeout", "5", "--lock-timeout", "6"],
        ["reconcile", "--evidence", "e.json"],
        ["reconcile", "--", "--once"],
        ["--log-format", "json", "reconcile", "--once"],
        ["plan"],
    ],
)
def test_anything_else_is_left_to_typer(argv: list[str]) -> None:
    assert plain_reconcile(argv) is None


PROBE = """
import json, sys
from controller.cli import main
code = main({argv!r})
print(json.dumps([code, "pydantic" in sys.modules]))
"""


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, bool, str]:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(argv=argv)], cwd=cwd, env=env, capture_output=True, text=True, check=True
    )
    code, pydantic = json.loads(done.stdout.strip().splitlines()[-1])
    return code, pydantic, done.stderr


@pytest.mark.parametrize("tail", [["--once"], ["--once", "--wait-lock", "--lock-timeout", "1"]])
def test_both_paths_say_and_exit_the_same_and_only_typers_imports_pydantic(tmp_path: Path, tail: list[str]) -> None:
    """No Airflow configured: the same error, the same exit code, through either path."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("BACKFILLCTL_")}
    env["BACKFILLCTL_STORE_URL"] = f"sqlite:///{tmp_path}/state.db"
    quick = _run(["reconcile", *tail], tmp_path, env)
    typer = _run(["--log-format", "text", "reconcile", *tail], tmp_path, env)
    assert quick[0] == typer[0] == 1
    assert quick[2] == typer[2]
    assert "error: BACKFILLCTL_AIRFLOW_URL is not set" in quick[2]
    assert (quick[1], typer[1]) == (False, True)
