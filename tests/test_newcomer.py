"""What a newcomer meets at the command line, in process (no Airflow): output that fits the terminal."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.adapters.store import Store
from controller.cli import main
from tests.reconcile.harness import SPEC

LONG = "orders-2025q1-rounding-fix-for-the-finance-warehouse-reload"


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    specs = tmp_path / "specs"
    specs.mkdir()
    text = SPEC.format(
        name=LONG, dag="demo_hourly", start="2025-02-01", end="2025-02-01T23:00:00Z", reprocess="none", mar=1
    )
    (specs / f"{LONG}.yaml").write_text(text)
    store = f"sqlite:///{tmp_path}/state.db"
    Store(store).close()
    monkeypatch.delenv("BACKFILLCTL_AIRFLOW_URL", raising=False)
    monkeypatch.setenv("BACKFILLCTL_STORE_URL", store)
    monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", str(specs))
    return specs


def test_status_fits_columns_80_and_keeps_the_name_whole(
    tree: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    assert main(["status"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert max(map(len, out)) <= 80
    assert out[:3] == [
        "SPEC                                                         PHASE    DONE",
        f"{LONG}  Pending    0%",
        "    (stored -) not reconciled yet",
    ]
