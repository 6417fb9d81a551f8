"""The scheduler brake and guard bookkeeping on the fake Airflow (fault injection): pause, hold, resume, audit."""

from __future__ import annotations

import httpx
import pytest

from controller.core.model.guards import Guard, GuardKind
from tests.commands.reconcile.harness import Bench, fake

BRAKE = """\
    version: 1
    scheduler_guard: {pause_when_unhealthy: true}
"""


def test_an_unhealthy_scheduler_pauses_and_its_recovery_resumes(bench: Bench) -> None:
    bench.policy(BRAKE)
    bench.spec("brk")
    fake(bench).scheduler_running = False  # runs stay queued, so the backfill is still running when the brake acts
    fake(bench).health_status = "healthy"
    assert [o for _, o in bench.run().applied] == ["created"]
    (backfill,) = fake(bench).backfills.values()
    fake(bench).health_status = "unhealthy"
    paused = bench.run()
    reason = "paused by scheduler guard (scheduler status 'unhealthy')"
    assert [(i.kind.value, i.reason, o) for i, o in paused.applied] == [("pause", reason, "done")]
    assert backfill["is_paused"] is True
    binding = bench.store.binding("brk")
    assert binding is not None
    assert (binding.guard, binding.applied_state.value, binding.phase.value) == (
        Guard(GuardKind.SCHEDULER),
        "active",
        "Paused",
    )
    held = bench.run()
    assert held.applied == []
    assert held.current.findings == ()  # the guard's pause is not drift
    fake(bench).health_status = "healthy"
    resumed = bench.run()
    assert [(i.kind.value, i.reason, o) for i, o in resumed.applied] == [
        ("unpause", "resumed: scheduler guard no longer applies", "done")
    ]
    assert backfill["is_paused"] is False
    binding = bench.store.binding("brk")
    assert binding is not None
    assert binding.guard is None
    fake(bench).scheduler_running = True
    assert bench.phases(bench.until_terminal()) == {"brk": "Succeeded"}
    steps = [
        (e.entry.action, e.entry.phase, e.entry.message)
        for e in bench.events("brk")
        if e.entry.action in ("pause", "unpause")
    ]
    assert steps == [
        ("pause", "intent", reason),
        ("pause", "outcome", None),
        ("unpause", "intent", "resumed: scheduler guard no longer applies"),
        ("unpause", "outcome", None),
    ]


@pytest.mark.parametrize(
    ("reply", "cause"),
    [
        (
            httpx.Response(200, json={"metadatabase": {"status": "healthy"}}),
            "GET /api/v2/monitor/health: the answer has no scheduler status",
        ),
        (
            httpx.Response(200, json={"scheduler": {"status": "healthy", "latest_scheduler_heartbeat": "yesterday"}}),
            "bad heartbeat: 'yesterday' is not a date-time with an offset",
        ),
    ],
)
def test_an_unreadable_health_answer_neither_pauses_nor_resumes(
    bench: Bench, reply: httpx.Response, cause: str
) -> None:
    bench.policy(BRAKE)
    bench.spec("brk")
    fake(bench).scheduler_running = False
    fake(bench).health_status = "healthy"
    bench.run()
    (backfill,) = fake(bench).backfills.values()
    fake(bench).fault("GET", "/api/v2/monitor/health", lambda _r: reply)
    result = bench.run()
    assert result.applied == []
    assert backfill["is_paused"] is False
    assert not result.plan.complete
    assert result.errors == [
        f"scheduler health was not observed: {cause}; nothing is created, paused or resumed by the guards"
    ]
    (item,) = result.plan.items
    assert (item.phase.value, item.reason) == ("Running", f"observation incomplete: scheduler health: {cause}")


def test_a_failing_health_endpoint_holds_a_new_spec(bench: Bench) -> None:
    bench.policy(BRAKE)
    bench.spec("brk")
    for _ in range(4):  # every retry fails
        fake(bench).fault("GET", "/api/v2/monitor/health", lambda _r: httpx.Response(500, json={"detail": "boom"}))
    result = bench.run()
    assert result.applied == []
    assert fake(bench).backfills == {}
    (item,) = result.plan.items
    assert item.kind.value == "blocked"
    assert item.reason == "observation incomplete: scheduler health: GET /api/v2/monitor/health -> 500: boom"
