"""Each spec counts only its own runs, against the real Apache Airflow 3.3.2 (`demo_halting`: hourly, the
hours 00, 03, 06 … fail).

Every test takes a day of its own (a random one in 1990–2009), so it shares a session's Airflow with the others
and runs again on an Airflow kept from an earlier session (the first spec reprocesses `completed`: it runs
every hour whatever is there); the teardown cancels only the backfills its own store owns. Specs are queued by
name (no git here): `a-…` first.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest

from controller.adapters.store import Store
from controller.adapters.store.audit_log import EventFilter
from controller.commands.reconcile.reconciler import PassResult
from controller.core.documents.escaping import md_text
from controller.core.plan.values import Item
from tests.commands.reconcile.harness import Bench

pytestmark = pytest.mark.airflow
DAG = "demo_halting"


@pytest.fixture
def bench(tmp_path: Path, airflow_url: str) -> Iterator[Bench]:
    b = Bench(tmp_path, url=airflow_url)
    yield b
    ours = {i for binding in b.store.bindings().values() for i in binding.backfills}
    with b.client() as client:
        for backfill in client.list_backfills(DAG):
            if backfill.active and backfill.id in ours:
                client.cancel(backfill.id)
    b.close()


def a_day() -> Callable[[int], datetime]:
    """Hour n of a day of this test's own."""
    first = datetime(1990, 1, 1, tzinfo=UTC) + timedelta(days=secrets.randbelow(20 * 365))
    return lambda n: first + timedelta(hours=n)


