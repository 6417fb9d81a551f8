"""Airflow listings are bounded and checked: a listing without end stops at its page cap (1,000 pages, 100,000
entries) within seconds and bounded memory; a malformed page or entry (a field missing or of another type,
`total_entries` missing where the release must send it) is a bad answer naming the problem, an incomplete
observation in a pass, exit 1, never exit 3."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from controller.adapters.airflow.server import MAX_PAGES
from controller.cli import main
from controller.core.model.airflow import BackfillRequest
from controller.errors import AirflowBadAnswer
from tests.adapters.airflow.test_airflow_faults import BACKFILL
from tests.adapters.airflow.test_contract import day
from tests.adapters.test_outside_answers import MIB, Measured, scripted
from tests.commands.reconcile.harness import Bench
from tests.core.documents.test_escaping import cli_bench
from tests.fakes.airflow import FakeAirflow

__all__ = ["cli_bench"]  # the CLI in this process on the fake Airflow, with one spec, `hostile`


def test_a_listing_without_end_stops_at_the_page_cap(tmp_path: Path) -> None:
    bench = Bench(tmp_path, fake=FakeAirflow())
    assert bench.fake is not None
    page = json.dumps({"backfills": [BACKFILL] * 100, "total_entries": 10**9}).encode()
    served = [0]
    real = bench.fake.handle

    def endless(request: httpx.Request) -> httpx.Response:
        if (request.method, request.url.path) != ("GET", "/api/v2/backfills"):
            return real(request)
        served[0] += 1
        if served[0] > 3 * MAX_PAGES:  # a client without a cap fails the test here instead of filling the memory
            return httpx.Response(500, json={"detail": "enough"})
        return httpx.Response(200, content=page, headers={"content-type": "application/json"})

    bench.fake.handle = endless  # type: ignore[method-assign]
    bench.spec("s1")
    with Measured() as used:
        result = bench.run()
    bench.close()
    assert result.errors == [
        "DAG demo_daily was not fully observed: GET /api/v2/backfills: the listing has more than 1,000 pages; "
        "backfillctl reads no more of it"
    ]
    assert served[0] == MAX_PAGES
    assert used.seconds < 60, used.seconds
    assert used.peak < 400 * MIB, used.peak


MALFORMED = "GET /api/v2/backfills: Airflow's answer is malformed: "


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ([], "an array, not an object"),
        ({"total_entries": 1}, "no field backfills"),
        ({"backfills": None, "total_entries": 0}, "backfills is null, not an array"),
        ({"backfills": {}, "total_entries": 0}, "backfills is an object, not an array"),
        ({"backfills": [BACKFILL, [1]], "total_entries": 2}, "backfills[1] is an array, not an object"),
        ({"backfills": [BACKFILL], "total_entries": "1"}, "total_entries is a string, not a count"),
        ({"backfills": [BACKFILL], "total_entries": True}, "total_entries is a boolean, not a count"),
        ({"backfills": [BACKFILL], "total_entries": -1}, "total_entries is -1, not a count"),
        ({"backfills": [{**BACKFILL, "id": "7"}], "total_entries": 1}, "backfills[0]: id is a string, not an integer"),
        ({"backfills": [{**BACKFILL, "id": 7.5}], "total_entries": 1}, "backfills[0]: id is a number, not an integer"),
        (
            {"backfills": [{**BACKFILL, "is_paused": "no"}], "total_entries": 1},
            "backfills[0]: is_paused is a string, not a boolean",
        ),
        (
            {"backfills": [{k: v for k, v in BACKFILL.items() if k != "created_at"}], "total_entries": 1},
            "backfills[0]: no field created_at",
        ),
        (
            {"backfills": [{**BACKFILL, "from_date": "yesterday"}], "total_entries": 1},
            "backfills[0]: from_date 'yesterday' is not a date-time with an offset",
        ),
        (
            {"backfills": [{**BACKFILL, "to_date": "2025-01-02T00:00:00"}], "total_entries": 1},
            "backfills[0]: to_date '2025-01-02T00:00:00' is not a date-time with an offset",
        ),
        (
            {"backfills": [{**BACKFILL, "dag_run_conf": [1]}], "total_entries": 1},
            "backfills[0]: dag_run_conf is an array, not an object",
        ),
        (
            {"backfills": [{**BACKFILL, "dag_id": "d\x1b[31m\n"}], "total_entries": 1},
            None,  # odd text is text: read (and shown escaped wherever it is shown)
        ),
    ],
)
def test_a_malformed_listing_is_a_bad_answer_naming_the_problem(body: Any, problem: str | None) -> None:
    client = scripted(body)
    if problem is None:
        assert [b.dag_id for b in client.list_backfills("d")] == ["d\x1b[31m\n"]
        return
    with pytest.raises(AirflowBadAnswer) as caught:
        client.list_backfills("d")
    assert caught.value.message == MALFORMED + problem


def test_total_entries_is_required_before_3_2_2_and_optional_after() -> None:
    without = {"backfills": [BACKFILL]}
    with pytest.raises(AirflowBadAnswer) as caught:
        scripted(without, version="3.1.8").list_backfills("d")
    assert caught.value.message == MALFORMED + "no field total_entries"
    # 3.2.2 may leave it out (cursor pagination): the listing then ends at an empty page
    assert [b.id for b in scripted(without, {"backfills": []}).list_backfills("d")] == [7]
    assert [b.id for b in scripted({**without, "total_entries": None}, {"backfills": []}).list_backfills("d")] == [7]


def test_a_count_needs_total_entries_on_every_release() -> None:
    with pytest.raises(AirflowBadAnswer) as caught:
        scripted({"dag_runs": []}).queued_runs("d", *_range())
    assert caught.value.message == ("GET /api/v2/dags/d/dagRuns: Airflow's answer is malformed: no field total_entries")


def _range() -> tuple[datetime, datetime]:
    return datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 1, 2, tzinfo=UTC)


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        ({"backfills": [{"logical_date": 5}]}, "backfills[0]: logical_date is a number, not a date-time"),
        ({"backfills": [{"logical_date": None}]}, "backfills[0]: no logical_date and no partition_date"),
        ({"backfills": "all"}, "backfills is a string, not an array"),
    ],
)
def test_a_malformed_dry_run_is_a_bad_answer(body: Any, problem: str) -> None:
    with pytest.raises(AirflowBadAnswer) as caught:
        scripted(body).planned_runs(BackfillRequest("d", day("2025-01-01"), day("2025-01-02")))
    assert caught.value.message == f"POST /api/v2/backfills/dry_run: Airflow's answer is malformed: {problem}"


def test_a_malformed_listing_in_a_pass_is_an_incomplete_observation_exit_1(
    cli_bench: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli_bench.fake is not None
    for _ in range(2):
        cli_bench.fake.fault(
            "GET", "/api/v2/backfills", lambda _r: httpx.Response(200, json={"backfills": [{"id": 1}]})
        )
    assert main(["reconcile", "--once"]) == 1
    _out, err = capsys.readouterr()
    assert (
        "error: DAG demo_daily was not fully observed: GET /api/v2/backfills: Airflow's answer is malformed: "
        "backfills[0]: no field dag_id\n"
    ) in err
    assert cli_bench.store.verify().ok
