"""Issue 23's last gap against the real Apache Airflow 3.3.2: in a pass over two DAGs (their infos from the DAG
listing, which has no `rerun_with_latest_version`), the create on examples/dags/demo_pinned_code.py, whose DAG sets
`rerun_with_latest_version=False`, sends `run_on_latest_version: false`; the other DAG's create sends true. Each
creating DAG has its details read once; nothing else is."""

from __future__ import annotations

import secrets
from datetime import date, timedelta
from pathlib import Path

import pytest

from tests.commands.reconcile.harness import real_bench
from tests.fakes.calls import record_calls

pytestmark = pytest.mark.airflow
DAGS = ("demo_pinned_code", "demo_daily")
FIRST = date(2003, 1, 1) + timedelta(days=3 * secrets.randbelow(600))  # days of its own (the Airflow is shared)
LAST = FIRST + timedelta(days=1)


def test_the_dags_own_false_reaches_the_create_in_a_pass_over_two_dags(tmp_path: Path, airflow_url: str) -> None:
    with real_bench(tmp_path, airflow_url, *DAGS) as bench:
        assert bench.client().dag("demo_pinned_code", with_tasks=False).rerun_with_latest_version is False
        for dag in DAGS:
            bench.spec(f"code-{dag}", dag=dag, start=str(FIRST), end=str(LAST), reprocess="completed", mar=1)
        reconciler = bench.reconciler()
        calls = record_calls(reconciler.client)
        result = reconciler.run_once()
        assert sorted((i.spec, o.value) for i, o in result.applied) == [
            ("code-demo_daily", "created"),
            ("code-demo_pinned_code", "created"),
        ]
        sent = {
            e.entry.dag_id: (e.entry.request or {})["body"].get("run_on_latest_version")
            for e in bench.events()
            if (e.entry.action, e.entry.phase) == ("create", "intent")
        }
        assert sent == {"demo_pinned_code": False, "demo_daily": True}
        assert sorted(p for _m, p in calls if p.endswith("/details")) == [
            "/api/v2/dags/demo_daily/details",
            "/api/v2/dags/demo_pinned_code/details",
        ]
        assert calls.count(("GET", "/api/v2/dags")) == 1
