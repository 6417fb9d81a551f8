"""What a newcomer meets at the command line, in process (no Airflow, or the fake one): output that fits the
terminal, blocked specs that do not look healthy, log lines with a time."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from controller import cli
from controller.adapters.logsetup import TextFormatter
from controller.adapters.store import Store
from controller.cli import main
from controller.commands.reconcile import PassResult
from controller.core.plan import Plan
from controller.core.status import status_rows
from controller.core.statuspage import status_page
from tests.fakes.airflow import FakeAirflow
from tests.reconcile.harness import SPEC, Bench, in_process

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
    assert out[:4] == [
        "1 spec: 1 Pending",
        "SPEC                                                         PHASE    DONE",
        f"{LONG}  Pending    0%",
        "    (stored -) not reconciled yet",
    ]


MISSING = "DAG demo_dayly does not exist in Airflow; did you mean demo_daily?"
MANUAL = (
    "DAG demo_manual has no schedule (schedule=None): it runs only when triggered, so there are no dates to "
    "backfill; Airflow cannot backfill it"
)


@pytest.fixture
def blocked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Bench]:
    """Two Blocked specs (a DAG id typo, a schedule=None DAG) and a healthy one, on the fake Airflow."""
    bench = Bench(tmp_path, fake=FakeAirflow())
    assert bench.fake is not None
    bench.fake.scheduler_running = False  # `fine` stays Running
    bench.spec("typo", dag="demo_dayly")
    bench.spec("manual", dag="demo_manual")
    bench.spec("fine", dag="demo_daily")
    in_process(bench, monkeypatch)
    yield bench
    bench.close()


def test_an_unknown_dag_suggests_the_closest_ids_from_the_listing_already_read(blocked: Bench) -> None:
    result = blocked.run()
    assert [(i.spec, i.phase.value, i.reason) for i in result.plan.items if i.spec != "fine"] == [
        ("typo", "Blocked", MISSING),
        ("manual", "Blocked", MANUAL),
    ]
    assert blocked.fake is not None
    assert blocked.fake.requests.count(("GET", "/api/v2/dags")) == 1  # the pass's own listing: no extra call


def test_one_missing_dag_costs_one_listing_for_its_suggestion(tmp_path: Path) -> None:
    bench = Bench(tmp_path, fake=FakeAirflow())
    bench.spec("typo", dag="demo_dayly")
    try:
        (item,) = bench.run().plan.items
        assert item.reason == MISSING
        assert bench.fake is not None
        assert bench.fake.requests.count(("GET", "/api/v2/dags")) == 1
    finally:
        bench.close()


def test_status_leads_with_counts_per_phase_and_lists_every_blocked_spec(
    blocked: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    blocked.run()
    capsys.readouterr()
    assert main(["status"]) == 1  # a spec's DAG cannot be used: not a clean bill of health
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "3 specs: 1 Running, 2 Blocked (degraded: 2 blocked or refused)"
    assert out[-2:] == [f"! blocked: typo: {MISSING}", f"! blocked: manual: {MANUAL}"]
    assert main(["status", "--format", "json"]) == 1
    document = json.loads(capsys.readouterr().out)
    assert document["phases"] == {"Running": 1, "Blocked": 2}
    assert document["findings"] == [
        {"kind": "blocked", "message": f"typo: {MISSING}"},
        {"kind": "blocked", "message": f"manual: {MANUAL}"},
    ]


def test_the_status_page_leads_with_the_specs_health_and_keeps_healthz_about_the_process(blocked: Bench) -> None:
    plan = blocked.run().current
    page = status_page(status_rows(plan, {}), [], datetime(2026, 12, 1, tzinfo=UTC), health="ok")
    assert 'reconciler: <span id="health">ok</span>' in page
    assert '<p class="summary" id="summary">3 specs: 1 Running, 2 Blocked (degraded: 2 blocked or refused)</p>' in page
    assert (
        f'<ul class="findings" id="findings"><li><span class="kind">blocked</span> typo: {MISSING}</li>\n'
        f'<li><span class="kind">blocked</span> manual: {MANUAL}</li></ul>'
    ) in page


def test_text_log_lines_carry_their_time_in_utc() -> None:
    record = logging.LogRecord("controller.x", logging.WARNING, __file__, 1, "pass error: %s", ("boom",), None)
    record.created = datetime(2026, 12, 1, 23, 40, 5, tzinfo=UTC).timestamp()
    assert TextFormatter().format(record) == "2026-12-01T23:40:05Z warning: pass error: boom"


def test_the_watch_log_stamps_each_line_and_says_an_error_again_only_when_it_changed(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    moments = iter(datetime(2026, 12, 1, 23, 40, n, tzinfo=UTC) for n in range(10))
    monkeypatch.setattr(cli, "_now", lambda: next(moments))
    view = cli.PassView(dry_run=False, mode="text", watch=True)
    same = PassResult(Plan((), ()), errors=["typo: DAG demo_dayly does not exist in Airflow"])
    for result in (same, same, PassResult(Plan((), ()))):
        view.show(result)
    assert capsys.readouterr().err == "2026-12-01T23:40:01Z error: typo: DAG demo_dayly does not exist in Airflow\n"
