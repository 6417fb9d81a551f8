"""Shell completion through the console script, as bash asks it: spec names, DAG ids from the specs, stop ids."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from controller.adapters.store import Store
from controller.core.model.stops import EmergencyStopKind, StopSource

SCRIPT = str(Path(sys.executable).parent / "backfillctl")  # the console script of this environment


def complete(cwd: Path, words: str, env: dict[str, str] | None = None) -> list[str]:
    line = words.split(" ")
    done = subprocess.run(
        [SCRIPT],
        cwd=cwd,
        env={
            **os.environ,
            "_BACKFILLCTL_COMPLETE": "complete_bash",
            "COMP_WORDS": words,
            "COMP_CWORD": str(len(line) - 1),
            **(env or {}),
        },
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert (done.returncode, done.stderr) == (0, "")
    return done.stdout.split()


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "specs" / "team").mkdir(parents=True)
    (tmp_path / "specs" / "alpha.yaml").write_text("name: alpha\ndag_id: orders_daily  # the orders\n")
    (tmp_path / "specs" / "team" / "beta.yml").write_text('name: beta\ndag_id: "ledger"\n')
    (tmp_path / "specs" / "policy.yaml").write_text("version: 1\n")
    return tmp_path


def test_spec_names_and_dag_ids_complete(tree: Path) -> None:
    env = {"BACKFILLCTL_SPECS_DIR": "specs"}
    assert complete(tree, "backfillctl status ", env) == ["alpha", "beta"]
    assert complete(tree, "backfillctl report b", env) == ["beta"]
    assert complete(tree, "backfillctl audit show --spec a", env) == ["alpha"]
    assert complete(tree, "backfillctl new x --dag-id ", env) == ["ledger", "orders_daily"]
    assert complete(tree, "backfillctl status x", {"BACKFILLCTL_SPECS_DIR": "nowhere"}) == []


def test_stop_ids_complete_from_the_store_and_nothing_without_one(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from controller.cli.complete import stop_ids  # noqa: PLC0415

    url = f"sqlite:///{tree}/state.db"
    with Store(url) as store:
        store.add_stop(EmergencyStopKind.DOWNSTREAM, "warehouse", "load", "oncall", source=StopSource.CLI)
    monkeypatch.setenv("BACKFILLCTL_STORE_URL", url)
    assert stop_ids("") == ["#1", "warehouse"]
    assert complete(tree, "backfillctl stop lift ", {"BACKFILLCTL_STORE_URL": url}) == ["#1", "warehouse"]
    assert complete(tree, "backfillctl stop lift w", {"BACKFILLCTL_STORE_URL": url}) == ["warehouse"]
    assert complete(tree, "backfillctl stop ", {"BACKFILLCTL_SPECS_DIR": "specs"}) == ["list", "lift", "alpha", "beta"]
    assert complete(tree, "backfillctl stop l", {"BACKFILLCTL_SPECS_DIR": "specs"}) == ["list", "lift"]
    assert stop_ids("#") == ["#1"]
    monkeypatch.setenv("BACKFILLCTL_STORE_URL", f"sqlite:///{tree}/missing/none.db")
    assert stop_ids("") == []
