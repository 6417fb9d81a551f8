"""A queued spec version's look-ahead as the binding keeps it: written and read back the same; anything this
release cannot read is read as not judged (the spec is judged again), never as a wrong judgement."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core.model.binding import Ahead

JUDGED = Ahead("sha256:ab", "2026-12-06T12:00:00Z", "the dry run counts 3 runs; expected_runs is 1", 3, 4)


@pytest.mark.parametrize("ahead", [JUDGED, Ahead("sha256:cd", "2026-12-06T12:00:00Z")])
def test_round_trip(ahead: Ahead) -> None:
    assert Ahead.from_json(ahead.as_json()) == ahead


def test_the_stored_shape() -> None:
    assert JUDGED.as_json() == {
        "digest": "sha256:ab",
        "at": "2026-12-06T12:00:00Z",
        "limit": "the dry run counts 3 runs; expected_runs is 1",
        "runs_to_create": 3,
        "runs_in_range": 4,
    }


@pytest.mark.parametrize(
    "change",
    [
        {"digest": None},
        {"at": 5},
        {"limit": 7},
        {"runs_to_create": "3"},
        {"runs_in_range": True},
        {"runs_to_create": 1.5},
    ],
)
def test_what_cannot_be_read_is_not_judged(change: dict[str, Any]) -> None:
    assert Ahead.from_json({**JUDGED.as_json(), **change}) is None


@pytest.mark.parametrize("data", [None, [], "x", {}, {"digest": "sha256:ab"}])
def test_not_a_judgement(data: Any) -> None:
    assert Ahead.from_json(data) is None
