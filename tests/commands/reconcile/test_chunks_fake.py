"""Chunked execution on the fake Airflow (issue 13): chunks in order, canary and promotion, the failure halt and
resume, max_active_runs from the next chunk, pause/cancel between chunks, crash and lost answers between chunks,
and dry runs that stay bounded whatever the range. The same flows run against the real Airflow in
tests/commands/reconcile/test_chunks_real.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from controller.core.model.airflow import Backfill, BackfillRequest, RunSummary
from controller.core.model.binding import Binding, Phase
from controller.core.model.chunks import Chunk, Progress
from controller.core.model.guards import Guard, GuardKind
from controller.core.plan.reads import runs_wanted
from controller.core.plan.values import Kind
from controller.core.render.change_record import change_record
from controller.core.render.plan import plan_text
from controller.core.render.status import status_rows
from tests.commands.reconcile.harness import Bench, count_calls, fake
from tests.fakes.airflow import Dag, parse

HOURLY_2_DAYS = {"dag": "demo_hourly", "start": "2025-01-01", "end": "2025-01-02T23:00:00Z"}


def ranges(bench: Bench) -> list[tuple[int, str, str, int]]:
    return [(b["id"], b["from_date"], b["to_date"], b["max_active_runs"]) for b in fake(bench).backfills.values()]


def creates(bench: Bench, spec: str) -> list[tuple[str, Any, str | None]]:
    return [
        (e.entry.phase, e.entry.backfill_id, e.entry.message) for e in bench.events(spec) if e.entry.action == "create"
    ]


def drain(bench: Bench) -> None:
    """Let the fake scheduler finish every active backfill (its runs end; Airflow marks it complete)."""
    for _ in range(100):
        if all(b["completed_at"] is not None for b in fake(bench).backfills.values()):
            return
        fake(bench).tick()
    raise AssertionError("backfills still active after 100 scheduler steps")


def passes(bench: Bench, n: int) -> list[list[tuple[str, str, str]]]:
    out = []
    for _ in range(n):
        result = bench.run()
        out.append([(i.kind.value, i.phase.value, o) for i, o in result.applied])
    return out


def test_chunks_are_created_one_after_another_in_order(bench: Bench) -> None:
    bench.spec("ch", mar=4, execution="{chunk_runs: 12}", **HOURLY_2_DAYS)
    plan = bench.reconciler().plan().plan
    (item,) = plan.items
    assert (item.kind, item.runs_to_create, item.chunk) == (Kind.CREATE, 48, (1, 4))
    assert "runs 48 of 48 in range  48 runs in 4 chunks of ≤ 12" in plan_text(plan)
    assert item.request is not None
    assert (item.request.from_date, item.request.to_date) == (
        parse("2025-01-01T00:00:00Z"),
        parse("2025-01-01T11:00:00Z"),
    )
    result = bench.until_terminal()
    assert bench.phases(result) == {"ch": "Succeeded"}
    assert ranges(bench) == [
        (1, "2025-01-01T00:00:00Z", "2025-01-01T11:00:00Z", 4),
        (2, "2025-01-01T12:00:00Z", "2025-01-01T23:00:00Z", 4),
        (3, "2025-01-02T00:00:00Z", "2025-01-02T11:00:00Z", 4),
        (4, "2025-01-02T12:00:00Z", "2025-01-02T23:00:00Z", 4),
    ]
    assert [(p, b) for p, b, _ in creates(bench, "ch")] == [
        ("intent", None),
        ("outcome", 1),
        ("intent", None),
        ("outcome", 2),
        ("intent", None),
        ("outcome", 3),
        ("intent", None),
        ("outcome", 4),
    ]
    assert [m for p, _, m in creates(bench, "ch") if p == "outcome"] == [f"chunk {k} of 4 created" for k in range(1, 5)]
    intents = [m for p, _, m in creates(bench, "ch") if p == "intent"]
    assert intents[1] is not None
    assert intents[1].startswith(
        "chunk 2 of 4: 2025-01-01T12:00:00Z → 2025-01-01T23:00:00Z (12 runs), max_active_runs 4; requested by alice"
    )
    (row,) = status_rows(result.current, bench.store.bindings())
    assert (row.phase, row.backfill_id, row.success, row.total, row.chunk, row.backfills) == (
        "Succeeded",
        4,
        48,
        48,
        (4, 4),
        (1, 2, 3, 4),
    )
    assert row.note == "chunk 4 of 4; 48 run(s) succeeded"
    spec = result.current.items[0].source
    assert spec is not None
    report = change_record(spec, bench.store.binding("ch"), bench.events("ch")).as_json()
    assert [(c["backfill_id"], c["runs"], c["succeeded"], c["finished"]) for c in report["chunks"]] == [
        (1, 12, 12, True),
        (2, 12, 12, True),
        (3, 12, 12, True),
        (4, 12, 12, True),
    ]
    assert report["intervals"]["complete"] == 48
    (later,) = status_rows(bench.run().current, bench.store.bindings())  # the finished spec, from the store
    assert (later.phase, later.chunk, later.backfills, later.total) == ("Succeeded", (4, 4), (1, 2, 3, 4), 48)


def test_backwards_chunks_run_the_newest_first(bench: Bench) -> None:
    bench.spec("back", mar=4, execution="{chunk_runs: 20}", run_backwards="true", **HOURLY_2_DAYS)
    assert bench.phases(bench.until_terminal()) == {"back": "Succeeded"}
    assert [(f, t) for _, f, t, _ in ranges(bench)] == [
        ("2025-01-02T04:00:00Z", "2025-01-02T23:00:00Z"),
        ("2025-01-01T08:00:00Z", "2025-01-02T03:00:00Z"),
        ("2025-01-01T00:00:00Z", "2025-01-01T07:00:00Z"),
    ]


def test_a_canary_waits_for_promotion_then_the_next_chunk_takes_the_new_concurrency(bench: Bench) -> None:
    bench.spec("can", mar=4, execution="{chunk_runs: 20, canary_runs: 4}", **HOURLY_2_DAYS)
    first = bench.run()
    assert [(i.kind.value, i.chunk, o) for i, o in first.applied] == [("create", (1, 4), "created")]
    waiting = bench.run()
    (item,) = waiting.current.items
    assert (item.phase.value, item.reason) == (
        "AwaitingPromotion",
        "canary chunk finished (4 succeeded, 0 failed); check its output, then merge `promote: true` to continue",
    )
    assert passes(bench, 2) == [[], []]
    assert waiting.settled
    assert len(fake(bench).backfills) == 1
    bench.spec("can", mar=2, execution="{chunk_runs: 20, canary_runs: 4}", promote="true", **HOURLY_2_DAYS)
    promoted = bench.run()
    assert [(i.kind.value, i.chunk, o) for i, o in promoted.applied] == [("create", (2, 4), "created")]
    assert ranges(bench)[1] == (2, "2025-01-01T04:00:00Z", "2025-01-01T23:00:00Z", 2)
    trail = [(e.entry.action, e.entry.phase, e.entry.outcome) for e in bench.events("can")]
    assert trail[-3:] == [
        ("promote", "observation", "promoted"),
        ("create", "intent", None),
        ("create", "outcome", "created"),
    ]
    intent = creates(bench, "can")[-2][2]
    assert intent is not None
    assert intent.startswith(
        "chunk 2 of 4: 2025-01-01T04:00:00Z → 2025-01-01T23:00:00Z (20 runs), max_active_runs 4 → 2 from this chunk;"
    )
    assert bench.phases(bench.until_terminal()) == {"can": "Succeeded"}
    assert [r[3] for r in ranges(bench)] == [4, 2, 2, 2]
    assert sum(1 for e in bench.events("can") if e.entry.action == "promote") == 1


def halting(bench: Bench, mar: int = 1, **extra: Any) -> None:
    """demo_flaky fails on odd days: 20 days, chunks of 10, one run at a time, halt above 20 % failed."""
    bench.spec(
        "flk",
        dag="demo_flaky",
        start="2025-01-01",
        end="2025-01-20",
        mar=mar,
        execution="{chunk_runs: 10, halt_on_failure_ratio: 0.2}",
        **extra,
    )


def run_one(bench: Bench, backfill_id: int, state: str) -> None:
    assert fake(bench).start_runs(backfill_id) == 1
    assert fake(bench).finish_run(backfill_id, state)


def test_too_many_failures_pause_the_active_chunk_until_a_new_resume_value(bench: Bench) -> None:
    halting(bench)
    fake(bench).scheduler_running = False
    assert [o for _, o in bench.run().applied] == ["created"]
    for state in ("failed", "success", "failed", "success"):
        run_one(bench, 1, state)
    assert bench.run().applied == []  # 2 of 4 failed: too few finished to judge
    run_one(bench, 1, "failed")
    halted = bench.run()
    reason = "halted: 3 of 5 finished runs failed (60% > 20%); fix the cause, then set a new `resume` value"
    assert [(i.kind.value, i.phase.value, i.reason, o) for i, o in halted.applied] == [
        ("pause", "Halted", reason, "halted")
    ]
    assert fake(bench).backfills[1]["is_paused"] is True
    binding = bench.store.binding("flk")
    assert binding is not None
    assert (binding.phase.value, binding.guard, binding.applied_state.value) == (
        "Halted",
        Guard(GuardKind.HALT),
        "active",
    )
    held = bench.run()
    assert held.applied == []
    assert held.current.findings == ()  # a halt's pause is not drift
    assert held.settled
    halting(bench, resume='"CHG-9 fixed"')
    resumed = bench.run()
    assert [(i.kind.value, i.phase.value, i.reason, o) for i, o in resumed.applied] == [
        ("unpause", "Running", "resumed: CHG-9 fixed", "done")
    ]
    assert fake(bench).backfills[1]["is_paused"] is False
    for state in ("success", "failed", "success", "success"):
        run_one(bench, 1, state)
    assert bench.run().applied == []  # failures count again from the resume: 1 of 4 since then
    run_one(bench, 1, "failed")
    again = bench.run()
    assert [(i.kind.value, i.reason) for i, _ in again.applied] == [
        (
            "pause",
            "halted: 2 of 5 finished runs failed since resume 'CHG-9 fixed' (40% > 20%); fix the cause, then set a "
            "new `resume` value",
        )
    ]


def test_a_halt_between_chunks_creates_nothing_until_resumed(bench: Bench) -> None:
    halting(bench, mar=10)  # the fake scheduler finishes all ten runs of a chunk in one step
    assert [o for _, o in bench.run().applied] == ["created"]
    halted = bench.run()  # chunk 1 finished: 5 of 10 failed
    (item,) = halted.current.items
    assert (item.kind.value, item.phase.value, item.chunk) == ("noop", "Halted", (1, 2))
    assert item.reason.startswith("halted: 5 of 10 finished runs failed (50% > 20%)")
    assert passes(bench, 1) == [[]]
    assert len(fake(bench).backfills) == 1
    halting(bench, mar=10, resume="again")
    assert [(i.kind.value, i.chunk, o) for i, o in bench.run().applied] == [("create", (2, 2), "created")]
    last = bench.until_terminal()
    assert bench.phases(last) == {"flk": "CompletedWithFailures"}  # every run was created: an outcome, not a halt
    (item,) = last.current.items
    assert item.reason == "failed: " + ", ".join(f"2025-01-{d:02d}" for d in range(1, 20, 2))
    assert len(fake(bench).backfills) == 2


def test_pause_between_chunks_stops_further_chunks_and_active_continues(bench: Bench) -> None:
    bench.spec("pz", mar=4, execution="{chunk_runs: 24}", **HOURLY_2_DAYS)
    assert [o for _, o in bench.run().applied] == ["created"]
    drain(bench)
    bench.spec("pz", mar=4, execution="{chunk_runs: 24}", state="paused", **HOURLY_2_DAYS)
    paused = bench.run()
    assert paused.applied == []
    (item,) = paused.current.items
    assert (item.phase.value, item.reason) == ("Paused", "paused after chunk 1; set state: active to continue")
    bench.spec("pz", mar=4, execution="{chunk_runs: 24}", **HOURLY_2_DAYS)
    assert [(i.kind.value, i.chunk, o) for i, o in bench.run().applied] == [("create", (2, 2), "created")]


def test_cancel_acts_on_the_active_chunk_and_creates_no_more(bench: Bench) -> None:
    bench.spec("cx", mar=4, execution="{chunk_runs: 12}", **HOURLY_2_DAYS)
    fake(bench).scheduler_running = False
    assert [o for _, o in bench.run().applied] == ["created"]
    bench.spec("cx", mar=4, execution="{chunk_runs: 12}", state="cancelled", **HOURLY_2_DAYS)
    cancelled = bench.run()
    assert [(i.kind.value, i.backfill_id, o) for i, o in cancelled.applied] == [("cancel", 1, "done")]
    fake(bench).scheduler_running = True
    result = bench.until_terminal()
    assert bench.phases(result) == {"cx": "Cancelled"}
    assert len(fake(bench).backfills) == 1


def test_a_reconciler_killed_after_a_chunk_create_landed_adopts_it_next_pass(bench: Bench) -> None:
    bench.spec("kill", mar=4, execution="{chunk_runs: 12}", **HOURLY_2_DAYS)
    assert [o for _, o in bench.run().applied] == ["created"]
    drain(bench)

    def die(_request: httpx.Request) -> BaseException:
        return KeyboardInterrupt()  # stands for SIGKILL: the POST landed, the outcome was never written

    fake(bench).fault("POST", "/api/v2/backfills", die, after=True)
    with pytest.raises(KeyboardInterrupt):
        bench.run()
    assert [(p, b) for p, b, _ in creates(bench, "kill")] == [("intent", None), ("outcome", 1), ("intent", None)]
    result = bench.run()
    assert [(i.kind.value, i.backfill_id, i.reason) for i in result.plan.items] == [
        ("adopt", 2, "adopt chunk backfill #2 (intent without outcome)")
    ]
    assert bench.phases(bench.until_terminal()) == {"kill": "Succeeded"}
    assert [(f, t) for _, f, t, _ in ranges(bench)] == [
        ("2025-01-01T00:00:00Z", "2025-01-01T11:00:00Z"),
        ("2025-01-01T12:00:00Z", "2025-01-01T23:00:00Z"),
        ("2025-01-02T00:00:00Z", "2025-01-02T11:00:00Z"),
        ("2025-01-02T12:00:00Z", "2025-01-02T23:00:00Z"),
    ]
    assert count_calls(fake(bench).requests)["POST /api/v2/backfills"] == 4
    # the adoption closed the intent: the next chunk's create is not preceded by an "abandoned" record
    assert [e.entry.outcome for e in bench.events("kill") if e.entry.action == "create"].count("abandoned") == 0
    assert bench.store.verify().ok


def test_a_reconciler_killed_before_a_chunk_post_creates_it_once(bench: Bench) -> None:
    bench.spec("early", mar=4, execution="{chunk_runs: 24}", **HOURLY_2_DAYS)
    assert [o for _, o in bench.run().applied] == ["created"]
    drain(bench)
    fake(bench).fault("POST", "/api/v2/backfills", lambda r: KeyboardInterrupt())
    with pytest.raises(KeyboardInterrupt):
        bench.run()
    assert len(fake(bench).backfills) == 1
    again = bench.run()
    assert [(i.kind.value, i.chunk, o) for i, o in again.applied] == [("create", (2, 2), "created")]
    assert [e.entry.outcome for e in bench.events("early") if e.entry.action == "create"][-3:] == [
        "abandoned",
        None,
        "created",
    ]
    assert bench.phases(bench.until_terminal()) == {"early": "Succeeded"}
    assert len(fake(bench).backfills) == 2


def test_a_lost_chunk_answer_is_recovered_not_repeated(bench: Bench) -> None:
    bench.spec("lost", mar=4, execution="{chunk_runs: 24}", **HOURLY_2_DAYS)
    assert [o for _, o in bench.run().applied] == ["created"]
    drain(bench)
    fake(bench).fault("POST", "/api/v2/backfills", lambda r: httpx.ReadTimeout("slow", request=r), after=True)
    result = bench.run()
    assert [(i.kind.value, o) for i, o in result.applied] == [("create", "recovered-after-ambiguous")]
    binding = bench.store.binding("lost")
    assert binding is not None
    assert binding.progress is not None
    assert (binding.backfill_id, binding.progress.ids, binding.progress.pending) == (2, (1, 2), None)
    assert bench.phases(bench.until_terminal()) == {"lost": "Succeeded"}
    assert len(fake(bench).backfills) == 2


def test_the_policy_chunks_large_specs_by_default_and_counts_the_whole_spec(bench: Bench) -> None:
    bench.policy(
        """\
        version: 1
        rules:
          - dags: ["demo_hourly"]
            chunk_runs: {default: 16, required_above: 30}
            max_runs: 40
        """
    )
    bench.spec("a-small", dag="demo_hourly", start="2025-01-01", end="2025-01-01T23:00:00Z", mar=4)
    plan = bench.reconciler().plan().plan
    assert [(i.spec, i.kind.value, i.chunk, i.reason) for i in plan.items] == [("a-small", "create", None, "")]
    (bench.specs / "a-small.yaml").unlink()
    bench.spec("big", mar=4, **HOURLY_2_DAYS)
    refused = bench.reconciler().plan().plan
    big = next(i for i in refused.items if i.spec == "big")
    assert (big.kind.value, big.reason) == (
        "refuse",
        "the dry run counts 48 runs; the policy allows at most 40 for demo_hourly",
    )
    bench.spec("big", mar=4, dag="demo_hourly", start="2025-01-01", end="2025-01-02T09:00:00Z")
    chunked = next(i for i in bench.reconciler().plan().plan.items if i.spec == "big")
    assert (chunked.kind.value, chunked.runs_to_create, chunked.chunk) == ("create", 34, (1, 3))


def test_a_year_plans_with_dry_runs_bounded_in_size(bench: Bench) -> None:
    bench.spec(
        "year", mar=4, dag="demo_hourly", start="2024-01-01", end="2024-12-31T23:00:00Z", execution="{chunk_runs: 720}"
    )
    plan = bench.reconciler().plan().plan
    (item,) = plan.items
    assert (item.kind.value, item.runs_to_create, item.chunk) == ("create", 8784, (1, 13))
    assert "8,784 runs in 13 chunks of ≤ 720" in plan_text(plan)
    hourly = fake(bench).dags["demo_hourly"]
    spans = [
        len(hourly.ticks(parse(body["from_date"]), parse(body["to_date"])))
        for method, path, body in fake(bench).bodies
        if (method, path) == ("POST", "/api/v2/backfills/dry_run")
    ]
    # each aimed at 2,000 runs (a few seconds), the first by the timetable's rate: "0 * * * *" is 24 a day at most
    assert spans == [2000, 2000, 2000, 2000, 784]
    assert sum(spans) == 8784  # consecutive sub-ranges: nothing missed, nothing twice
    created = bench.run()
    assert [(i.kind.value, o) for i, o in created.applied] == [("create", "created")]
    (backfill,) = fake(bench).backfills.values()
    assert (backfill["from_date"], backfill["to_date"]) == ("2024-01-01T00:00:00Z", "2024-01-30T23:00:00Z")


def test_a_year_of_a_timetable_whose_rate_is_not_known_is_asked_fourteen_days_first(bench: Bench) -> None:
    """A custom timetable's summary says nothing of its rate: 14 days first, then each part aimed at 2,000 runs."""
    custom = Dag("demo_custom_hourly", schedule="hourly", summary="MyBusinessHoursTimetable")
    fake(bench).dags[custom.dag_id] = custom
    bench.spec("custom-year", mar=4, dag=custom.dag_id, start="2024-01-01", end="2024-12-31T23:00:00Z")
    plan = bench.reconciler().plan().plan
    (item,) = plan.items
    assert (item.kind.value, item.runs_to_create) == ("create", 8784)
    spans = [
        len(custom.ticks(parse(body["from_date"]), parse(body["to_date"])))
        for method, path, body in fake(bench).bodies
        if (method, path) == ("POST", "/api/v2/backfills/dry_run")
    ]
    assert spans == [336, 2000, 2000, 2000, 2000, 448]
    assert sum(spans) == 8784


