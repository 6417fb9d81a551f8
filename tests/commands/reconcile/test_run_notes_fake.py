"""Run notes on the fake Airflow: a pass writes a bounded number of notes (the rest the next passes, then none),
and a login without DAG-run edit is told once a pass, naming the permission, while reconciling goes on."""

from __future__ import annotations

import logging

import httpx
import pytest

from controller.core.audit.vocabulary import Action
from controller.core.plan.run_notes import NOTES_PER_PASS
from controller.core.render.run_note import marker
from tests.commands.reconcile.harness import Bench

POLICY = """\
    version: 1
    airflow_notes: {dags: ["demo_*"]}
"""


def _notes(bench: Bench, dag: str = "demo_daily") -> list[str | None]:
    assert bench.fake is not None
    return [r.get("note") for (d, _), r in sorted(bench.fake.runs.items()) if d == dag]


def test_a_long_backfill_is_noted_a_bounded_number_a_pass_then_costs_nothing(bench: Bench) -> None:
    bench.policy(POLICY)
    bench.spec("long", start="2024-01-01", end="2024-09-06", mar=16)  # 250 daily runs
    patches = []
    for _ in range(4):
        before = len(bench.sent)
        bench.run()
        patches.append(sum(1 for r in bench.sent[before:] if r.method == "PATCH"))
    notes = _notes(bench)
    noted = [e for e in bench.events("long") if e.entry.action == Action.NOTE]
    assert patches == [NOTES_PER_PASS, NOTES_PER_PASS, 50, 0]
    assert len(notes) == 250
    assert {n.split("  \n")[0] for n in notes if n} == {marker("long")}
    assert sum(1 for n in notes if n) == 250
    assert [e.entry.response for e in noted] == [{"runs_noted": n, "persons_notes_kept": 0} for n in (100, 100, 50)]


def test_notes_are_off_without_the_policy_key(bench: Bench) -> None:
    bench.spec("plain", start="2024-01-01", end="2024-01-03")
    bench.run()
    bench.run()
    assert [r for r in bench.sent if r.method == "PATCH"] == []
    assert _notes(bench) == [None, None, None]


def test_a_login_without_dag_run_edit_is_told_and_the_pass_goes_on(
    bench: Bench, caplog: pytest.LogCaptureFixture
) -> None:
    assert bench.fake is not None
    bench.policy(POLICY)
    bench.spec("denied", start="2024-01-01", end="2024-01-03")
    run_path = "/api/v2/dags/demo_daily/dagRuns/backfill__2024-01-01T00:00:00+00:00"
    for _ in range(2):  # the transport logs in again once after a 403 (an expired token), then believes it
        bench.fake.fault("PATCH", run_path, lambda _r: httpx.Response(403, json={"detail": "Forbidden"}))
    with caplog.at_level(logging.WARNING, logger="controller.commands.reconcile.run_notes"):
        first = bench.run()
    assert first.errors == []
    assert [r.getMessage() for r in caplog.records if r.name == "controller.commands.reconcile.run_notes"] == [
        "denied: run notes: Airflow refused the login: run notes need DAG-run edit (`can_edit on DAG Runs`, or the "
        "DAG's `DAG Runs` edit) on DAG demo_daily"
    ]
    assert _notes(bench) == [None, None, None]
    assert bench.store.bindings()["denied"].noted is None  # the mark stays: the next pass tries again
    bench.run()
    assert [n is not None and n.startswith(marker("denied")) for n in _notes(bench)] == [True, True, True]
