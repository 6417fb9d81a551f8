"""Airflow 3.4's slots of a backfill (`GET /backfills/{id}/dag_runs`): decoded as the real 3.4.0b2 answers them,
counted exactly, skipped slots with Airflow's reasons, and never asked of a release without the listing."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest
from packaging.version import Version

from controller.adapters.airflow import AirflowClient
from controller.adapters.airflow.decode import backfill_slot_from_json
from controller.core.model.airflow import BackfillSlot, RunSummary, Skipped, slot_counts, summary_from_json
from controller.core.model.capabilities import capabilities_of
from controller.core.model.secret import Secret
from controller.core.render.change_record import Intervals
from controller.core.render.status import StatusRow, status_report
from controller.errors import AirflowVersionError

# what a real 3.4.0b2 answered for a backfill of demo_daily over 2021-03-01..04 with a manual run on 03-02
ANSWER = [
    {"id": 1, "backfill_id": 1, "dag_id": "demo_daily", "dag_run_id": "backfill__2021-03-01T00:00:00+00:00",
     "logical_date": "2021-03-01T00:00:00Z", "partition_key": None, "sort_ordinal": 1, "exception_reason": None,
     "dag_run_state": "success"},
    {"id": 2, "backfill_id": 1, "dag_id": "demo_daily", "dag_run_id": None, "logical_date": "2021-03-02T00:00:00Z",
     "partition_key": None, "sort_ordinal": 2, "exception_reason": "in flight", "dag_run_state": None},
    {"id": 3, "backfill_id": 1, "dag_id": "demo_daily", "dag_run_id": "backfill__2021-03-03T00:00:00+00:00",
     "logical_date": "2021-03-03T00:00:00Z", "partition_key": None, "sort_ordinal": 3, "exception_reason": None,
     "dag_run_state": "failed"},
    {"id": 4, "backfill_id": 1, "dag_id": "demo_daily", "dag_run_id": None, "logical_date": "2021-03-04T06:00:00Z",
     "partition_key": None, "sort_ordinal": 4, "exception_reason": "already exists", "dag_run_state": None},
]  # fmt: skip


def test_slots_count_runs_by_state_and_name_each_skipped_slot_with_airflows_reason() -> None:
    slots = [backfill_slot_from_json(item) for item in ANSWER]
    assert slots[1] == BackfillSlot(2, datetime(2021, 3, 2, tzinfo=UTC), None, None, None, "in flight")
    counts, skipped = slot_counts(slots)
    assert counts == {"success": 1, "failed": 1}
    assert skipped == (Skipped("2021-03-02", "in flight"), Skipped("2021-03-04 06:00", "already exists"))
    assert [s.text() for s in skipped] == ["2021-03-02 skipped: in flight", "2021-03-04 06:00 skipped: already exists"]


def test_a_reason_outside_airflows_three_is_unknown_never_shown_as_sent() -> None:
    odd = {**ANSWER[1], "exception_reason": "\x1b[31mpwned"}
    assert backfill_slot_from_json(odd).exception_reason == "unknown"


def test_the_skipped_slots_survive_the_store_and_an_empty_list_is_left_out() -> None:
    summary = RunSummary({"success": 1}, skipped=(Skipped("2021-03-02", "in flight"),))
    assert summary.as_json()["skipped"] == [{"slot": "2021-03-02", "reason": "in flight"}]
    assert summary_from_json(summary.as_json()) == summary
    assert "skipped" not in RunSummary({"success": 1}).as_json()


def serving(pages: list[dict[str, object]], sent: list[httpx.Request]) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        offset = int(request.url.params.get("offset", "0"))
        return httpx.Response(
            200, json={"backfill_dag_runs": pages[offset : offset + 100], "total_entries": len(pages)}
        )

    return httpx.MockTransport(answer)


def client(version: str, transport: httpx.MockTransport) -> AirflowClient:
    caps = capabilities_of(Version(version), version)
    return AirflowClient("http://af", token=Secret("t"), transport=transport, capabilities=caps)


def test_slots_are_paged_and_a_running_backfill_beyond_a_page_is_left_to_the_counts() -> None:
    many = [{**ANSWER[0], "id": n, "sort_ordinal": n} for n in range(1, 251)]
    sent: list[httpx.Request] = []
    with client("3.4.0b2", serving(many, sent)) as c:
        assert c.backfill_slots(7, pages=1) is None
        assert len(sent) == 1  # the first page told
        every = c.backfill_slots(7)
    assert every is not None
    assert len(every) == 250
    assert [(r.url.path, r.url.params["offset"], r.url.params["order_by"]) for r in sent[1:]] == [
        ("/api/v2/backfills/7/dag_runs", "0", "sort_ordinal"),
        ("/api/v2/backfills/7/dag_runs", "100", "sort_ordinal"),
        ("/api/v2/backfills/7/dag_runs", "200", "sort_ordinal"),
    ]


def test_a_release_without_the_listing_is_never_asked() -> None:
    sent: list[httpx.Request] = []
    with client("3.3.2", serving(ANSWER, sent)) as c, pytest.raises(AirflowVersionError) as refused:
        c.backfill_slots(1)
    assert sent == []
    assert refused.value.message == (
        "GET /api/v2/backfills/1/dag_runs: Airflow 3.3.2 does not list a backfill's runs (3.4.0)"
    )


def test_status_names_each_skipped_slot_with_airflows_reason_and_its_json_lists_them() -> None:
    skipped = (Skipped("2021-03-02", "in flight"), Skipped("2021-03-04", "already exists"))
    row = StatusRow("q1", "demo_daily", "Succeeded", 1, 2, 0, 0, 0, 2, None, "done", skipped=skipped)
    assert status_report([row]).splitlines()[-1] == (
        "q1: skipped by Airflow: 2021-03-02 (in flight), 2021-03-04 (already exists)"
    )
    assert row.as_json()["skipped"] == [
        {"slot": "2021-03-02", "reason": "in flight"},
        {"slot": "2021-03-04", "reason": "already exists"},
    ]
    assert "skipped" not in replace(row, skipped=()).as_json()
    assert "skipped by Airflow" not in status_report([replace(row, skipped=())])


def test_the_change_record_lists_the_skipped_slots() -> None:
    intervals = Intervals(2, 0, (), (), 0, 2, 4, (), skipped_slots=(Skipped("2021-03-02", "in flight"),))
    assert intervals.as_json()["skipped_slots"] == [{"slot": "2021-03-02", "reason": "in flight"}]
    assert "skipped_slots" not in replace(intervals, skipped_slots=()).as_json()


def test_only_the_identity_rule_reads_triggering_user_name_and_never_on_3_4() -> None:
    """On 3.4 it is a display name (set by users, not unique): there ownership and adoption come from the store's
    bindings and the create parameters alone. On 3.1-3.3 it is the login, and only the identity rule (another team's
    backfill is owned elsewhere) reads it, through the decoded run; the capability names where it stops."""
    root = Path(__file__).resolve().parents[3] / "controller"
    readers = sorted(
        str(p.relative_to(root)) for p in root.rglob("*.py") if "triggering_user" in p.read_text(encoding="utf-8")
    )
    assert readers == [
        "adapters/airflow/decode.py",
        "core/model/airflow.py",
        "core/model/capabilities.py",
        "core/plan/identity.py",
    ]
    # where it stops being read: tests/core/rules/test_scope_rules.py (identity_of by the capability user_display_name)
