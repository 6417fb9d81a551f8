"""A spec's `resume` judged by the store's stops and halts (`core.checks.resumes`)."""

from __future__ import annotations

from datetime import UTC, datetime

from controller.core.checks.resumes import HeldBy, judge_resumes
from controller.core.checks.validation import check_spec
from controller.core.documents.diagnostics import Diagnostic
from controller.core.model.policy import DEFAULT_POLICY
from tests.core.specs import loaded, text

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def judged(resume: str, held: list[HeldBy], halted: frozenset[str] = frozenset()) -> list[tuple[str, str | None]]:
    item = loaded(text() + f"resume: {resume}\n")
    found: list[Diagnostic] = list(check_spec(item, DEFAULT_POLICY, NOW))
    return [(d.message, d.hint) for d in judge_resumes([item], found, {"s": held}, halted) if "resume" in d.message]


def test_a_halted_spec_s_resume_is_no_warning_and_a_named_stop_that_held_it_neither() -> None:
    assert judged('"CHG-2 fixed"', [], frozenset({"s"})) == []
    assert judged('"stop #3: fixed"', [HeldBy(3, "downstream lake", False)]) == []


def test_a_resume_naming_nothing_lists_the_stops_holding_the_spec_now() -> None:
    ((message, hint),) = judged('"CHG-2 fixed"', [HeldBy(1, "spec s", False), HeldBy(2, "all *", True)])
    assert message.startswith("resume has no effect: it names no stop")
    assert hint is not None
    assert hint.endswith("or remove it; stops holding s now: #2 (all *, in force)")
    ((_, hint),) = judged('"CHG-2 fixed"', [])
    assert hint is not None
    assert hint.endswith("; stops holding s now: none")


def test_a_named_stop_that_never_held_the_spec_lifts_nothing() -> None:
    assert judged('"stop #4: fixed; stop #1"', [HeldBy(1, "spec s", True)]) == [
        (
            "resume names stop #4, but no stop #4 ever held s: it lifts nothing",
            "name a stop that held it (the store's: #1 (spec s, in force)); `backfillctl stop list` shows the stops "
            "in force",
        )
    ]