def test_a_month_of_a_daily_dag_is_one_dry_run(bench: Bench) -> None:
    """ "0 0 * * *" is one run a day at most: 120 days are one dry run, not 14 days and then the rest."""
    bench.spec("months", mar=4, dag="demo_daily", start="2024-01-01", end="2024-04-29")
    plan = bench.reconciler().plan().plan
    (item,) = plan.items
    assert (item.kind.value, item.runs_to_create) == ("create", 120)
    asked = [
        (body["from_date"], body["to_date"])
        for method, path, body in fake(bench).bodies
        if (method, path) == ("POST", "/api/v2/backfills/dry_run")
    ]
    assert asked == [("2024-01-01T00:00:00Z", "2024-04-29T00:00:00Z")]


def test_a_partitioned_dags_year_plans_with_dry_runs_split_like_a_time_based_one(bench: Bench) -> None:
    """A year of hourly partitions (8,784) in one dry run outlives every timeout: it is asked in sub-ranges of
    partition dates, each aimed at 2,000 runs, like a time-based DAG's. `none` asks twice (what the create makes,
    then every partition for runs in range), and each merges its parts: the partition that already ran is left out
    of the create only."""
    hourly = Dag("demo_parts_hourly", schedule="hourly", partitioned=True)
    fake(bench).dags[hourly.dag_id] = hourly
    last = parse("2024-12-31T23:00:00Z")
    fake(bench).runs[(hourly.dag_id, last)] = {  # the last partition ran already (and succeeded)
        "dag_run_id": "scheduled__2024-12-31T23:00:00",
        "dag_id": hourly.dag_id,
        "logical_date": None,
        "partition_key": "2024-12-31T23:00:00",
        "partition_date": "2024-12-31T23:00:00Z",
        "state": "success",
        "queued_at": "2025-01-01T00:00:01Z",
        "start_date": "2025-01-01T00:00:01Z",
        "end_date": "2025-01-01T00:00:09Z",
        "run_type": "scheduled",
    }
    bench.spec("parts-year", mar=4, dag=hourly.dag_id, start="2024-01-01", end="2024-12-31T23:00:00Z")
    plan = bench.reconciler().plan().plan
    (item,) = plan.items
    assert (item.kind.value, item.runs_to_create, item.runs_in_range) == ("create", 8783, 8784)
    assert item.partitions == ("2024-01-01T00:00:00", "2024-12-31T22:00:00")
    asked = [
        (body["reprocess_behavior"], body["from_date"], body["to_date"])
        for method, path, body in fake(bench).bodies
        if (method, path) == ("POST", "/api/v2/backfills/dry_run")
    ]
    bounds = [
        ("2024-01-01T00:00:00Z", "2024-03-24T07:59:59.999999Z"),  # each aimed at 2,000 runs, the first by the rate
        ("2024-03-24T08:00:00Z", "2024-06-15T15:59:59.999999Z"),
        ("2024-06-15T16:00:00Z", "2024-09-06T23:59:59.999999Z"),
        ("2024-09-07T00:00:00Z", "2024-11-29T07:59:59.999999Z"),
        ("2024-11-29T08:00:00Z", "2024-12-31T23:00:00Z"),
    ]
    assert asked == [("none", *b) for b in bounds] + [("completed", *b) for b in bounds]
    spans = [len(hourly.ticks(parse(low), parse(high))) for _, low, high in asked]
    assert spans == [2000, 2000, 2000, 2000, 784] * 2  # consecutive: no partition missed, none twice
    assert sum(spans[:5]) == 8784


