"""Run notes against the real Apache Airflow: each run of a managed backfill carries a note naming its spec and
ticket, read back through Airflow's API; a note a person wrote on a re-run run is kept, ours below it, once."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from controller.core.audit.vocabulary import Action
from controller.core.render.run_note import SEPARATOR
from tests.commands.reconcile.harness import Bench

pytestmark = pytest.mark.airflow

OURS = "**backfillctl** spec `noted`  \n- ticket: `CHG-1`  \n- reason: A test backfill for reconcile."
PERSON = "Checked by hand — Ana"


def _finished_manual_run(bench: Bench) -> None:
    client = bench.client()
    client.server.json(
        "POST",
        "/api/v2/dags/demo_daily/dagRuns",
        json={"dag_run_id": "manual_noted_by_person", "logical_date": "2016-05-02T00:00:00Z", "note": PERSON},
    )
    for _ in range(60):
        run = client.server.json("GET", "/api/v2/dags/demo_daily/dagRuns/manual_noted_by_person")
        if run["state"] in ("success", "failed"):
            return
        time.sleep(1)
    raise AssertionError("the manual run did not finish in 60 s")


def test_each_run_carries_the_note_and_a_person_s_note_is_kept(tmp_path: Path, airflow_url: str) -> None:
    bench = Bench(tmp_path, url=airflow_url)
    bench.environ |= {
        "BACKFILLCTL_AIRFLOW_NOTES_USERNAME": "operator",
        "BACKFILLCTL_AIRFLOW_NOTES_PASSWORD": "operator",
    }
    try:
        _finished_manual_run(bench)
        bench.policy("""\
            version: 1
            airflow_notes:
              dags: [demo_daily]
              fields: [ticket, reason]
        """)
        bench.spec("noted", dag="demo_daily", start="2016-05-01", end="2016-05-03", reprocess="completed", mar=3)
        bench.until_terminal(passes=60, wait=lambda: time.sleep(2))
        patches = [r for r in bench.sent if r.method == "PATCH"]
        sent_before = len(bench.sent)
        bench.run()  # the notes are complete: a later pass writes none and lists none
        notes_login = {r.headers["authorization"] for r in patches}
        later = [r for r in bench.sent[sent_before:] if r.headers.get("authorization") in notes_login]
        runs = bench.client().server.json(
            "GET",
            "/api/v2/dags/demo_daily/dagRuns",
            params={"logical_date_gte": "2016-05-01T00:00:00Z", "logical_date_lte": "2016-05-03T00:00:00Z"},
        )["dag_runs"]
        noted = [e for e in bench.events("noted") if e.entry.action == Action.NOTE]
    finally:
        bench.close()
    by_date = {datetime.fromisoformat(r["logical_date"]).astimezone(UTC).day: r["note"] for r in runs}
    assert by_date == {1: OURS, 2: PERSON + SEPARATOR + OURS, 3: OURS}
    assert [(e.entry.response, e.entry.message) for e in noted] == [
        (
            {"runs_noted": 3, "persons_notes_kept": 1},
            "Airflow run notes written on 3 runs (1 below a person's note, kept)",
        )
    ]
    assert [call for call in later if "PATCH" in call or ("dagRuns" in call and "noted" in call)] == []
