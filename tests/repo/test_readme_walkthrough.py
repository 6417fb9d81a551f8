"""The README's "First backfill in 5 minutes", run as written: its fenced shell lines are read from README.md (so
the section cannot drift from what works) and run one by one in a temporary folder, against the real Airflow
3.3.2 of the session, asserting what each prints and that the backfill completed in Airflow.

What the test does not run, and why (each line must still be in the section as listed here):
- `./scripts/bootstrap && . .venv/bin/activate`: this interpreter's virtualenv is on PATH already;
- `scripts/airflow-local up` and `eval "$(scripts/airflow-local env)"`: the session's Airflow (the `airflow_url`
  fixture) stands in, with the same variables the `env` line exports.
The dates of `new` are replaced with three days of their own per run: the session's Airflow is shared with other
tests, which backfill demo_daily's January 2025 (reprocess `failed` over days that succeeded creates nothing).
"""

from __future__ import annotations

import os
import re
import secrets
import shlex
import subprocess
import sys
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from time import monotonic

import pytest

from controller.adapters.airflow import AirflowClient
from controller.core.model.secret import Secret

REPO = Path(__file__).resolve().parents[2]
STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ"  # a log line's UTC time
SECTION = "## First backfill in 5 minutes"
STAND_INS = [
    "./scripts/bootstrap && . .venv/bin/activate",
    "scripts/airflow-local up",
    'eval "$(scripts/airflow-local env)"',
]
FIRST = date(2008, 1, 1) + timedelta(days=3 * secrets.randbelow(600))
LAST = FIRST + timedelta(days=2)


def section_commands(readme: str) -> list[str]:
    """The shell commands of the section's first ```bash fence: comments dropped, `\\` continuations joined."""
    body = readme.split(SECTION, 1)[1].split("\n## ", 1)[0]
    match = re.search(r"```bash\n(.*?)```", body, re.S)
    assert match is not None, f"no ```bash fence in {SECTION!r}"
    commands: list[str] = []
    pending = ""
    for raw in match.group(1).splitlines():
        line = f"{pending} {raw.strip()}" if pending else raw
        pending = ""
        if line.rstrip().endswith("\\"):
            pending = line.rstrip()[:-1].rstrip()
            continue
        command = re.sub(r"\s+#.*$", "", line).strip()
        if command and not command.startswith("#"):
            commands.append(command)
    assert not pending
    return commands


def test_the_section_is_read_as_expected() -> None:
    commands = section_commands((REPO / "README.md").read_text())
    assert commands[:3] == STAND_INS
    assert [c.split()[1] for c in commands if c.startswith("backfillctl ")] == [
        "init", "new", "validate", "plan", "reconcile", "status", "report"
    ]  # fmt: skip
    (new,) = [c for c in commands if c.startswith("backfillctl new ")]
    assert "--from 2025-01-01 --to 2025-01-03 --reprocess failed" in new


