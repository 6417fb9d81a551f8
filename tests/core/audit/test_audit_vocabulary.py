"""The audit vocabulary is declared once and every word has a notification decision (core/audit/vocabulary.py).

A word added to `Action`, `Outcome` or `Phase` without a row in the event table fails here; so does a word that
no code writes (like the `("promote", "done")` the notifications once mapped while apply wrote `promoted`).
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from controller.adapters.store import Store
from controller.core.audit.vocabulary import ACTIONS, OUTCOMES, PHASE_EVENTS, Action, AuditPhase, Outcome, event_of
from controller.core.model.binding import Phase
from controller.core.model.notify_policy import EVENTS, Alert, Event
from controller.core.plan.values import FindingKind

SOURCE = Path(__file__).resolve().parents[3] / "controller"


def test_every_action_has_its_outcomes_and_every_outcome_and_phase_a_decision() -> None:
    assert set(OUTCOMES) == set(Action)
    decided = {word for row in OUTCOMES.values() for word in row}
    missing = [o.value for o in Outcome if o not in decided]
    assert missing == [], f"outcomes without a notification decision in OUTCOMES: {missing}"
    assert set(PHASE_EVENTS) == {p.value for p in Phase}, "every phase needs a decision in PHASE_EVENTS"
    assert OUTCOMES[Action.OBSERVE] is PHASE_EVENTS


def test_every_event_is_sent_by_some_record_and_is_the_policy_schemas_list() -> None:
    sent = {event for row in OUTCOMES.values() for event in row.values() if event is not None}
    assert sent == set(Event)
    assert tuple(Event) == EVENTS
    schema = json.loads((SOURCE.parent / "schemas" / "policy.schema.json").read_text())
    listed = schema["properties"]["notify"]["properties"]["events"]["items"]["enum"]
    assert listed == [e.value for e in Event]


def test_the_planners_finding_kinds_are_no_outcome_words_and_only_the_alerts_are_events() -> None:
    assert not {k.value for k in FindingKind} & {o.value for o in Outcome}
    alerts = {FindingKind.INVALID_SPEC, FindingKind.INVALID_POLICY, FindingKind.EDITED_IN_PLACE}
    assert {a.value for a in Alert} == {k.value for k in alerts}
    for kind in FindingKind:
        expected = Event.INVALID if kind in alerts else None
        assert event_of(Action.FINDING, AuditPhase.OBSERVATION, kind) is expected
    assert event_of(Action.FINDING, AuditPhase.OBSERVATION, Outcome.STUCK) is Event.STUCK


@pytest.mark.parametrize(("enum", "name"), [(Action, "Action"), (Outcome, "Outcome")])
def test_every_word_is_written_by_some_code(enum: type[Action] | type[Outcome], name: str) -> None:
    """A declared word nothing writes is a mapping for nothing: the drift this table replaces."""
    text = "\n".join(p.read_text() for p in SOURCE.rglob("*.py") if p.name != "vocabulary.py")
    used = set(re.findall(rf"\b{name}\.([A-Z_0-9]+)\b", text))
    assert [w.name for w in enum if w.name not in used] == []


def test_audit_show_accepts_every_action_in_the_order_declared() -> None:
    assert tuple(Action) == ACTIONS
    assert list(ACTIONS) == sorted(ACTIONS)


@pytest.mark.parametrize(
    ("action", "phase", "outcome", "event"),
    [
        ("create", "outcome", "created", "created"),
        ("create", "intent", None, None),
        ("pause", "outcome", "done", "paused"),
        ("pause", "outcome", "halted", "halted"),  # a halt mid-chunk: its pause
        ("observe", "observation", "Halted", "halted"),  # a halt between chunks: nothing to pause
        ("observe", "observation", "AwaitingPromotion", None),  # once sent as a second `created`
        ("promote", "observation", "promoted", "promoted"),
        ("promote", "observation", "done", None),  # once mapped, never written
        ("unlock", "outcome", "released", None),
        ("observe", "observation", "NotAPhase", None),
        ("rehearse", "outcome", "done", None),  # a record a later version wrote: read, never an event
    ],
)
def test_event_of(action: str, phase: str, outcome: str | None, event: str | None) -> None:
    assert event_of(action, phase, outcome) == event


# made with main's backfillctl before this vocabulary (fake Airflow: a halt, a resume, a canary, its promotion)
BEFORE = Path(__file__).parent / "data" / "store-before-vocabulary.db"
BEFORE_HEAD = "666038c6b92bf13d0739c2650fe0376ec56e273605a3e7a4824fe9eaab0534d9"


def test_a_store_written_before_the_vocabulary_verifies_and_each_of_its_words_has_a_decision(tmp_path: Path) -> None:
    committed = BEFORE.read_bytes()
    copy = tmp_path / "state.db"  # opened only as a copy: SQLite would leave -wal/-shm files in the checkout
    shutil.copy(BEFORE, copy)
    with Store(f"sqlite:///{copy}") as store:  # migrated to this version's schema head first
        result = store.verify(BEFORE_HEAD)
        events = store.events()
    assert (result.ok, result.count, result.head_hash) == (True, 24, BEFORE_HEAD)
    written = {(e.entry.action, e.entry.outcome) for e in events if e.entry.phase != AuditPhase.INTENT}
    assert {(a, o) for a, o in written if o not in OUTCOMES[Action(a)]} == set()
    assert ("observe", "AwaitingPromotion") in written  # once sent as `created`: now no event
    assert event_of("observe", "observation", "AwaitingPromotion") is None
    assert BEFORE.read_bytes() == committed
    assert sorted(p.name for p in BEFORE.parent.iterdir()) == [BEFORE.name]
