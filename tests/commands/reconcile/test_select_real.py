"""Selecting by code against the real Apache Airflow, whose demo DAG changes code mid-history: a `select` spec pinned
to the new version re-runs only the intervals whose latest run failed, never ran or ran on the old code, one
backfill a contiguous sub-range (checked in Airflow), never touches an interval already on the target, and ends with
full version coverage."""

from __future__ import annotations

import random
import time
import uuid
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from controller.cli import main
from controller.core.render.pr_comment import pr_comment
from tests.commands.reconcile.harness import Bench, in_process

pytestmark = pytest.mark.airflow


class Code:
    """demo_evolving's code (examples/dags/demo_evolving.py): the Variable its file reads when parsed, and a parse
    asked for through the API until the DAG's docs say the new code."""

    def __init__(self, url: str) -> None:
        token = httpx.post(f"{url}/auth/token", json={"username": "admin", "password": "admin"}).json()["access_token"]
        self.http = httpx.Client(base_url=f"{url}/api/v2", headers={"Authorization": f"Bearer {token}"}, timeout=30)

    def details(self) -> dict[str, Any]:
        answer = self.http.get("/dags/demo_evolving/details")
        assert answer.status_code == 200, answer.text
        return dict(answer.json())

    def deploy(self, number: int, *, after: int = 0, timeout: float = 180) -> int:
        """Code `number` parsed, as a version above `after`; the DAG's latest version number then."""
        body = {"key": KEY, "value": str(number)}
        if self.http.patch(f"/variables/{KEY}", json=body).status_code == 404:
            assert self.http.post("/variables", json=body).status_code == 201
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            details = self.details()
            version = int(details["latest_dag_version"]["version_number"])
            if details["doc_md"] == f"code {number}" and version > after:
                return version
            self.http.put(f"/parseDagFile/{details['file_token']}")  # a parse asked for may miss a fresh value
            time.sleep(3)
        seen = self.details()
        raise AssertionError(
            f"demo_evolving says {seen['doc_md']!r} on version {seen['latest_dag_version']['version_number']} after "
            f"{timeout} s (wanted code {number} above version {after})"
        )


KEY = "demo_evolving_code"


def lose_store(bench: Bench) -> None:
    """The store is lost: a new, empty one at the same place."""
    bench.store.close()
    Path(str(bench.store.url).removeprefix("sqlite:///")).unlink()
    bench.store = type(bench.store)(bench.store_url)