def test_a_chunk_asks_the_downstream_budget_and_a_waiting_first_chunk_stays_new(bench: Bench) -> None:
    bench.policy(
        """\
        version: 1
        downstream:
          warehouse: {max_active_runs: 4}
        """
    )
    bench.spec("a-hold", mar=4, downstream="[warehouse]")
    bench.spec("b-ch", mar=4, execution="{chunk_runs: 24}", downstream="[warehouse]", **HOURLY_2_DAYS)
    fake(bench).scheduler_running = False
    first = bench.run()
    assert [(i.spec, i.kind.value, o) for i, o in first.applied] == [("a-hold", "create", "created")]
    waiting = next(i for i in first.current.items if i.spec == "b-ch")
    assert (waiting.kind.value, waiting.guard, waiting.progress) == ("wait", Guard(GuardKind.BUDGET, "warehouse"), None)
    binding = bench.store.binding("b-ch")
    assert binding is not None
    assert (binding.phase.value, binding.progress) == ("Queued", None)
    fake(bench).scheduler_running = True
    drain(bench)
    started = bench.run()
    assert [(i.spec, i.kind.value, i.chunk, o) for i, o in started.applied] == [("b-ch", "create", (1, 2), "created")]
    assert bench.phases(bench.until_terminal()) == {"a-hold": "Succeeded", "b-ch": "Succeeded"}


