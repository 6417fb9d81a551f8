"""A `select` spec's sub-ranges as chunks (pure): recorded in its progress, one chunk each, in its direction, each
create on the latest DAG version."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from controller.core.model.chunks import Chunk, Progress
from controller.core.model.policy import Policy, Rule
from controller.core.model.spec import Execution, Select
from controller.core.rules.chunks import chunk_count, next_selected, next_size, remaining, request_for, slice_of
from tests.core.rules.test_chunks import spec

JAN1 = datetime(2025, 1, 1, tzinfo=UTC)
DAY = timedelta(days=1)
RANGES = ((JAN1, JAN1 + DAY), (JAN1 + 4 * DAY, JAN1 + 4 * DAY), (JAN1 + 7 * DAY, JAN1 + 9 * DAY))
SELECTED = Progress(6, sub_ranges=RANGES)


def _chunk(first: datetime, last: datetime) -> Chunk:
    return Chunk(7, first, last, 1, 2)


def test_progress_keeps_its_sub_ranges_in_json_and_says_nothing_without_them() -> None:
    data = SELECTED.as_json()
    assert data["sub_ranges"] == [
        ["2025-01-01T00:00:00+00:00", "2025-01-02T00:00:00+00:00"],
        ["2025-01-05T00:00:00+00:00", "2025-01-05T00:00:00+00:00"],
        ["2025-01-08T00:00:00+00:00", "2025-01-10T00:00:00+00:00"],
    ]
    assert Progress.from_json(data) == SELECTED
    assert "sub_ranges" not in Progress(3).as_json()
    assert Progress.from_json(Progress(3).as_json()).sub_ranges is None


def test_the_next_sub_range_forwards_and_backwards() -> None:
    assert next_selected(SELECTED, backwards=False) == RANGES[0]
    assert next_selected(SELECTED, backwards=True) == RANGES[2]
    one = SELECTED.with_chunk(_chunk(*RANGES[0]))
    assert next_selected(one, backwards=False) == RANGES[1]
    two = one.with_chunk(_chunk(*RANGES[1]))
    assert next_selected(two, backwards=False) == RANGES[2]
    assert next_selected(two.with_chunk(_chunk(*RANGES[2])), backwards=False) is None
    last = SELECTED.with_chunk(_chunk(*RANGES[2]))
    assert next_selected(last, backwards=True) == RANGES[1]
    assert next_selected(last.with_chunk(_chunk(*RANGES[1])), backwards=True) == RANGES[0]
    done = last.with_chunk(_chunk(*RANGES[1])).with_chunk(_chunk(*RANGES[0]))
    assert next_selected(done, backwards=True) is None
    assert next_selected(Progress(0, sub_ranges=()), backwards=False) is None


def test_remaining_size_and_count_of_a_select_spec_are_its_sub_ranges() -> None:
    chunked = replace(spec(), execution=Execution(chunk_runs=1))
    policy = Policy(rules=(Rule(("d",), chunk_default=1),))
    assert remaining(chunked, SELECTED) == RANGES[0]
    assert remaining(replace(chunked, run_backwards=True), SELECTED) == RANGES[2]
    assert next_size(chunked, policy, SELECTED) is None  # a whole sub-range, whatever the chunk size
    assert next_size(chunked, policy, Progress(6)) == 1
    assert chunk_count(chunked, policy, SELECTED) == 3
    assert chunk_count(chunked, policy, Progress(6)) == 6


def test_a_select_spec_s_chunk_is_created_on_the_latest_version() -> None:
    piece = slice_of([JAN1, JAN1 + DAY], 2)
    assert request_for(replace(spec(), select=Select(4)), piece).run_on_latest_version is True
    assert request_for(replace(spec(), select=Select(4), run_on_latest_version=False), piece).run_on_latest_version
    assert request_for(spec(), piece).run_on_latest_version is None
    assert request_for(replace(spec(), run_on_latest_version=False), piece).run_on_latest_version is False