def test_after_a_code_change_a_select_spec_re_runs_only_what_older_code_made(
    tmp_path: Path, airflow_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """demo_evolving's code 1 fails on the 2nd; code 2 fixes it. History: days 1-4 on code 1 (the 2nd failed), then
    days 3-4 re-run on code 2. `select: {code_version: <code 2's version>}` over days 1-5 re-runs exactly 1-2 and 5
    (checked in Airflow), never 3-4, and ends Succeeded with full version coverage."""
    code = Code(airflow_url)
    month = date(random.Random(uuid.uuid4().int).randint(2010, 2014), random.Random(uuid.uuid4().int).randint(1, 12), 1)
    day = {n: month.replace(day=n).isoformat() for n in range(1, 6)}
    bench = Bench(tmp_path, url=airflow_url)
    try:
        old = code.deploy(1)
        client = bench.client()
        bench.spec("code-1", dag="demo_evolving", start=day[1], end=day[4], reprocess="none", mar=4)
        assert bench.until_terminal(passes=60, wait=lambda: time.sleep(2)).plan.items[0].phase.value == (
            "CompletedWithFailures"
        )
        new = code.deploy(2, after=old)  # runs used the old code: the new code is a new DAG version
        bench.spec("code-2", dag="demo_evolving", start=day[3], end=day[4], reprocess="completed", mar=2)
        bench.until_terminal(passes=60, wait=lambda: time.sleep(2))
        low = datetime.fromisoformat(day[1]).replace(tzinfo=UTC)
        high = datetime.fromisoformat(day[5]).replace(tzinfo=UTC)
        history = {r.logical_date: r for r in client.dag_runs("demo_evolving", low, high)}
        assert sorted((d.day, r.state, [v.number for v in r.dag_versions]) for d, r in history.items() if d) == [
            (1, "success", [old]),
            (2, "failed", [old]),
            (3, "success", [old, new]),  # Airflow lists every version a run's task instances ran on
            (4, "success", [old, new]),
        ]
        before = {b.id for b in client.list_backfills("demo_evolving")}
        bench.spec(
            "fix",
            dag="demo_evolving",
            start=day[1],
            end=day[5],
            reprocess="completed",
            mar=2,
            select=f"{{code_version: {new}}}",
        )
        plan = bench.reconciler().plan().plan
        (item,) = [i for i in plan.items if i.spec == "fix"]
        assert item.selection is not None
        assert item.code_in_range is not None
        shown = (
            f"re-runs 3 of 5 intervals in 2 backfills: 1 on version {old} or older; 1 failed; 1 never ran; "
            f"2 already on version {new}"
        )
        assert item.selection.text() == shown
        in_range = item.code_in_range.text()
        assert in_range == (
            f"code in range: DAG version {new}: 2 intervals, DAG version {old}: 2 intervals; 1 failed, "
            "1 interval without a run"
        )
        comment = pr_comment(plan, ["specs/fix.yaml"], {}).splitlines()
        assert (f"- {shown}" in comment, f"- {in_range}" in comment) == (True, True)
        kept = {d: r.start_date for d, r in history.items() if d is not None and d.day in (3, 4)}
        assert [(i.spec, o.value) for i, o in bench.run().applied] == [("fix", "created")]  # days 1-2
        (first,) = [b.id for b in client.list_backfills("demo_evolving") if b.id not in before]
        deadline = time.monotonic() + 300
        while client.get_backfill(first).active and time.monotonic() < deadline:
            time.sleep(2)
        lose_store(bench)  # between its sub-ranges: the next is read again from Airflow
        reasons = []
        for _ in range(90):
            result = bench.run()
            reasons += [i.reason for i in result.plan.items if i.spec == "fix"]
            if result.settled:
                break
            time.sleep(2)
        last = result
        made = sorted(
            (b.from_date.day, b.to_date.day, b.reprocess_behavior, b.max_active_runs)
            for b in client.list_backfills("demo_evolving")
            if b.id not in before
        )
        after = {r.logical_date: r for r in client.dag_runs("demo_evolving", low, high)}
        binding = bench.store.binding("fix")
        in_process(bench, monkeypatch)
        capsys.readouterr()
        checked = main(["report", "fix", "--check"])  # the change record's coverage, read again from Airflow
        record = capsys.readouterr().out
    finally:
        bench.close()
        code.http.close()
    assert made == [(1, 2, "completed", 2), (5, 5, "completed", 2)]
    assert "select: its selection read again from Airflow after a lost store: 1 sub-range(s) run, 1 left" in reasons
    assert {d: after[d].start_date for d in kept} == kept  # days 3 and 4 were never re-run
    assert sorted((d.day, r.state, [v.number for v in r.dag_versions]) for d, r in after.items() if d) == [
        (1, "success", [old, new]),
        (2, "success", [old, new]),
        (3, "success", [old, new]),
        (4, "success", [old, new]),
        (5, "success", [new]),
    ]
    assert (next(i for i in last.plan.items if i.spec == "fix")).phase.value == "Succeeded"
    assert binding is not None
    assert binding.coverage is not None
    assert binding.coverage.text() == f"version coverage: 5 of 5 intervals on DAG version {new}"
    assert (checked, record.splitlines()[0]) == (
        0,
        f"fix: coverage holds: version coverage: 5 of 5 intervals on DAG version {new}; target: the DAG's latest "
        "version when the spec ended",
    )