@pytest.mark.parametrize("reprocess", ["none", "completed"])
def test_after_a_lost_store_a_chunked_spec_adopts_its_chunks_once_and_runs_no_date_twice(
    bench: Bench, tmp_path: Path, reprocess: str
) -> None:
    """The chunks' boundaries were in the store. Before: the active chunk was reported unmanaged and blocked the
    DAG, and with `completed` the finished chunk's dates ran again. Now: both chunks are adopted in order (one
    audited adoption each, once), and the spec goes on after them."""
    bench.spec("gone", reprocess=reprocess, mar=4, execution="{chunk_runs: 12}", **HOURLY_2_DAYS)
    assert [o for _, o in bench.run().applied] == ["created"]
    drain(bench)
    fake(bench).scheduler_running = False
    assert [o for _, o in bench.run().applied] == ["created"]  # chunk 2, left running
    bench.store.close()
    (tmp_path / "state.db").unlink()
    bench.store = type(bench.store)(bench.store_url)
    adopting = bench.run()
    assert [(i.kind.value, o) for i, o in adopting.applied] == [("adopt", "adopted")]
    (item,) = adopting.plan.items
    assert (item.phase.value, item.reason) == (
        "Running",
        "adopt chunk backfill(s) #1, #2 (the spec's chunks, not bound)",
    )
    assert [f.kind.value for f in adopting.current.findings] == []
    adoptions = [(e.entry.backfill_id, e.entry.message) for e in bench.events("gone") if e.entry.action == "adopt"]
    assert adoptions == [
        (1, "chunk 1: 2025-01-01T00:00:00Z → 2025-01-01T11:00:00Z; " + item.reason),
        (2, "chunk 2: 2025-01-01T12:00:00Z → 2025-01-01T23:00:00Z; " + item.reason),
    ]
    binding = bench.store.binding("gone")
    assert binding is not None
    assert binding.progress is not None
    assert (binding.backfills, binding.backfill_id) == ((1, 2), 2)
    assert [c.summary is not None for c in binding.progress.chunks] == [True, False]  # chunk 1's final runs kept
    fake(bench).scheduler_running = True
    drain(bench)
    assert bench.phases(bench.until_terminal()) == {"gone": "Succeeded"}
    assert [(f, t) for _, f, t, _ in ranges(bench)] == [
        ("2025-01-01T00:00:00Z", "2025-01-01T11:00:00Z"),
        ("2025-01-01T12:00:00Z", "2025-01-01T23:00:00Z"),
        ("2025-01-02T00:00:00Z", "2025-01-02T11:00:00Z"),
        ("2025-01-02T12:00:00Z", "2025-01-02T23:00:00Z"),
    ]
    assert len(fake(bench).runs) == 48  # one run per date: none ran twice
    assert [e.entry.backfill_id for e in bench.events("gone") if e.entry.action == "adopt"] == [1, 2]  # once


