"""Run notes (pure): what a note says, how it joins a person's, and which runs a pass notes."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from controller.core.model.binding import Binding, CreateFacts, NotesMark, Phase
from controller.core.model.ranges import compact
from controller.core.model.run_notes import AirflowNotes, NoteField, parse_notes
from controller.core.model.spec import BackfillSpec
from controller.core.plan.run_notes import NoteWork, advanced, notes_due
from controller.core.render.run_note import NOTE_LIMIT, SEPARATOR, marker, merged_note, our_note
from tests.core.plan.test_plan import spec as plan_spec

DAY = timedelta(days=1)
START = datetime(2025, 1, 1, tzinfo=UTC)


def _dates(n: int) -> list[datetime]:
    return [START + i * DAY for i in range(n)]


def a_spec(name: str = "s", dag_id: str = "demo_daily", **extra: object) -> BackfillSpec:
    return plan_spec(name, dag_id, **extra)


def _bound(name: str, backfill_id: int | None, n: int, noted: NotesMark | None = None) -> Binding:
    created = CreateFacts(n, n, dates=compact(_dates(n))) if n else None
    return Binding(name, "demo_daily", backfill_id, Phase.RUNNING, created=created, noted=noted)


def test_the_note_names_the_spec_then_each_chosen_field_escaped() -> None:
    spec = a_spec(name="nightly-fix", ticket="CHG-7", reason="Re-run *all* of [Jan](http://x) <b>", requested_by="ana")
    parsed = parse_notes({"dags": ["demo_*"], "fields": ["reason", "ticket"]})
    assert parsed is not None
    notes = parsed
    assert our_note(spec, notes) == (
        "**backfillctl** spec `nightly-fix`  \n- ticket: `CHG-7`  \n"
        "- reason: Re-run \\*all\\* of \\[Jan\\]\\(http://x\\) \\<b\\>"
    )


def test_the_fields_keep_their_declared_order_and_the_spec_is_always_named() -> None:
    parsed = parse_notes({"dags": ["a"], "fields": ["approvers", "ticket"]})
    assert parsed is not None
    assert parsed.fields == (NoteField.SPEC, NoteField.TICKET, NoteField.APPROVERS)
    assert parse_notes(None) is None
    assert parse_notes({"dags": ["a"]}) == AirflowNotes(("a",), (NoteField.SPEC, NoteField.TICKET))


def test_the_change_record_link_quotes_spec_and_ticket() -> None:
    spec = a_spec(name="fix-1", ticket="CHG-1")
    notes = AirflowNotes(
        ("*",), (NoteField.SPEC, NoteField.CHANGE_RECORD_URL), "https://t.example/browse/{ticket}?s={spec}"
    )
    assert our_note(spec, notes).endswith("- change record: <https://t.example/browse/CHG-1?s=fix-1>")


def test_a_person_s_note_is_kept_and_ours_appended_once() -> None:
    ours = "**backfillctl** spec `a`  \n- ticket: `CHG-1`"
    assert merged_note(None, ours, "a") == ours
    assert merged_note("  \n", ours, "a") == ours
    assert merged_note("checked by Ana", ours, "a") == "checked by Ana" + SEPARATOR + ours
    assert merged_note("checked by Ana" + SEPARATOR + ours, ours, "a") is None  # once
    assert merged_note(ours, ours, "a") is None


def test_without_room_ours_shrinks_to_the_marker_or_is_left_out() -> None:
    ours = marker("a") + "  \n- ticket: `CHG-1`"
    room_for_marker = "x" * (NOTE_LIMIT - len(SEPARATOR) - len(marker("a")))
    assert merged_note(room_for_marker, ours, "a") == room_for_marker + SEPARATOR + marker("a")
    assert merged_note(room_for_marker + "x", ours, "a") is None
    assert len(room_for_marker + SEPARATOR + marker("a")) == NOTE_LIMIT


def test_a_long_note_is_cut_to_airflow_s_limit() -> None:
    spec = a_spec(reason="r" * 5000, requested_by="q" * 5000)
    notes = AirflowNotes(("*",), tuple(NoteField))
    assert len(our_note(spec, notes)) <= NOTE_LIMIT


def test_a_pass_notes_the_next_dates_of_each_covered_spec_within_its_budget() -> None:
    specs = [a_spec(name="b"), a_spec(name="a"), a_spec(name="c", dag_id="other")]
    bindings = {"a": _bound("a", 1, 3), "b": _bound("b", 2, 5), "c": _bound("c", 3, 2)}
    notes = AirflowNotes(("demo_*",))
    due = notes_due(specs, bindings, notes, budget=4)
    assert due == [NoteWork("a", "demo_daily", 1, tuple(_dates(3))), NoteWork("b", "demo_daily", 2, tuple(_dates(1)))]
    assert notes_due(specs, bindings, None) == []


def test_a_mark_skips_what_is_noted_and_another_backfill_starts_again() -> None:
    spec = a_spec(name="a")
    done = _bound("a", 1, 3, NotesMark(1, _dates(3)[-1]))
    half = _bound("a", 1, 3, NotesMark(1, _dates(3)[0]))
    restarted = _bound("a", 2, 3, NotesMark(1, _dates(3)[-1]))
    notes = AirflowNotes(("*",))
    assert notes_due([spec], {"a": done}, notes) == []
    assert notes_due([spec], {"a": half}, notes)[0].dates == tuple(_dates(3)[1:])
    assert notes_due([spec], {"a": restarted}, notes)[0].dates == tuple(_dates(3))
    assert notes_due([spec], {"a": _bound("a", None, 3)}, notes) == []
    assert notes_due([spec], {"a": _bound("a", 1, 0)}, notes) == []


@pytest.mark.parametrize(
    ("through", "expected"),
    [
        (None, None),
        (START - DAY, None),
        (START, NotesMark(9, START)),
        (START + 10 * DAY, NotesMark(9, START + 2 * DAY)),
    ],
)
def test_the_mark_advances_to_the_last_date_gone_over(through: datetime | None, expected: NotesMark | None) -> None:
    assert advanced(NoteWork("a", "d", 9, tuple(_dates(3))), through, None) == expected
