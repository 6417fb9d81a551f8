"""Version coverage in the change record's JSON, in status rows and in the terminal notification (pure)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

from controller.core.audit.notify import enrich
from controller.core.model.airflow import DagVersion
from controller.core.model.binding import Binding, Phase
from controller.core.model.coverage import DISCLAIMER, Coverage, Gap, Missed, TargetSource
from controller.core.model.spec import Select
from controller.core.plan.values import Item, Kind, Plan
from controller.core.render.change_record import change_record
from controller.core.render.coverage_text import check_json, check_text, coverage_facts, listed
from controller.core.render.status import status_rows, stored_rows, with_coverage
from controller.core.render.status_page import status_page
from tests.core.plan.test_plan import spec

V4 = DagVersion(4)
GAP = Missed("2025-01-02T00:00:00+00:00", Gap.FAILED, (V4,))
COVERAGE = Coverage(V4, TargetSource.AT_END, intervals=3, covered=2, missed=(GAP,))
LINE = "version coverage: 2 of 3 intervals on DAG version 4 (1 failed)"


def test_the_record_keeps_the_coverage_measured_at_the_end_with_what_it_is_not() -> None:
    record = change_record(spec("r"), Binding("r", "d", 5, Phase.SUCCEEDED, coverage=COVERAGE), [])
    assert record.coverage == COVERAGE
    assert record.as_json()["coverage"] == COVERAGE.as_json() | {"changed_since_end": [], "note": DISCLAIMER}
    assert "coverage" not in change_record(spec("r"), Binding("r", "d", 5, Phase.SUCCEEDED), []).as_json()
    assert change_record(spec("r"), None, []).coverage is None
    assert coverage_facts(record) == [
        ("Version coverage", f"{LINE}; target: the DAG's latest version when the spec ended; information only (the "
         "spec has no `select`): its outcome comes from its own runs, as always"),
        ("Not covered", "2025-01-02T00:00:00+00:00 (failed: DAG version 4)"),
        ("What coverage is", DISCLAIMER),
    ]  # fmt: skip
    selecting = change_record(spec("r", select=Select(4)), Binding("r", "d", 5, Phase.SUCCEEDED, coverage=COVERAGE), [])
    assert coverage_facts(selecting)[0] == (
        "Version coverage",
        f"{LINE}; target: the DAG's latest version when the spec ended; a `select` spec: an interval not covered is "
        "one it did not bring onto its target; its outcome comes from its own runs",
    )


def test_a_long_list_is_cut_at_a_hundred_and_says_how_many_more() -> None:
    many = [Missed(f"p{n}", Gap.NEVER_RAN) for n in range(102)]
    assert listed(many).endswith("; p99 (never ran); and 2 more (the JSON record lists every one)")
    assert listed(many[:100]).endswith("; p99 (never ran)")


def test_status_shows_a_finished_spec_s_coverage_in_one_line() -> None:
    done = Binding("r", "d", 5, Phase.SUCCEEDED, reason="3 run(s) succeeded", coverage=COVERAGE)
    (row,) = stored_rows([spec("r")], {"r": done})
    assert row.note.endswith(f"3 run(s) succeeded · {LINE}")
    assert row.as_json()["coverage"] == COVERAGE.as_json()
    assert with_coverage(row, None) is row
    bare = with_coverage(replace(row, note="", coverage=None), done)
    assert bare.note == LINE
    page = status_page([row], [], datetime(2026, 12, 1, tzinfo=UTC))
    assert f'<td class="note">(stored None) 3 run(s) succeeded · {LINE}</td>' in page
    running = Binding("r", "d", 5, Phase.RUNNING, coverage=COVERAGE)
    (live,) = stored_rows([spec("r")], {"r": running})
    assert (live.coverage, "coverage" in live.as_json()) == (None, False)


def test_a_pass_s_status_rows_say_it_for_the_spec_whose_binding_has_it() -> None:
    done = Item("r", "d", Kind.NOOP, Phase.SUCCEEDED, "3 run(s) succeeded", 5, source=spec("r"))
    other = replace(done, spec="o")
    bound = {"r": Binding("r", "d", 5, Phase.SUCCEEDED, coverage=COVERAGE), "o": Binding("o", "d", 6, Phase.SUCCEEDED)}
    row, plain = status_rows(Plan((done, other)), bound)
    assert (row.note, row.coverage) == (f"3 run(s) succeeded · {LINE}", COVERAGE)
    assert (plain.note, plain.coverage) == ("3 run(s) succeeded", None)


def test_the_terminal_notification_carries_the_line() -> None:
    facts = {"event": "succeeded", "spec": "r"}
    assert enrich(facts, None, None, LINE)["coverage"] == LINE
    assert "coverage" not in enrich(facts, None, None)
    assert "coverage" not in enrich({"event": "created"}, None, None, LINE)


def test_check_text_and_json() -> None:
    assert check_text("r", COVERAGE, [GAP]) == (
        f"r: coverage does not hold: {LINE}; target: the DAG's latest version when the spec ended\n"
        "not covered since it ended: 1 interval\n  2025-01-02T00:00:00+00:00 (failed: DAG version 4)\n"
        "not covered now: 1 interval\n  2025-01-02T00:00:00+00:00 (failed: DAG version 4)\n"
        f"{DISCLAIMER}\n"
    )
    assert check_json("r", COVERAGE, [GAP]) == {
        "format_version": 1,
        "spec": "r",
        "holds": False,
        "coverage": COVERAGE.as_json(),
        "changed_since_end": [GAP.as_json()],
        "note": DISCLAIMER,
    }
