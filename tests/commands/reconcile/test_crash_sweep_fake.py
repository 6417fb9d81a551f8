"""The record never lies after a crash: the process is killed between every pair of writes a create makes (its
intent, the binding before the call, the call, its outcome with its binding), and the passes after it end exactly
as an uninterrupted run does — the phase, the counts, the failed dates, one outcome record and one terminal
notification. A lost save used to adopt a half-failed backfill as `Succeeded` with 0 runs."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from controller.adapters.store import Store
from controller.commands.reconcile import apply
from controller.core.model.binding import Binding, Phase
from tests.commands.reconcile.harness import Bench, count_calls, fake
from tests.fakes.airflow import FakeAirflow

POLICY = """\
version: 1
notify:
  receivers: {team: {webhook_env: BACKFILLCTL_WEBHOOK_TEAM, format: json}}
  default_receivers: [team]
"""


class Killed(BaseException):
    """What SIGKILL is to the process: nothing after it runs."""


@dataclass(frozen=True, slots=True)
class Ending:
    phase: str
    reason: str
    counts: dict[str, int]
    failed_dates: list[str]
    outcome_records: int  # observe records of a terminal phase
    notifications: list[str]  # the outbox's events, in order
    posts: int


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[Bench]:
    b = Bench(tmp_path, fake=FakeAirflow())
    b.policy(POLICY)
    b.spec("flaky", dag="demo_flaky", end="2025-01-06", mar=2)
    yield b
    b.close()


def kill_after_intent(bench: Bench, monkeypatch: pytest.MonkeyPatch) -> None:
    append = bench.store.append

    def dying(entry: Any, *args: Any, **kwargs: Any) -> Any:
        record = append(entry, *args, **kwargs)
        if (entry.action, entry.phase) == ("create", "intent"):
            raise Killed
        return record

    monkeypatch.setattr(bench.store, "append", dying)


def kill_after_the_binding_before_the_call(bench: Bench, monkeypatch: pytest.MonkeyPatch) -> None:
    save = bench.store.save_binding

    def dying(binding: Binding) -> None:
        save(binding)
        if binding.reason == "creating":
            raise Killed

    monkeypatch.setattr(bench.store, "save_binding", dying)


def kill_after_the_call(bench: Bench, monkeypatch: pytest.MonkeyPatch) -> None:
    """Airflow made the backfill; its answer and everything after it are lost."""
    create = bench.client().create.__func__  # type: ignore[attr-defined]

    def dying(self: Any, body: Any) -> Any:
        create(self, body)
        raise Killed

    monkeypatch.setattr(type(bench.client()), "create", dying)


def kill_after_the_outcome(bench: Bench, monkeypatch: pytest.MonkeyPatch) -> None:
    """The create's outcome and binding are committed (one transaction); the pass dies before anything else."""
    original = apply.Applier._try_create

    def dying(self: Any, *args: Any) -> Any:
        original(self, *args)
        raise Killed

    monkeypatch.setattr(apply.Applier, "_try_create", dying)


def kill_inside_the_outcome(bench: Bench, monkeypatch: pytest.MonkeyPatch) -> None:
    """Between the outcome record and the binding: one transaction, so neither is committed."""
    save = bench.store.save_binding

    def dying(binding: Binding) -> None:
        if binding.reason == "created":
            raise Killed
        save(binding)

    monkeypatch.setattr(bench.store, "save_binding", dying)


KILLS: dict[str, Callable[[Bench, pytest.MonkeyPatch], None]] = {
    "after-intent": kill_after_intent,
    "after-binding": kill_after_the_binding_before_the_call,
    "after-call": kill_after_the_call,
    "inside-outcome": kill_inside_the_outcome,
    "after-outcome": kill_after_the_outcome,
}


def run_to_the_end(bench: Bench) -> Ending:
    for _ in range(12):
        result = bench.run()
        fake(bench).tick()
        if result.settled and not any(i.kind.change for i in result.current.items):
            break
    with Store(bench.store_url) as store:
        binding = store.binding("flaky")
        assert binding is not None
        events = [e for e in store.events() if e.entry.spec_name == "flaky"]  # type: ignore[union-attr]
        rows = store.undelivered_notifications()
    runs = binding.runs
    assert runs is not None
    return Ending(
        binding.phase.value,
        binding.reason,
        {state: runs.count(state) for state in ("success", "failed", "running", "queued")},
        [d.isoformat()[:10] for d in runs.failed_dates],
        sum(1 for e in events if e.entry.action == "observe" and Phase(e.entry.outcome).terminal),
        [r.event for r in rows],
        count_calls(fake(bench).requests)["POST /api/v2/backfills"],
    )


UNINTERRUPTED = Ending(
    "CompletedWithFailures",
    "failed: 2025-01-01, 2025-01-03, 2025-01-05",
    {"success": 3, "failed": 3, "running": 0, "queued": 0},
    ["2025-01-01", "2025-01-03", "2025-01-05"],
    1,
    ["created", "completed_with_failures"],
    1,
)


def test_an_uninterrupted_run_ends_with_its_failures(bench: Bench) -> None:
    assert run_to_the_end(bench) == UNINTERRUPTED


@pytest.mark.parametrize("kill", list(KILLS), ids=list(KILLS))
def test_a_kill_between_any_two_writes_of_a_create_ends_as_an_uninterrupted_run(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, kill: str
) -> None:
    with monkeypatch.context() as dying:
        KILLS[kill](bench, dying)
        with pytest.raises(Killed):
            bench.run()
    for _ in range(5):  # the process stays down while Airflow runs what it created, to the end
        fake(bench).tick()
    assert run_to_the_end(bench) == UNINTERRUPTED


def test_a_lost_binding_save_after_the_backfill_finished_reads_its_runs_before_adopting(bench: Bench) -> None:
    """The reported case: the binding as it was before the create is put back, the backfill finishes, a pass."""
    bench.run()
    with Store(bench.store_url) as store:
        before = store.binding("flaky")
    assert before is not None
    for _ in range(5):
        fake(bench).tick()
    bench.store.save_binding(Binding("flaky", "demo_flaky", None, Phase.PENDING, reason="creating"))
    ending = run_to_the_end(bench)
    assert (ending.phase, ending.failed_dates, ending.counts["failed"]) == (
        "CompletedWithFailures",
        ["2025-01-01", "2025-01-03", "2025-01-05"],
        3,
    )
    assert (ending.outcome_records, ending.notifications.count("completed_with_failures")) == (1, 1)
