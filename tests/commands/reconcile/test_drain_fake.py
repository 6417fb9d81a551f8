"""A drain from plan to the paused DAG, on the fake Airflow speaking 3.4 (`drain_dag` accepted; a drain's DAG paused
when nothing of its backfill is left, as PR #72407 does): the plan says what it holds back and what catchup does on
unpause (one details call), the outcome says the DAG is paused by drain (not a stop) in `status` and in the terminal
notification, which names the DAG's downstream owners; the next spec on the DAG is blocked until a person unpauses
it, and backfillctl never unpauses it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from packaging.version import Version

from controller.core.model.capabilities import Capabilities, capabilities_of
from controller.core.render.status import status_rows
from tests.commands.reconcile import harness
from tests.commands.reconcile.harness import Bench, fake
from tests.commands.reconcile.test_drain_real import next_waits_for_a_person
from tests.fakes.airflow import FakeAirflow

DAG = "demo_daily"
POLICY = f"""\
version: 1
drain:
  allowed_dags: [{DAG}]
downstream:
  warehouse: {{max_active_runs: 8, owners: [olga, pete], dags: [{DAG}]}}
notify:
  receivers:
    ops: {{webhook_env: HOOK_OPS, format: json}}
  default_receivers: [ops]
"""
PAUSED = (
    f"DAG {DAG} is paused by drain (not a stop) once none of its runs is left unfinished: backfillctl never unpauses "
    "it, and specs "
    "queued on it wait until a person unpauses it; unpausing it is for its downstream owners to decide: warehouse "
    "(olga, pete)"
)


def preview() -> Capabilities:
    """3.4's drain, without its slots endpoint (which the fake does not serve: counts come from the runs)."""
    return replace(capabilities_of(Version("3.4.0b2"), "3.4.0b2"), backfill_slots=False)


@pytest.fixture
def bench(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Bench]:
    monkeypatch.setattr(harness, "newest", preview)  # the bench's clients speak 3.4, as the fake says it is
    airflow = FakeAirflow()
    airflow.version = "3.4.0b2"
    made = Bench(tmp_path, fake=airflow)
    made.policy(POLICY)
    yield made
    made.close()


def test_a_drain_is_planned_with_what_it_holds_back_and_leaves_its_dag_paused(bench: Bench) -> None:
    bench.spec("drained", dag=DAG, end="2025-01-03", mar=3, drain_dag="true", downstream="[warehouse]")
    planned = bench.reconciler().plan().plan
    (item,) = planned.items
    assert item.drain is not None
    assert item.drain.lines()[1] == (
        f"drain: DAG {DAG} has catchup: false: when a person unpauses it, the scheduler creates only the latest "
        "interval; the others missed while it was drained and paused are skipped (a data gap: backfill them with a "
        "new spec)"
    )
    details = [r for r in bench.sent if r.url.path == f"/api/v2/dags/{DAG}/details"]
    assert len(details) >= 1

    done = bench.until_terminal()
    assert bench.phases(done) == {"drained": "Succeeded"}
    assert fake(bench).dags[DAG].is_paused  # Airflow paused it when the drain ended
    (finished,) = done.current.items
    assert finished.reason.endswith(PAUSED)
    (row,) = status_rows(done.current, bench.store.bindings())
    assert row.note.endswith(PAUSED)

    rows = bench.store.due_notifications("9999")
    succeeded = [r for r in rows if r.event == "succeeded"]
    assert len(succeeded) == 1
    assert succeeded[0].receiver == "ops"
    assert succeeded[0].facts["drain_dag"] is True
    assert str(succeeded[0].facts["message"]).endswith(PAUSED)

    again = bench.run()  # recorded: said once, not appended again
    (kept,) = again.current.items
    assert kept.reason.count("paused by drain") == 1
    next_waits_for_a_person(bench, DAG, "2025-01-05", "2025-01-06")
