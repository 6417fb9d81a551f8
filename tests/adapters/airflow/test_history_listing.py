"""The backfill listing newest first, stopping at a watermark (`Backfills.newer_than`), against a real Airflow and
the fake: the server honours `order_by=-id` (ids strictly descending), so a read past more than a page of history
costs one call; below the watermark's page nothing is read. On every supported line (`every_line`): a line that
ignored the order would fail here, and `newer_than` would read it whole (`ordered` False)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from controller.adapters.airflow import AirflowClient
from controller.core.model.airflow import BackfillRequest
from controller.core.model.secret import Secret
from controller.errors import AirflowConflict
from tests.fakes.airflow import Dag, FakeAirflow
from tests.fakes.calls import record_calls

pytestmark = pytest.mark.every_line
DAG = "demo_guard_b"  # days of 2021: the guard tests use it in 2022 only
HISTORY = 105  # more than a page (100)
LISTING = ("GET", "/api/v2/backfills")


@pytest.fixture(params=[pytest.param("real", marks=pytest.mark.airflow), "fake"])
def history_client(request: pytest.FixtureRequest) -> Iterator[AirflowClient]:
    if request.param == "real":
        url, transport = request.getfixturevalue("airflow_url"), None
    else:
        url, transport = "http://fake-airflow", FakeAirflow(dags=[Dag(DAG)]).transport()
    with AirflowClient(url, transport=transport, username="admin", password=Secret("admin")) as made:
        yield made


@pytest.fixture
def client(history_client: AirflowClient) -> AirflowClient:
    return history_client


@pytest.fixture
def history(client: AirflowClient) -> list[int]:
    """The DAG's backfills, oldest first: `HISTORY` one-day backfills, each cancelled (completed at once)."""
    made = [b.id for b in client.list_backfills(DAG)]
    start = datetime(2021, 1, 1, tzinfo=UTC) + timedelta(days=len(made))
    for n in range(HISTORY - len(made)):
        first = start + timedelta(days=n)
        made.append(ended(client, BackfillRequest(DAG, first, first, max_active_runs=1)))
    return made


def ended(client: AirflowClient, request: BackfillRequest) -> int:
    """A backfill created and cancelled (Airflow sets `completed_at` at once), or completed before the cancel."""
    backfill = client.create(request)
    with contextlib.suppress(AirflowConflict):
        client.cancel(backfill.id)
    return backfill.id


def test_the_listing_newest_first_stops_at_the_page_that_reaches_the_watermark(
    client: AirflowClient, history: list[int]
) -> None:
    seen = record_calls(client)
    watermark = history[-6]  # five backfills are newer than it
    newest = client.backfills_newer_than(DAG, watermark)
    assert newest.ordered is True
    assert [b.id for b in newest.backfills] == history[::-1][:100]  # one page, newest first
    assert [b.id for b in newest.backfills if b.id > watermark] == history[:-6:-1]
    assert seen == [LISTING]
    seen.clear()
    deep = client.backfills_newer_than(DAG, history[2])  # below the first page: the second is read too
    assert (deep.ordered, [b.id for b in deep.backfills]) == (True, history[::-1])
    assert seen == [LISTING, LISTING]
    seen.clear()
    assert [b.id for b in client.list_backfills(DAG)] == history  # the whole history, oldest first
    assert seen == [LISTING, LISTING]