def test_the_next_chunk_waits_behind_a_backfill_started_by_hand_between_chunks(bench: Bench) -> None:
    bench.spec("hand", mar=4, execution="{chunk_runs: 24}", **HOURLY_2_DAYS)
    assert [o for _, o in bench.run().applied] == ["created"]
    drain(bench)
    fake(bench).scheduler_running = False
    with bench.client() as client:  # someone runs `airflow backfill create` between two chunks
        other = client.create(
            BackfillRequest("demo_hourly", parse("2024-06-01T00:00:00Z"), parse("2024-06-01T05:00:00Z"))
        )
    waiting = bench.run()
    assert waiting.applied == []
    (item,) = waiting.current.items
    assert (item.kind.value, item.phase.value, item.reason) == (
        "wait",
        "Queued",
        f"queued behind unmanaged backfill #{other.id} (backfill #{other.id})",
    )
    assert count_calls(fake(bench).requests)["POST /api/v2/backfills"] == 2  # chunk 1 and the hand's: no 409
    fake(bench).scheduler_running = True
    drain(bench)
    assert [(i.kind.value, i.chunk, o) for i, o in bench.run().applied] == [("create", (2, 2), "created")]


# --- found in review: each failed before its fix ---------------------------------------------------------------


def ran_dates(bench: Bench) -> list[str]:
    """Every date each backfill ran or re-ran (ground truth), one entry per backfill."""
    return sorted(d.isoformat() for bid in fake(bench).backfills for d in fake(bench).outcome(bid))