def z(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def failed(*moments: datetime) -> str:
    return "failed: " + ", ".join(m.date().isoformat() for m in moments)


def hour(moment: datetime) -> str:
    """How a re-run names its date: the day at midnight, else the day and hour."""
    return moment.strftime("%Y-%m-%d" if moment.hour == 0 else "%Y-%m-%d %H:%M")


def items(result: PassResult) -> dict[str, Item]:
    return {i.spec: i for i in result.current.items}


def until_finished(bench: Bench, *names: str, seconds: float = 240) -> PassResult:
    """Passes every 2 s until every named spec has a terminal phase (Airflow completes a backfill at a 30 s tick)."""
    deadline = time.monotonic() + seconds
    while True:
        result = bench.run()
        if all(items(result)[n].phase.terminal for n in names):
            return result
        assert time.monotonic() < deadline, [(i.spec, i.phase.value, i.reason) for i in result.current.items]
        time.sleep(2)


def outcome(item: Item) -> tuple[str, str, dict[str, int]]:
    assert item.runs is not None
    return item.phase.value, item.reason, dict(item.runs.counts)


def test_b_reprocessing_failed_after_a_reports_only_what_it_re_ran(bench: Bench) -> None:
    """Hours 0–6: A runs all (0, 3, 6 fail), B (`failed`) re-runs the 3 failures. Before: B counted every run
    of the range, A's four successes too (7 runs). Now: the 3 it re-ran."""
    h = a_day()
    bench.spec("a-first", dag=DAG, start=z(h(0)), end=z(h(6)), reprocess="completed", mar=7)
    bench.spec("b-failed", dag=DAG, start=z(h(0)), end=z(h(6)), reprocess="failed", mar=7)
    final = items(until_finished(bench, "a-first", "b-failed"))
    three = failed(h(0), h(3), h(6))
    assert outcome(final["a-first"]) == ("CompletedWithFailures", three, {"failed": 3, "success": 4})
    assert outcome(final["b-failed"]) == ("CompletedWithFailures", three, {"failed": 3})
    (intent,) = [e for e in bench.events("b-failed") if e.entry.phase == "intent"]
    assert intent.entry.request is not None
    assert intent.entry.request["dates"] == [[h(0).isoformat(), h(6).isoformat(), 3]]  # every third hour
    b_id = final["b-failed"].backfill_id
    report = bench.cli("report", "a-first")
    assert report.returncode == 0, report.stderr
    reruns = report.stdout.split("## Re-run since\n", 1)[1].split("## Calendar", 1)[0]
    assert [line for line in reruns.splitlines() if line.startswith("- ")] == [
        "- " + md_text(f"{hour(h(n))} re-run by spec b-failed (#{b_id}), now failed") for n in (0, 3, 6)
    ]
    assert "- **Outcome**: CompletedWithFailures" in report.stdout  # A's own outcome stays what its runs did
    assert "- **Intervals**: 4 complete, 3 failed" in report.stdout


def test_c_none_overlapping_a_counts_only_the_dates_it_ran(bench: Bench) -> None:
    """A runs hours 0–4 (0 and 3 fail); C (`none`) over hours 3–5 runs only hour 5. Before: C was
    CompletedWithFailures with A's failure of hour 3. Now: Succeeded, 1 run."""
    h = a_day()
    bench.spec("a-first", dag=DAG, start=z(h(0)), end=z(h(4)), reprocess="completed", mar=5)
    bench.spec("c-overlap", dag=DAG, start=z(h(3)), end=z(h(5)), reprocess="none", mar=2)
    final = items(until_finished(bench, "a-first", "c-overlap"))
    assert outcome(final["a-first"]) == ("CompletedWithFailures", failed(h(0), h(3)), {"failed": 2, "success": 3})
    assert outcome(final["c-overlap"]) == ("Succeeded", "1 run(s) succeeded", {"success": 1})
    c = bench.store.binding("c-overlap")
    assert c is not None
    assert c.created is not None
    assert (c.created.runs_to_create, c.created.runs_in_range, c.created.own_dates) == (1, 3, [h(5)])


def test_a_spec_readopted_after_a_lost_store_does_not_claim_what_a_later_spec_re_ran(
    bench: Bench, tmp_path: Path
) -> None:
    """A runs hours 0–3 (0 and 3 fail), B (`failed`) re-runs 0 and 3; the store is lost; both are adopted.
    A's own runs are the two still queued inside its creation window; the other two were queued again by B,
    so what A's runs did there is gone from Airflow: never success, said as unknown, with who re-ran them."""
    h = a_day()
    bench.spec("a-first", dag=DAG, start=z(h(0)), end=z(h(3)), reprocess="completed", mar=4)
    bench.spec("b-failed", dag=DAG, start=z(h(0)), end=z(h(3)), reprocess="failed", mar=4)
    before = items(until_finished(bench, "a-first", "b-failed"))
    b_id = before["b-failed"].backfill_id
    bench.store.close()
    (tmp_path / "state.db").unlink()
    bench.store = Store(bench.store_url)
    adopting = bench.run()
    assert sorted((i.spec, o) for i, o in adopting.applied) == [("a-first", "adopted"), ("b-failed", "adopted")]
    after = items(adopting)
    # the phase's reason is the outcome, as a pass that saw it finish records it; the adoption is its own record
    a_said = (
        "2 run(s) succeeded; outcome unknown for 2 date(s) re-run before backfillctl recorded them: "
        f"{hour(h(0))} re-run by spec b-failed (#{b_id}), now failed and 1 more"
    )
    assert outcome(after["a-first"]) == ("CompletedWithFailures", a_said, {"success": 2})
    assert outcome(after["b-failed"]) == ("CompletedWithFailures", failed(h(0), h(3)), {"failed": 2})
    adoptions = [e.entry.message for e in bench.store.events(EventFilter(action="adopt"))]
    assert sorted(adoptions) == sorted(
        f"adopt backfill #{i} (matches the spec, not bound); {why}"
        for i, why in ((before["a-first"].backfill_id, a_said), (b_id, failed(h(0), h(3))))
    )
    a = bench.store.binding("a-first")
    assert a is not None
    assert a.created is not None
    assert a.created.own_dates == [h(1), h(2)]


def test_a_run_cleared_by_hand_after_the_backfill_finished(bench: Bench, airflow_url: str) -> None:
    """Hour 2 succeeded in A's backfill, then someone clears it in Airflow's UI: it runs again. A's outcome
    (recorded when its backfill finished) is unchanged; its change record shows who re-ran hour 2."""
    h = a_day()
    bench.spec("a-first", dag=DAG, start=z(h(2)), end=z(h(3)), reprocess="completed", mar=2)
    final = items(until_finished(bench, "a-first"))
    assert outcome(final["a-first"]) == ("CompletedWithFailures", failed(h(3)), {"failed": 1, "success": 1})
    with bench.client() as client:
        (run,) = client.dag_runs(DAG, h(2), h(2))
    token = httpx.post(f"{airflow_url}/auth/token", json={"username": "admin", "password": "admin"}, timeout=30)
    headers = {"Authorization": f"Bearer {token.json()['access_token']}"}
    cleared = httpx.post(
        f"{airflow_url}/api/v2/dags/{DAG}/dagRuns/{run.run_id}/clear",
        json={"dry_run": False},
        headers=headers,
        timeout=30,
    )
    assert cleared.status_code == 200, cleared.text
    deadline = time.monotonic() + 120
    while True:  # it runs again, and succeeds (hour 2)
        with bench.client() as client:
            (again,) = client.dag_runs(DAG, h(2), h(2))
        if again.state == "success" and again.queued_at != run.queued_at:
            break
        assert time.monotonic() < deadline, again
        time.sleep(2)
    assert outcome(items(bench.run())["a-first"]) == (
        "CompletedWithFailures",
        failed(h(3)),
        {"failed": 1, "success": 1},
    )
    report = bench.cli("report", "a-first")
    assert report.returncode == 0, report.stderr
    section = (
        f"## Re-run since\n\nIts own outcome stays what its runs did.\n\n- {hour(h(2))} re-run by hand, now success\n"
    )
    assert section in report.stdout


def test_a_chunk_of_four_with_two_failures_halts_and_no_second_chunk_starts(bench: Bench) -> None:
    """`chunk_runs: 4`, `halt_on_failure_ratio: 0.3`: hours 0–3 fail at 0 and 3 (2 of 4, 50 %). Before: fewer
    than 5 finished, chunk 2 was created anyway. Now: Halted at the chunk boundary, one backfill only."""
    h = a_day()
    execution = "{chunk_runs: 4, halt_on_failure_ratio: 0.3}"
    bench.spec("a-halting", dag=DAG, start=z(h(0)), end=z(h(7)), reprocess="completed", mar=4, execution=execution)
    deadline = time.monotonic() + 240
    while True:
        result = bench.run()
        item = items(result)["a-halting"]
        if item.phase.value == "Halted":
            break
        assert item.phase.value in ("Pending", "Running"), (item.phase, item.reason)
        assert time.monotonic() < deadline, item.reason
        time.sleep(2)
    assert (
        item.reason == "halted: 2 of 4 finished runs failed (50% > 30%); fix the cause, then set a new `resume` value"
    )
    time.sleep(3)
    again = items(bench.run())["a-halting"]
    assert (again.phase.value, again.kind.value) == ("Halted", "noop")
    binding = bench.store.binding("a-halting")
    assert binding is not None
    assert binding.progress is not None
    assert len(binding.progress.chunks) == 1
    with bench.client() as client:
        ours = [b for b in client.list_backfills(DAG) if b.from_date >= h(0) and b.to_date <= h(7)]
    assert [(b.from_date, b.to_date) for b in ours] == [(h(0), h(3))]


def test_a_partitioned_dag_runs_in_chunks_of_partitions(bench: Bench) -> None:
    """`demo_partitioned` (odd days fail), 8 partitions in chunks of 4. Before: refused at plan time ("chunked
    execution is not supported for partitioned DAGs yet"). Now: two backfills of 4 partitions, one after the
    other, and the outcome of every partition's own run."""
    first = datetime(1990, 1, 1, tzinfo=UTC) + timedelta(days=30 * secrets.randbelow(240))
    first = first.replace(day=1)
    day = [first + timedelta(days=n) for n in range(8)]  # days 1–8 of a month of its own
    bench.spec(
        "a-parts",
        dag="demo_partitioned",
        start=z(day[0]),
        end=z(day[7]),
        reprocess="completed",
        mar=4,
        execution="{chunk_runs: 4}",
    )
    final = items(until_finished(bench, "a-parts", seconds=300))["a-parts"]
    keys = ", ".join(d.strftime("%Y-%m-%dT00:00:00") for d in day[0::2])
    assert outcome(final) == ("CompletedWithFailures", f"failed partitions: {keys}", {"failed": 4, "success": 4})
    binding = bench.store.binding("a-parts")
    assert binding is not None
    assert binding.progress is not None
    assert [(c.first, c.last, c.runs) for c in binding.progress.chunks] == [(day[0], day[3], 4), (day[4], day[7], 4)]
    with bench.client() as client:
        ours = [b for b in client.list_backfills("demo_partitioned") if b.id in binding.progress.ids]
    assert [(b.from_date, b.to_date) for b in ours] == [(day[0], day[3]), (day[4], day[7])]
