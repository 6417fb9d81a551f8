"""The change record's words for who approved a spec, and their JSON in the binding (pure)."""

from __future__ import annotations

import pytest

from controller.core.model.binding import Approval, ApprovedReview
from controller.core.plan.provenance import approved_by

BOB = ApprovedReview("bob", 9001, "c0ffee", "2026-11-01T10:00:00Z")
ERIN = ApprovedReview("erin", None, "", "")


@pytest.mark.parametrize(
    ("approval", "words"),
    [
        (Approval(41, "abc", (BOB,)), "bob in #41 (review 9001, 2026-11-01T10:00Z)"),
        (
            Approval(41, None, (BOB, ERIN)),
            "bob in #41 (review 9001, 2026-11-01T10:00Z), erin in #41 (review id unknown, time unknown)",
        ),
        (None, "approval not recorded (the spec lists bob, carol)"),
    ],
)
def test_approved_by_names_each_review_or_says_there_is_no_record(approval: Approval | None, words: str) -> None:
    assert approved_by(approval, ("bob", "carol")) == words


def test_an_approval_survives_the_bindings_json() -> None:
    approval = Approval(41, "abc", (BOB, ERIN))
    assert Approval.from_json(approval.as_json()) == approval
    assert Approval.from_json(None) is None
    assert (
        ApprovedReview("x", 1, "", "2026-11-01T10:00:00.123Z").text(7) == "x in #7 (review 1, 2026-11-01T10:00:00.123Z)"
    )