def test_a_chunk_that_created_no_runs_blocks_instead_of_counting_as_done(bench: Bench) -> None:
    """apache/airflow#66726: the create answered 500 after the backfill row, before any run; its dates never ran."""
    bench.spec("orph", mar=4, execution="{chunk_runs: 12}", **HOURLY_2_DAYS)
    assert [o for _, o in bench.run().applied] == ["created"]
    drain(bench)

    def orphan(request: httpx.Request) -> httpx.Response:
        fake(bench).create_orphan(json.loads(request.content))
        return httpx.Response(500, content=b"")

    for _ in range(4):  # outlasts the client's retries
        fake(bench).fault("POST", "/api/v2/backfills", orphan)
    assert [o for _, o in bench.run().applied] == ["recovered-after-ambiguous"]
    drain(bench)
    result = bench.run()
    (item,) = result.current.items
    assert (item.kind.value, item.phase.value, item.backfill_id) == ("blocked", "Blocked", 2)
    assert item.reason.startswith("backfill #2 completed without any DAG run although its dry run listed runs")
    assert [f.kind.value for f in result.current.findings] == ["orphan-suspected"]
    assert len(fake(bench).backfills) == 2


def test_a_chunk_created_after_the_controller_gave_up_is_adopted_not_run_again(bench: Bench) -> None:
    bench.spec("late", mar=4, reprocess="completed", execution="{chunk_runs: 24}", **HOURLY_2_DAYS)
    landed: list[dict[str, Any]] = []

    def slow(request: httpx.Request) -> BaseException:
        landed.append(json.loads(request.content))  # the server keeps working on it (Airflow: 105 s for a year)
        return httpx.ReadTimeout("slow", request=request)

    for _ in range(12):  # every attempt times out before the row is visible
        fake(bench).fault("POST", "/api/v2/backfills", slow)
    first = bench.run()
    assert [o for _, o in first.applied] == ["rejected"]
    assert first.errors == [
        f"{bench.specs / 'late.yaml'}: late: gave up after ambiguous answers; no backfill was seen (one created late "
        "is adopted on a later pass)"
    ]
    fake(bench).faults.clear()
    fake(bench)._create(landed[0])  # the first attempt commits after all
    adopted = bench.run()
    assert [(i.kind.value, i.reason) for i in adopted.plan.items] == [
        ("adopt", "adopt chunk backfill #1 (created, answer lost)")
    ]
    assert bench.phases(bench.until_terminal(wait=lambda: drain(bench))) == {"late": "Succeeded"}
    dates = ran_dates(bench)
    assert (len(dates), len(set(dates))) == (48, 48)  # every date once
    assert len(fake(bench).backfills) == 2


