"""Immutability of applied specs and the classification of a pull request's changes (pure)."""

from __future__ import annotations

import pytest

from controller.core.checks.changes import Change, SpecChange, classify, immutability
from controller.core.documents.diagnostics import Diagnostic, Location, Severity
from tests.core.specs import loaded, text

HINT = (
    "create a new spec; the applied backfill cannot be changed in place (only `state`, `promote`, `resume`, "
    "`acknowledged`, `execution`, `windows`, `notify`, `rehearsal`, `verify`, `publish`, `writes` and `rollback` may "
    "change)"
)
MAR_HINT = (
    "create a new spec; Airflow cannot change an applied backfill's max_active_runs "
    "(a spec with `execution` may change it: it applies from the next chunk)"
)
CONF = text() + "dag_run_conf: {full: true}\n"


def errors(before: str, after: str) -> list[tuple[str, int, int, str, str | None]]:
    found = immutability({"s": loaded(before).spec}, {"s": loaded(after)}, "main")
    return [(str(d.location), d.location.line, d.location.column, d.message, d.hint) for d in found]


@pytest.mark.parametrize(
    ("before", "after", "message", "line", "column"),
    [
        (text(), text(dag="orders_hourly"), "dag_id changed from 'orders_daily' to 'orders_hourly'", 3, 9),
        (text(), text(reprocess="failed"), "reprocess_behavior changed from 'none' to 'failed'", 6, 21),
        (
            text(),
            text().replace('to_date: "2025-01-07"', 'to_date: "2025-01-08"'),
            "to_date changed from '2025-01-07T00:00:00Z' to '2025-01-08T00:00:00Z'",
            5,
            10,
        ),
        (
            text(),
            text().replace('from_date: "2025-01-01"', 'from_date: "2024-12-31"'),
            "from_date changed from '2025-01-01T00:00:00Z' to '2024-12-31T00:00:00Z'",
            4,
            12,
        ),
        (text(), text() + "run_backwards: true\n", "run_backwards changed from False to True", 12, 16),
        (text(), CONF, "dag_run_conf changed from unset to '{\"full\":true}'", 12, 15),
        (CONF, text(), "dag_run_conf changed from '{\"full\":true}' to unset", 1, 1),
        (
            CONF,
            text() + "dag_run_conf: {full: false}\n",
            "dag_run_conf changed from '{\"full\":true}' to '{\"full\":false}'",
            12,
            15,
        ),
        (text() + "run_on_latest_version: true\n", text(), "run_on_latest_version changed from True to unset", 1, 1),
    ],
)
def test_every_applied_field_is_immutable(before: str, after: str, message: str, line: int, column: int) -> None:
    assert errors(before, after) == [(f"specs/s.yaml:{line}:{column}", line, column, f"{message} since main", HINT)]


def test_deleting_dag_run_conf_is_an_error_located_at_the_spec() -> None:
    (diagnostic,) = immutability({"s": loaded(CONF).spec}, {"s": loaded(text())}, "origin/main")
    assert diagnostic == Diagnostic(
        Location("specs/s.yaml", 1, 1),
        "dag_run_conf changed from '{\"full\":true}' to unset since origin/main",
        HINT,
    )
    assert diagnostic.is_error


def test_the_same_instant_written_another_way_is_no_change() -> None:
    after = text().replace('from_date: "2025-01-01"', 'from_date: "2025-01-01T01:00:00+01:00"')
    assert errors(text(), after) == []


def test_mutable_fields_and_new_specs_are_free_and_deletions_warn() -> None:
    after = text().replace("reason: A backfill under review.", "reason: Another reason, longer.") + "state: paused\n"
    assert immutability({"s": loaded(text()).spec}, {"s": loaded(after)}, "main") == []
    assert immutability({}, {"s": loaded(text())}, "main") == []
    gone = loaded(text(name="gone"), "gone").spec
    assert immutability({"gone": gone}, {}, "main") == [
        Diagnostic(
            Location("specs/gone.yaml", 1, 1),
            "spec 'gone' is deleted since main",
            "deleting a spec cancels nothing; set `state: cancelled` to stop its backfill",
            Severity.WARNING,
        )
    ]


def test_several_changes_are_all_reported_in_field_order() -> None:
    after = text(dag="x", reprocess="completed") + "run_backwards: true\n"
    assert [m for _, _, _, m, _ in errors(text(), after)] == [
        "dag_id changed from 'orders_daily' to 'x' since main",
        "reprocess_behavior changed from 'none' to 'completed' since main",
        "run_backwards changed from False to True since main",
    ]


