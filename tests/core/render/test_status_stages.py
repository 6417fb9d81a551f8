"""A rehearsed spec in `status` (its rehearsal's note) and a staged spec's change record (`stages`, `writes`,
`rollback`), both pure."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

import pytest

from controller.core.model.binding import Phase
from controller.core.model.stages import PRODUCTION, Publish, Rehearsal, Slice, Stage, StageRecord, StageState, Verify
from controller.core.plan.values import Item, Kind, Plan
from controller.core.render.change_record import change_record, stage_json
from controller.core.render.status import status_rows
from tests.core.plan.test_plan import JAN1, spec

AT = datetime(2026, 11, 1, 10, 30, tzinfo=UTC)


def item(phase: Phase = Phase.RUNNING, reason: str = "in sync", name: str = "s") -> Item:
    return Item(name, "d", Kind.NOOP, phase, reason, 4)


def rehearsal(state: StageState, run_id: str | None = None, spec_name: str = "s") -> StageRecord:
    return StageRecord(spec_name, "staging", Stage.REHEARSAL, "k1", state, AT, run_id=run_id)


def note(it: Item, *records: StageRecord) -> str:
    (row,) = status_rows(Plan((it,)), {}, stages={(r.spec, r.stage): r for r in records})
    return row.note


@pytest.mark.parametrize(
    ("state", "run_id", "shown"),
    [
        (StageState.PASSED, "r1", "in sync · rehearsal in staging: Succeeded, verified (run r1)"),
        (StageState.PASSED, None, "in sync · rehearsal in staging: Succeeded"),  # passed without a verify run
        (StageState.FAILED, "r1", "in sync · rehearsal in staging: Failed"),  # its run did not verify it
        (StageState.FAILED, None, "in sync · rehearsal in staging: Failed"),
        (StageState.VERIFYING, "r1", "in sync · rehearsal in staging: running"),
        (StageState.REHEARSING, None, "in sync · rehearsal in staging: running"),
    ],
)
def test_the_rehearsal_in_the_note_of_each_state(state: StageState, run_id: str | None, shown: str) -> None:
    assert note(item(), rehearsal(state, run_id)) == shown


def test_the_rehearsal_note_names_its_environment_and_stands_alone_without_a_note() -> None:
    elsewhere = StageRecord("s", "qa-east", Stage.REHEARSAL, "k1", StageState.PASSED, AT, run_id="r9")
    assert note(item(reason=""), elsewhere) == "rehearsal in qa-east: Succeeded, verified (run r9)"
    (row,) = status_rows(Plan((item(reason=""),)), {}, stages={("s", Stage.REHEARSAL): elsewhere})
    assert (row.phase, row.spec, row.backfill_id) == ("Running", "s", 4)


def test_no_rehearsal_note_while_awaiting_rehearsal_or_without_a_rehearsal_record() -> None:
    waiting = item(Phase.AWAITING_REHEARSAL, "rehearsing in staging: slice 1 of 2")
    assert note(waiting, rehearsal(StageState.REHEARSING)) == "rehearsing in staging: slice 1 of 2"
    assert note(item(), rehearsal(StageState.PASSED, "r1", spec_name="other")) == "in sync"  # another spec's
    final = StageRecord("s", PRODUCTION, Stage.FINAL, "4", StageState.PASSED, AT, run_id="v1")
    assert note(item(), final) == "in sync"  # a verification after production is the phase's business
    assert note(item()) == "in sync"
    (row,) = status_rows(Plan((item(),)), {})  # no stages given
    assert row.note == "in sync"


def test_every_spec_of_the_plan_gets_its_own_rehearsal() -> None:
    plan = Plan((item(name="a"), item(Phase.SUCCEEDED, "7 run(s) succeeded", name="b")))
    records = {
        ("a", Stage.REHEARSAL): rehearsal(StageState.VERIFYING, "ra", spec_name="a"),
        ("b", Stage.REHEARSAL): rehearsal(StageState.PASSED, "rb", spec_name="b"),
    }
    assert [r.note for r in status_rows(plan, {}, stages=records)] == [
        "in sync · rehearsal in staging: running",
        "7 run(s) succeeded · rehearsal in staging: Succeeded, verified (run rb)",
    ]


SLICES = Rehearsal((Slice(JAN1, JAN1 + timedelta(days=1)),))


def records() -> tuple[StageRecord, ...]:
    passed = StageRecord(
        "s",
        "staging",
        Stage.REHEARSAL,
        "k1",
        StageState.PASSED,
        AT,
        backfill_ids=(41, 42),
        run_id="backfillctl__s__staging__rehearsal__k1",
        triggered_at=AT + timedelta(minutes=20),
        reason="passed: rows 7",
        metrics=MappingProxyType({"rows": 7, "ok": True}),
        runs=MappingProxyType({"success": 2}),
    )
    final = StageRecord("s", PRODUCTION, Stage.FINAL, "4", StageState.VERIFYING, AT + timedelta(hours=2))
    return passed, final


def test_a_staged_change_record_lists_its_stages_writes_and_rollback() -> None:
    s = spec(rehearsal=SLICES, writes=("warehouse.orders", "warehouse.totals"), rollback="restore snapshot 42")
    document = change_record(s, None, [], stages=records()).as_json()
    assert (document["writes"], document["rollback"]) == (
        ["warehouse.orders", "warehouse.totals"],
        "restore snapshot 42",
    )
    assert document["stages"] == [
        {
            "environment": "staging",
            "stage": "rehearsal",
            "key": "k1",
            "state": "passed",
            "started_at": "2026-11-01T10:30:00Z",
            "backfill_ids": [41, 42],
            "run_id": "backfillctl__s__staging__rehearsal__k1",
            "result": "passed: rows 7",
            "metrics": {"rows": 7, "ok": True},
            "runs": {"success": 2},
        },
        {
            "environment": "production",
            "stage": "final",
            "key": "4",
            "state": "verifying",
            "started_at": "2026-11-01T12:30:00Z",
            "backfill_ids": [],
            "run_id": None,
            "result": None,
            "metrics": None,
            "runs": None,
        },
    ]
    assert list(document)[-3:] == ["writes", "rollback", "stages"]
    assert type(stage_json(records()[0])["metrics"]) is dict  # a plain dict, as json.dumps needs


@pytest.mark.parametrize(
    "staged",
    [
        {"rehearsal": SLICES},
        {"verify": Verify("orders_verify")},
        {"publish": Publish("orders_publish")},
    ],
)
def test_a_spec_with_a_stage_has_the_keys_before_any_stage_ran(staged: dict[str, Any]) -> None:
    document = change_record(spec(**staged), None, []).as_json()
    assert (document["writes"], document["rollback"], document["stages"]) == ([], None, [])


def test_stage_records_alone_bring_the_keys() -> None:
    document = change_record(spec(writes=("t",)), None, [], stages=records()[1:]).as_json()
    assert (document["writes"], document["rollback"]) == (["t"], None)
    assert [(r["stage"], r["state"]) for r in document["stages"]] == [("final", "verifying")]


def test_a_spec_without_stages_reads_as_it_always_did() -> None:
    document = change_record(spec(writes=("warehouse.orders",), rollback="restore"), None, []).as_json()
    assert {"stages", "writes", "rollback"} & set(document) == set()
    assert list(document)[-1] == "audit"
