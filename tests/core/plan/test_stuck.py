"""Stuck backfills: queued too long while nothing runs, with the likely cause (pure core)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from controller.core.model.airflow import RunSummary
from controller.core.model.binding import Phase
from controller.core.model.guards import SchedulerHealth
from controller.core.plan.stuck import candidates, find_stuck, overdue, too_young
from controller.core.plan.values import Finding, Item, Kind, Plan

NOW = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
ITEM = Item("s", "orders_daily", Kind.NOOP, Phase.RUNNING, "in sync", 7, runs=RunSummary({"queued": 2}))
HEALTHY = SchedulerHealth("healthy", datetime(2025, 6, 1, 11, 59, 50, tzinfo=UTC))


def ago(minutes: int) -> datetime:
    return NOW - timedelta(minutes=minutes)


def plan(*findings: Finding) -> Plan:
    return Plan((ITEM,), tuple(findings))


def test_candidates_are_running_specs_with_queued_runs_and_none_running() -> None:
    busy = Item("b", "d", Kind.NOOP, Phase.RUNNING, "", 8, runs=RunSummary({"queued": 1, "running": 1}))
    paused = Item("p", "d", Kind.NOOP, Phase.PAUSED, "", 9, runs=RunSummary({"queued": 3}))
    assert candidates(Plan((ITEM, busy, paused), ())) == [ITEM]


def test_not_stuck_under_the_threshold_or_without_queued_runs() -> None:
    assert find_stuck(ITEM, 1, ago(29), plan(), health=HEALTHY, now=NOW, threshold_minutes=30) is None
    assert find_stuck(ITEM, 0, ago(45), plan(), health=HEALTHY, now=NOW, threshold_minutes=30) is None
    assert find_stuck(ITEM, 2, None, plan(), health=HEALTHY, now=NOW, threshold_minutes=30) is None
    found = find_stuck(ITEM, 1, ago(30), plan(), health=HEALTHY, now=NOW, threshold_minutes=30)
    assert found is not None
    assert (found.queued, found.since) == (1, ago(30))
    assert [overdue(1, ago(m), NOW, 30) for m in (29, 30, 31)] == [False, True, True]


def test_causes_in_order_dag_paused_scheduler_then_slots() -> None:
    paused = Finding("dag-paused", "orders_daily", "DAG orders_daily is paused")
    found = find_stuck(ITEM, 2, ago(45), plan(paused), health=HEALTHY, now=NOW, threshold_minutes=30)
    assert found is not None
    assert found.message(30) == (
        "2 run(s) queued for more than 30 min (oldest since 2025-06-01T11:15:00Z) while none starts (Airflow "
        "examines no run of a paused DAG); likely cause: the DAG orders_daily is paused in Airflow (backfill runs wait "
        "for it): unpause the DAG"
    )
    down = SchedulerHealth("unhealthy", datetime(2025, 6, 1, 10, 0, tzinfo=UTC))
    found = find_stuck(ITEM, 2, ago(45), plan(), health=down, now=NOW, threshold_minutes=30)
    assert found is not None
    assert found.cause == "the scheduler is unhealthy: check the scheduler process"
    beating = SchedulerHealth("unhealthy", datetime(2025, 6, 1, 11, 59, tzinfo=UTC))  # a heartbeat later: the same
    again = find_stuck(ITEM, 2, ago(45), plan(), health=beating, now=NOW, threshold_minutes=30)
    assert again is not None
    assert again.message(30) == found.message(30)  # the message is the notification's key: not notified again
    dead = find_stuck(ITEM, 2, ago(45), plan(), health=SchedulerHealth("unhealthy"), now=NOW, threshold_minutes=30)
    assert dead is not None
    assert dead.cause == "the scheduler is unhealthy (no heartbeat): check the scheduler process"
    found = find_stuck(ITEM, 2, ago(45), plan(), health=HEALTHY, now=NOW, threshold_minutes=30)
    assert found is not None
    assert found.cause.startswith("no free slot: the scheduler is healthy and the DAG unpaused")
    unread = SchedulerHealth(error="GET /api/v2/monitor/health -> 503: down")
    found = find_stuck(ITEM, 2, ago(45), plan(), health=unread, now=NOW, threshold_minutes=30)
    assert found is not None
    assert (
        found.cause == "not known: the scheduler's health could not be read (GET /api/v2/monitor/health -> 503: down)"
    )


def test_a_cancelled_backfills_queued_runs_are_stuck_at_once_with_airflow_72337() -> None:
    """apache/airflow#72337 (open in 3.3.2 and 3.4.0b2): runs of a cancelled backfill queued after the cancel never
    start; saying so at once beats waiting for the threshold."""
    cancelled = Item("c", "orders_daily", Kind.NOOP, Phase.CANCELLED, "cancelled", 11, runs=RunSummary({"queued": 2}))
    done = Item("d", "orders_daily", Kind.NOOP, Phase.CANCELLED, "cancelled", 12, runs=RunSummary({"failed": 2}))
    assert candidates(Plan((cancelled, done), ())) == [cancelled]
    found = find_stuck(cancelled, 2, ago(1), plan(), health=HEALTHY, now=NOW, threshold_minutes=30)
    assert found is not None
    assert found.message(30) == (
        "2 run(s) queued (oldest since 2025-06-01T11:59:00Z) will never start: the backfill was cancelled, and "
        "Airflow never starts a cancelled backfill's queued runs (https://github.com/apache/airflow/issues/72337; "
        "unpausing it answers 409): set those runs to failed in Airflow (or success, if their data is right), and "
        "backfill the dates again with a new spec; waiting will not help"
    )


def test_a_run_in_flight_when_its_dag_was_paused_does_not_hide_the_queue() -> None:
    """Airflow's scheduler examines no run of a paused DAG: a run running at the pause reads `running` for ever, and
    the queued runs behind it never start. Such a backfill is stuck, and the message says why none starts."""
    busy = Item("b", "orders_daily", Kind.NOOP, Phase.RUNNING, "", 8, runs=RunSummary({"queued": 3, "running": 1}))
    paused = Finding("dag-paused", "orders_daily", "DAG orders_daily is paused")
    elsewhere = Finding("dag-paused", "other_dag", "DAG other_dag is paused")
    assert candidates(Plan((busy,), (elsewhere,))) == []
    assert candidates(Plan((busy,), (paused,))) == [busy]
    found = find_stuck(busy, 3, ago(45), Plan((busy,), (paused,)), health=HEALTHY, now=NOW, threshold_minutes=30)
    assert found is not None
    assert found.message(30) == (
        "3 run(s) queued for more than 30 min (oldest since 2025-06-01T11:15:00Z) while none starts (Airflow examines "
        "no run of a paused DAG); likely cause: the DAG orders_daily is paused in Airflow (backfill runs wait for it): "
        "unpause the DAG"
    )


def test_a_paused_dags_stuck_message_stays_the_same_as_its_run_in_flight_settles() -> None:
    """The message is what dedups a finding: the run in flight at the pause settling (1 running, then 0) is the same
    situation, notified once."""
    paused = Finding("dag-paused", "orders_daily", "DAG orders_daily is paused")
    messages = set()
    for counts in ({"queued": 3, "running": 1}, {"queued": 3, "success": 1}):
        item = Item("b", "orders_daily", Kind.NOOP, Phase.RUNNING, "", 8, runs=RunSummary(counts))
        found = find_stuck(item, 3, ago(45), Plan((item,), (paused,)), health=HEALTHY, now=NOW, threshold_minutes=30)
        assert found is not None
        messages.add(found.message(30))
    assert len(messages) == 1


def test_a_backfill_younger_than_the_threshold_is_not_read() -> None:
    assert [too_young(ago(m), NOW, 30) for m in (0, 29, 30, 45)] == [True, True, False, False]
    assert too_young(None, NOW, 30) is False  # not observed: read
    assert too_young(ago(0), NOW, 0) is False  # a cancelled backfill's queued runs are stuck at once