def test_classify() -> None:
    base = {n: loaded(text(name=n), n).spec for n in ("same", "state", "reason", "dag", "gone")}
    head = {
        "same": loaded(text(name="same"), "same"),
        "state": loaded(text(name="state") + "state: cancelled\n", "state"),
        "reason": loaded(text(name="reason").replace("under review", "being reviewed"), "reason"),
        "dag": loaded(text(name="dag", dag="other"), "dag"),
        "new": loaded(text(name="new"), "new"),
    }
    assert classify(base, head) == [
        SpecChange("dag", Change.CHANGED, "specs/dag.yaml"),
        SpecChange("gone", Change.DELETED, "specs/gone.yaml"),
        SpecChange("new", Change.ADDED, "specs/new.yaml"),
        SpecChange("reason", Change.CHANGED, "specs/reason.yaml"),
        SpecChange("same", Change.UNCHANGED, "specs/same.yaml"),
        SpecChange("state", Change.STATE_ONLY, "specs/state.yaml"),
    ]


def test_state_and_immutable_change_together_is_changed_not_state_only() -> None:
    head = {"s": loaded(text(dag="other") + "state: paused\n")}
    assert classify({"s": loaded(text()).spec}, head) == [SpecChange("s", Change.CHANGED, "specs/s.yaml")]


def test_a_new_spec_sorted_first_does_not_hide_changes_to_later_ones() -> None:
    head = {"a-new": loaded(text(name="a-new"), "a-new"), "s": loaded(text(dag="other"))}
    found = immutability({"s": loaded(text()).spec}, head, "main")
    assert [d.message for d in found] == ["dag_id changed from 'orders_daily' to 'other' since main"]


CHUNKED = text() + "execution: {chunk_runs: 24}\n"


def more_runs(body: str) -> str:
    return body.replace("max_active_runs: 3", "max_active_runs: 4")


def test_max_active_runs_of_an_unchunked_spec_is_immutable() -> None:
    assert errors(text(), more_runs(text())) == [
        ("specs/s.yaml:7:18", 7, 18, "max_active_runs changed from 3 to 4 since main", MAR_HINT)
    ]


@pytest.mark.parametrize(
    "after",
    [
        more_runs(CHUNKED),
        more_runs(text()) + "execution: {chunk_runs: 48, canary_runs: 12, halt_on_failure_ratio: 0.5}\n",
        more_runs(CHUNKED) + "state: paused\n",
    ],
    ids=["same-execution", "execution-changed-too", "with-state"],
)
def test_a_chunked_spec_may_change_max_active_runs_from_the_next_chunk(after: str) -> None:
    assert errors(CHUNKED, after) == []
    assert classify({"s": loaded(CHUNKED).spec}, {"s": loaded(after)}) == [
        SpecChange("s", Change.CHANGED, "specs/s.yaml")
    ]


def test_adding_execution_after_apply_cannot_change_max_active_runs_in_the_same_change() -> None:
    assert errors(text(), more_runs(CHUNKED)) == [
        (
            "specs/s.yaml:7:18",
            7,
            18,
            "max_active_runs changed from 3 to 4 since main, in the same change that adds `execution`",
            "the running backfill is not chunked: Airflow cannot change its max_active_runs; "
            "create a new spec to run the rest with another limit",
        )
    ]
    assert errors(text(), CHUNKED) == []  # adding execution alone is allowed


def test_removing_execution_cannot_change_max_active_runs_in_the_same_change() -> None:
    assert errors(CHUNKED, more_runs(text())) == [
        (
            "specs/s.yaml:7:18",
            7,
            18,
            "max_active_runs changed from 3 to 4 since main, in the same change that removes `execution`",
            "keep `execution` to change max_active_runs from the next chunk, or create a new spec",
        )
    ]


def test_a_chunked_spec_keeps_every_other_field_immutable() -> None:
    after = more_runs(CHUNKED).replace("dag_id: orders_daily", "dag_id: orders_hourly")
    assert errors(CHUNKED, after) == [
        ("specs/s.yaml:3:9", 3, 9, "dag_id changed from 'orders_daily' to 'orders_hourly' since main", HINT)
    ]


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (CHUNKED, text() + "execution: {chunk_runs: 48}\n"),
        (CHUNKED, text() + "execution: {chunk_runs: 24, canary_runs: 6}\n"),
        (CHUNKED, text() + "execution: {chunk_runs: 24, halt_on_failure_ratio: 0.1}\n"),
        (text(), CHUNKED),
        (CHUNKED, text()),
        (CHUNKED, CHUNKED + "promote: true\n"),
        (CHUNKED + "promote: true\n", CHUNKED + "promote: false\n"),
        (CHUNKED, CHUNKED + 'resume: "CHG-2 fix deployed"\n'),
        (CHUNKED + 'resume: "first"\n', CHUNKED + 'resume: "second"\n'),
    ],
    ids=[
        "chunk_runs",
        "canary_runs",
        "halt_on_failure_ratio",
        "execution-added",
        "execution-removed",
        "promote-added",
        "promote-flipped",
        "resume-added",
        "resume-new-value",
    ],
)
def test_execution_promote_and_resume_are_mutable_changes(before: str, after: str) -> None:
    assert errors(before, after) == []
    assert classify({"s": loaded(before).spec}, {"s": loaded(after)}) == [
        SpecChange("s", Change.CHANGED, "specs/s.yaml")
    ]
