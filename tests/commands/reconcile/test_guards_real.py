"""Load guards against the real Apache Airflow 3.3.2 (issue 14): a shared budget, a run window, a freeze.

Each test has its own DAGs (demo_guard_*: a 3 s task) and its own dates, and computes its window or freeze
from the current time, so it waits seconds, not hours.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from controller.commands.reconcile.reconciler import PassResult
from controller.core.model.guards import DAYS, Guard, GuardKind
from tests.commands.reconcile.harness import Bench

pytestmark = pytest.mark.airflow
GUARD_DAGS = ("demo_guard_a", "demo_guard_b", "demo_guard_c")


@pytest.fixture
def bench(tmp_path: Path, airflow_url: str) -> Iterator[Bench]:
    b = Bench(tmp_path, url=airflow_url)
    yield b
    with b.client() as client:
        for dag in GUARD_DAGS:
            for backfill in client.list_backfills(dag):
                if backfill.active:
                    client.cancel(backfill.id)
    b.close()


def active_backfills(bench: Bench, dags: tuple[str, ...], year: int) -> list[int]:
    with bench.client() as client:
        return [b.id for d in dags for b in client.list_backfills(d) if b.active and b.from_date.year == year]


def run_until(
    bench: Bench, done: Callable[[PassResult], bool], *, seconds: float, sample: Callable[[], None]
) -> PassResult:
    """Reconcile passes every 2 s (sampling Airflow every 0.5 s in between) until `done`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        result = bench.run()
        sample()
        if done(result):
            return result
        for _ in range(4):
            time.sleep(0.5)
            sample()
    raise AssertionError(
        f"not done after {seconds:.0f} s: {[(i.spec, i.phase, i.reason) for i in result.current.items]}"
    )


def z(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def test_three_specs_share_a_budget_of_four_two_at_a_time(bench: Bench) -> None:
    bench.policy("""\
        version: 1
        downstream:
          warehouse: {max_active_runs: 4}
    """)
    for name, dag in zip("abc", GUARD_DAGS, strict=True):
        bench.spec(f"bud-{name}", dag=dag, start="2022-05-01", end="2022-05-04", mar=2, downstream="[warehouse]")
    first = bench.run()
    assert sorted((i.spec, o) for i, o in first.applied) == [("bud-a", "created"), ("bud-b", "created")]
    (waiting,) = [i for i in first.current.items if i.spec == "bud-c"]
    assert (waiting.phase.value, waiting.reason, waiting.guard) == (
        "Queued",
        "waiting for warehouse budget (4 of 4 in use by bud-a, bud-b)",
        Guard(GuardKind.BUDGET, "warehouse"),
    )
    samples: list[int] = []
    done = run_until(
        bench,
        lambda r: r.settled,
        seconds=150,
        sample=lambda: samples.append(len(active_backfills(bench, GUARD_DAGS, 2022))),
    )
    assert max(samples) == 2  # never three at once
    assert bench.phases(done) == {"bud-a": "Succeeded", "bud-b": "Succeeded", "bud-c": "Succeeded"}
    queued = [e.entry.message for e in bench.events("bud-c") if e.entry.outcome == "Queued"]
    assert queued == ["waiting for warehouse budget (4 of 4 in use by bud-a, bud-b)"]
    assert bench.trail("bud-c")[1:3] == [("create", "intent", None), ("create", "outcome", "created")]
    assert bench.store.verify().ok


def test_a_closed_window_holds_the_create_until_it_opens(bench: Bench) -> None:
    now = datetime.now(UTC)
    opens = (now + timedelta(minutes=1)).replace(second=0, microsecond=0)
    if (opens - now).total_seconds() < 20:  # the first pass must surely see it closed
        opens += timedelta(minutes=1)
    end = opens + timedelta(minutes=30)
    window = f'{{days: [{DAYS[opens.weekday()]}], start: "{opens:%H:%M}", end: "{end:%H:%M}", timezone: UTC}}'
    bench.policy(f"""\
        version: 1
        windows:
          - {window}
    """)
    bench.spec("win", dag="demo_guard_a", start="2022-06-01", end="2022-06-02", mar=2)
    first = bench.run()
    assert first.applied == []
    (held,) = first.current.items
    assert (held.phase.value, held.reason, held.guard) == (
        "Queued",
        f"queued by window until {opens:%H:%M} UTC",
        Guard(GuardKind.WINDOW),
    )
    assert active_backfills(bench, ("demo_guard_a",), 2022) == []
    created = run_until(bench, lambda r: any(o == "created" for _, o in r.applied), seconds=150, sample=lambda: None)
    assert datetime.now(UTC) >= opens
    assert [(i.spec, o) for i, o in created.applied] == [("win", "created")]
    assert len(active_backfills(bench, ("demo_guard_a",), 2022)) == 1
    assert [e.entry.message for e in bench.events("win") if e.entry.outcome == "Queued"] == [
        f"queued by window until {opens:%H:%M} UTC"
    ]


def test_a_freeze_pauses_a_running_backfill_and_its_end_resumes_it(bench: Bench) -> None:
    bench.spec("frz", dag="demo_guard_b", start="2022-07-01", end="2022-07-04", mar=1)
    (created,) = bench.run().applied
    assert created[1] == "created"
    (backfill_id,) = active_backfills(bench, ("demo_guard_b",), 2022)
    start = datetime.now(UTC).replace(microsecond=0) - timedelta(seconds=1)
    end = start + timedelta(seconds=20)
    bench.policy(f"""\
        version: 1
        freeze:
          - {{from: "{z(start)}", to: "{z(end)}", reason: "guard test"}}
    """)
    paused = bench.run()
    rule = "freeze 'guard test'"
    assert [(i.spec, i.kind.value, i.reason, o) for i, o in paused.applied] == [
        ("frz", "pause", f"paused by {rule} until {z(end)}", "done")
    ]
    with bench.client() as client:
        assert client.get_backfill(backfill_id).is_paused
    held = bench.run()  # still frozen: nothing more to do, and not drift
    assert held.applied == []
    assert [(i.phase.value, i.reason) for i in held.current.items] == [("Paused", f"paused by {rule} until {z(end)}")]
    assert held.current.findings == ()
    time.sleep(max(0.0, (end - datetime.now(UTC)).total_seconds()) + 0.5)
    resumed = bench.run()
    assert [(i.kind.value, i.reason, o) for i, o in resumed.applied] == [
        ("unpause", f"resumed: {rule} no longer applies", "done")
    ]
    with bench.client() as client:
        assert not client.get_backfill(backfill_id).is_paused
    done = run_until(bench, lambda r: r.settled, seconds=120, sample=lambda: None)
    assert bench.phases(done) == {"frz": "Succeeded"}
    guard_actions = [
        (e.entry.action, e.entry.phase, e.entry.outcome, e.entry.message)
        for e in bench.events("frz")
        if e.entry.action in ("pause", "unpause")
    ]
    assert guard_actions == [
        ("pause", "intent", None, f"paused by {rule} until {z(end)}"),
        ("pause", "outcome", "done", None),
        ("unpause", "intent", None, f"resumed: {rule} no longer applies"),
        ("unpause", "outcome", "done", None),
    ]
    binding = bench.store.binding("frz")
    assert binding is not None
    assert (binding.guard, binding.applied_state.value) == (None, "active")  # the freeze's pause is over