def test_a_new_resume_value_in_a_freeze_ends_the_halt_but_not_the_pause(bench: Bench) -> None:
    halting(bench)
    fake(bench).scheduler_running = False
    assert [o for _, o in bench.run().applied] == ["created"]
    for state in ("failed", "success", "failed", "success", "failed"):
        run_one(bench, 1, state)
    assert [(i.kind.value, i.phase.value) for i, _ in bench.run().applied] == [("pause", "Halted")]
    bench.policy(
        """\
        version: 1
        freeze:
          - {from: "2000-01-01T00:00:00Z", to: "2999-01-01T00:00:00Z", reason: "year-end close"}
        """
    )
    halting(bench, resume='"CHG-9 fixed"')
    held = bench.run()
    assert held.applied == []
    (item,) = held.current.items
    assert (item.phase.value, item.guard) == ("Paused", Guard(GuardKind.FREEZE, "year-end close"))
    assert fake(bench).backfills[1]["is_paused"] is True
    bench.policy("version: 1\n")
    resumed = bench.run()
    assert [(i.kind.value, i.reason, o) for i, o in resumed.applied] == [
        ("unpause", "resumed: halt no longer applies", "done")
    ]


def test_a_running_chunk_holds_the_budget_with_the_concurrency_it_was_created_with(bench: Bench) -> None:
    bench.policy(
        """\
        version: 1
        downstream:
          warehouse: {max_active_runs: 4}
        """
    )
    bench.spec("a-ch", mar=4, execution="{chunk_runs: 24}", downstream="[warehouse]", **HOURLY_2_DAYS)
    fake(bench).scheduler_running = False
    assert [(i.spec, o) for i, o in bench.run().applied] == [("a-ch", "created")]
    bench.spec("a-ch", mar=1, execution="{chunk_runs: 24}", downstream="[warehouse]", **HOURLY_2_DAYS)
    bench.spec("b-other", mar=3, downstream="[warehouse]")
    result = bench.run()
    assert result.applied == []
    other = next(i for i in result.current.items if i.spec == "b-other")
    assert (other.kind.value, other.reason) == ("wait", "waiting for warehouse budget (4 of 4 in use by a-ch)")
    assert [b.as_json()["specs"] for b in result.current.budgets] == [
        [{"spec": "a-ch", "max_active_runs": 4}, {"spec": "b-other", "max_active_runs": 3}]
    ]


