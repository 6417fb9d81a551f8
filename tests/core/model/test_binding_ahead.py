"""A queued spec version's dry run as the binding keeps it: written and read back the same; anything this release
cannot read is read as not judged (the spec is dry-run again), never as a wrong count."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core.model.binding import Ahead

JUDGED = Ahead("sha256:ab", "2026-12-06T12:00:00Z", 3, 4)
SELECTED = Ahead("sha256:cd", "2026-12-06T12:00:00Z", 2, 7, 2)


@pytest.mark.parametrize("ahead", [JUDGED, SELECTED, Ahead("sha256:ef", "2026-12-06T12:00:00Z")])
def test_round_trip(ahead: Ahead) -> None:
    assert Ahead.from_json(ahead.as_json()) == ahead


def test_the_stored_shape() -> None:
    assert SELECTED.as_json() == {
        "digest": "sha256:cd",
        "at": "2026-12-06T12:00:00Z",
        "runs_to_create": 2,
        "runs_in_range": 7,
        "sub_ranges": 2,
    }


@pytest.mark.parametrize(
    "change",
    [
        {"digest": None},
        {"at": 5},
        {"runs_to_create": "3"},
        {"runs_in_range": True},
        {"runs_to_create": 1.5},
        {"sub_ranges": [2]},
    ],
)
def test_what_cannot_be_read_is_not_judged(change: dict[str, Any]) -> None:
    assert Ahead.from_json({**SELECTED.as_json(), **change}) is None


@pytest.mark.parametrize("data", [None, [], "x", {}, {"digest": "sha256:ab"}])
def test_not_a_judgement(data: Any) -> None:
    assert Ahead.from_json(data) is None
