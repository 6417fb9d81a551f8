"""Run summaries kept by the store (JSON round trip) and built from counts for large backfills (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from controller.core.model.airflow import DagRun, RunSummary, summary_from_counts, summary_from_json
from controller.core.model.binding import Binding, CreateFacts, Phase

JAN1 = datetime(2025, 1, 1, tzinfo=UTC)


def run(day: int, state: str, minutes: int | None = None) -> DagRun:
    start = JAN1 + timedelta(days=day) if minutes is not None else None
    end = start + timedelta(minutes=minutes) if start is not None and minutes else None
    return DagRun(f"r{day}", JAN1 + timedelta(days=day), state, start, end)


def test_a_summary_survives_the_store_unchanged() -> None:
    full = RunSummary({"success": 3, "failed": 2}, (JAN1, JAN1 + timedelta(days=2)), 1, 42.5, ("p1", "p3"), 4)
    assert summary_from_json(full.as_json()) == full
    assert summary_from_json({}) == RunSummary({})
    assert summary_from_json({"counts": {"queued": 2}, "total": 2}).total == 2


def test_counts_failures_and_a_sample_make_the_same_summary_as_every_run() -> None:
    failed = [run(1, "failed", 10), run(4, "failed")]  # the second never started: cancelled while queued
    sample = [run(0, "success", 2), run(1, "failed", 10), run(2, "success", 6)]
    summary = summary_from_counts({"success": 120, "failed": 2, "queued": 0, "running": 3}, failed, sample)
    assert summary == RunSummary({"success": 120, "failed": 2, "running": 3}, (JAN1 + timedelta(days=1),), 1, 360.0)


def test_a_binding_owns_its_backfills_in_order() -> None:
    binding = Binding("s", "d", 4, Phase.RUNNING, backfills=(3, 4), created=CreateFacts(7, 9))
    assert binding.owning(5) == (3, 4, 5)
    assert binding.owning(4) == (3, 4)
    assert binding.owning(None) == (3, 4)
    assert CreateFacts.from_json(CreateFacts(7, 9, JAN1, JAN1, "a", "b").as_json()) == CreateFacts(
        7, 9, JAN1, JAN1, "a", "b"
    )
    assert CreateFacts.from_json({"reason": "created"}) is None
