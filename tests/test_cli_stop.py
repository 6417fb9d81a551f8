"""`backfillctl stop`: exact output and exit codes of its list, its lift and the user's mistakes (never exit 3)."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.adapters.store import Store
from controller.cli import main
from controller.core.plan.stops import EmergencyStopKind, StopSource


@pytest.fixture
def store_url(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    url = f"sqlite:///{tmp_path}/state.db"
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "policy.yaml").write_text(
        "version: 1\ndownstream:\n  warehouse: {max_active_runs: 8, owners: [wh-oncall]}\n"
    )
    monkeypatch.setenv("BACKFILLCTL_STORE_URL", url)
    monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", str(specs))
    monkeypatch.setenv("BACKFILLCTL_ACTOR", "someone")
    monkeypatch.delenv("BACKFILLCTL_AIRFLOW_URL", raising=False)
    monkeypatch.chdir(tmp_path)
    Store(url).close()
    return url


def test_list_and_an_owners_lift(
    store_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert main(["stop", "--list"]) == 0
    assert capsys.readouterr().out == "no stops in force\n"
    with Store(store_url) as store:
        store.add_stop(EmergencyStopKind.DOWNSTREAM, "warehouse", "CPU at 95%", "wh-oncall", source=StopSource.CLI)
    assert main(["stop", "--list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("#1 downstream warehouse: CPU at 95% — by wh-oncall (cli) at ")
    assert lines[1] == (
        "note: the actor is only as trustworthy as the store credentials used (the workflow's stop job uses "
        "GitHub's identity)"
    )
    assert main(["stop", "--lift", "warehouse"]) == 5
    assert capsys.readouterr().err == (
        "error: lift stop #1: only an owner may (wh-oncall); the actor is someone\n"
        "  hint: ask an owner; a stop also lifts at its expiry or when a reviewed `resume` names it\n"
    )
    monkeypatch.setenv("BACKFILLCTL_ACTOR", "wh-oncall")
    assert main(["stop", "--lift", "#1", "--reason", "load is down"]) == 0
    assert capsys.readouterr().out == (
        "lifted stop #1 of downstream warehouse (by wh-oncall: load is down)\n"
        "the next reconcile pass resumes what it paused\n"
    )


@pytest.mark.parametrize(
    ("args", "code", "err"),
    [
        (
            ["stop", "--reason", "x y z"],
            2,
            "error: stop needs one target: a spec NAME or --downstream SYSTEM\n"
            '  hint: e.g. backfillctl stop --downstream warehouse --reason "CPU at 95%" --expires 4h\n',
        ),
        (
            ["stop", "--downstream", "warehouse"],
            2,
            'error: stop needs --reason: say why, for the owners and the audit log\n  hint: --reason "CPU at 95%"\n',
        ),
        (
            ["stop", "--lift", "nope"],
            2,
            "error: stop --lift nope: no stop in force names 'nope'\n  hint: stops in force: none\n",
        ),
        (
            ["stop", "--source", "workflow", "--list"],
            2,
            "error: --source workflow: only the reusable workflow's stop job (GitHub Actions) may say workflow\n",
        ),
    ],
)
def test_user_mistakes_say_what_and_how_to_fix(
    store_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    code: int,
    err: str,
) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    assert main(args) == code
    assert capsys.readouterr().err == err


def test_a_bad_duration_is_a_usage_error(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["stop", "--downstream", "warehouse", "--reason", "why not", "--expires", "soon"]) == 2
    assert "'soon' is not a duration; use e.g. 30m, 4h or 2d" in capsys.readouterr().err