@pytest.mark.airflow
def test_first_backfill_in_5_minutes(tmp_path: Path, airflow_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BACKFILLCTL_ALLOW_ADMIN_IDENTITY")  # the operator login needs no allowance
    commands = section_commands((REPO / "README.md").read_text())[len(STAND_INS) :]
    start = tmp_path / "checkout"
    start.mkdir()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("BACKFILLCTL_")},
        "PATH": f"{Path(sys.executable).parent}:{os.environ['PATH']}",
        "HOME": str(tmp_path),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "newcomer",
        "GIT_AUTHOR_EMAIL": "newcomer@example.com",
        "GIT_COMMITTER_NAME": "newcomer",
        "GIT_COMMITTER_EMAIL": "newcomer@example.com",
        "BACKFILLCTL_ACTOR": "newcomer",
        # what `eval "$(scripts/airflow-local env)"` exports, for the session's Airflow
        "BACKFILLCTL_AIRFLOW_URL": airflow_url,
        "BACKFILLCTL_AIRFLOW_USERNAME": "operator",  # role user: least privilege, so no warning on stderr
        "BACKFILLCTL_AIRFLOW_PASSWORD": "operator",
    }
    cwd, seen, took = start, {}, {}
    for written in commands:
        command = written.replace("--from 2025-01-01 --to 2025-01-03", f"--from {FIRST} --to {LAST}")
        words = shlex.split(command)
        if words[0] == "cd":
            cwd = (cwd / words[1]).resolve()
            continue
        if words[0] == "export":
            name, _, value = words[1].partition("=")
            env[name] = value
            continue
        started = monotonic()
        done = subprocess.run(
            ["bash", "-eo", "pipefail", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, check=False
        )
        took[command] = monotonic() - started
        assert (done.returncode, done.stderr) == (0, ""), (command, done.stdout, done.stderr)
        key = " ".join(words[:2]) if words[0] == "backfillctl" else command
        seen[key] = done.stdout

    assert seen["backfillctl init"].splitlines()[0] == "wrote ../my-backfills/specs/policy.yaml"
    assert seen["backfillctl new"] == (
        "wrote specs/demo-daily-2025-01.yaml\n"
        "requested_by: newcomer (from BACKFILLCTL_ACTOR; --requested-by says otherwise)\n"
        "expected_runs: 3, from Airflow's dry run\n"
        "next: `backfillctl plan`, then open a pull request with the file\n"
    )
    assert (
        seen["backfillctl validate"]
        == "OK: 1 spec valid (2 files including the policy specs/policy.yaml, 0 warnings).\n"
    )
    planned = seen["backfillctl plan"].splitlines()
    assert planned[0].startswith(f"+ create    demo-daily-2025-01  demo_daily  {FIRST} → {LAST}  reprocess failed  ")
    assert "runs 3 of 3 in range" in planned[0]
    assert "Plan: 1 to create, 0 to pause, 0 to cancel, 0 queued, 0 blocked." in planned
    reconciled = seen["backfillctl reconcile"].splitlines()
    created = re.fullmatch(rf"{STAMP} \+ create demo-daily-2025-01: created backfill #(\d+)", reconciled[0])
    assert created is not None, reconciled  # --until-complete's lines carry their time, as --watch's do
    backfill_id = int(created[1])
    (waited,) = [t for c, t in took.items() if c.startswith("backfillctl reconcile ")]
    print(f"reconcile --until-complete took {waited:.0f} s")  # measured for the README's "(~1 min)"
    assert waited < 150, waited  # a pass every 30 s: the runs finish within a few passes
    final = reconciled[-1].split()
    assert final[:4] == ["demo-daily-2025-01", "demo_daily", "Succeeded", str(backfill_id)]
    assert reconciled[-1].endswith("3 run(s) succeeded")
    status = seen["backfillctl status"].splitlines()
    assert status[0] == "1 spec: 1 Succeeded"
    assert status[2].split()[:7] == ["demo-daily-2025-01", "demo_daily", "Succeeded", str(backfill_id), "3", "0", "0"]
    report = seen["backfillctl report"]
    assert report.startswith("# Change record: demo-daily-2025-01\n\n")
    assert f"- **Outcome**: Succeeded (backfill #{backfill_id})\n" in report
    assert "- **Ticket**: CHG-1\n" in report
    assert "- **Intervals**: 3 complete, 0 failed (none), 0 skipped of 3 in range\n" in report

    with AirflowClient(airflow_url, username="admin", password=Secret("admin")) as client:  # Airflow's own word
        backfill = client.get_backfill(backfill_id)
        assert (backfill.dag_id, backfill.completed_at is not None) == ("demo_daily", True)
        runs = client.dag_runs("demo_daily", datetime.combine(FIRST, time(), UTC), datetime.combine(LAST, time(), UTC))
        assert sorted(r.state for r in runs) == ["success", "success", "success"]