def test_the_next_chunks_come_from_a_new_dry_run_not_from_the_first_count(bench: Bench) -> None:
    """reprocess failed: 12 dates in flight at plan time (the dry run skips them) fail before the spec gets there."""
    f = fake(bench)
    for h in range(12):
        date = parse(f"2025-01-02T{12 + h:02d}:00:00Z")
        f.runs[("demo_hourly", date)] = {
            "dag_run_id": f"manual__{date.isoformat()}",
            "dag_id": "demo_hourly",
            "logical_date": date.isoformat().replace("+00:00", "Z"),
            "state": "running",
            "start_date": None,
            "end_date": None,
            "run_type": "manual",
            "conf": {},
        }
    bench.spec("st", mar=4, reprocess="failed", execution="{chunk_runs: 12}", **HOURLY_2_DAYS)
    assert [(i.chunk, o) for i, o in bench.run().applied] == [((1, 3), "created")]
    for run in f.runs.values():
        if run["run_type"] == "manual":
            run["state"] = "failed"
    assert bench.phases(bench.until_terminal(wait=lambda: drain(bench))) == {"st": "Succeeded"}
    assert [r["state"] for r in f.runs.values() if r["state"] != "success"] == []
    assert [(f_, t) for _, f_, t, _ in ranges(bench)][-1] == ("2025-01-02T12:00:00Z", "2025-01-02T23:00:00Z")


def test_a_chunked_spec_deleted_between_chunks_is_reported_orphaned(bench: Bench) -> None:
    path = bench.spec("del", mar=4, execution="{chunk_runs: 12}", **HOURLY_2_DAYS)
    assert [o for _, o in bench.run().applied] == ["created"]
    drain(bench)
    assert [o for _, o in bench.run().applied] == ["created"]
    drain(bench)
    path.unlink()
    result = bench.run()
    message = "spec del was deleted after 2 chunk(s); 24 run(s) will not be created (restore the spec to go on)"
    assert [(f.kind.value, f.message) for f in result.current.findings] == [("orphaned", message)]
    assert [(i.spec, i.phase.value) for i in result.current.items] == [("del", "Orphaned")]


def test_a_halted_spec_that_resumes_with_nothing_left_ends_with_its_chunks_outcome(bench: Bench) -> None:
    """Chunk 1 ran every date (its range ends past the last one) with failures and halted; after the resume the
    next dry run lists nothing: the outcome is the chunks' runs, never "nothing to reprocess"."""
    spec = {"dag": "demo_flaky", "start": "2025-01-01", "end": "2025-01-10T12:00:00Z", "mar": 10}
    bench.spec("tail", execution="{chunk_runs: 10, halt_on_failure_ratio: 0.2}", **spec)
    assert [o for _, o in bench.run().applied] == ["created"]
    drain(bench)
    assert bench.phases(bench.run()) == {"tail": "Halted"}
    bench.spec("tail", execution="{chunk_runs: 10, halt_on_failure_ratio: 0.2}", resume="go", **spec)
    done = bench.run()
    (item,) = done.current.items
    assert (item.phase.value, item.reason, item.backfill_id) == (
        "CompletedWithFailures",
        "failed: 2025-01-01, 2025-01-03, 2025-01-05, 2025-01-07, 2025-01-09",
        1,
    )
    assert len(fake(bench).backfills) == 1


def test_a_chunk_whose_final_runs_the_store_keeps_is_not_read_again() -> None:
    chunk = Chunk(1, parse("2025-01-01T00:00:00Z"), parse("2025-01-01T11:00:00Z"), 12, 4, RunSummary({"success": 12}))
    running = Chunk(2, parse("2025-01-01T12:00:00Z"), parse("2025-01-01T23:00:00Z"), 12, 4)
    binding = Binding("s", "demo_hourly", 1, Phase.BLOCKED, progress=Progress(48, (chunk,)))
    later = Binding("t", "demo_hourly", 2, Phase.RUNNING, progress=Progress(48, (running,)))
    backfills = [
        Backfill(n, "demo_hourly", c.first, c.last, "none", 4, False, None, c.first, c.last if n == 1 else None)
        for n, c in ((1, chunk), (2, running))
    ]
    wanted = runs_wanted("demo_hourly", backfills, [], {"s": binding, "t": later})
    assert [b.id for b in wanted] == [2]
