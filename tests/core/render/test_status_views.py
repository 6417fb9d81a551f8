"""Status rows (pure) for the views a bad day needs: an unobserved Airflow, offline rows for invalid and edited
files, the links to Airflow's UI, a queued spec refused at the head, and Airflow's skipped slots."""

from __future__ import annotations

from datetime import timedelta

from packaging.version import Version

from controller.core.checks.changes import FieldChange
from controller.core.model.airflow import RunSummary, Skipped
from controller.core.model.binding import Binding, Phase
from controller.core.model.capabilities import capabilities_of
from controller.core.model.spec import InvalidSpec
from controller.core.plan.edits import Edit
from controller.core.plan.values import UNOBSERVED, Item, Kind, Plan
from controller.core.render.status import StatusRow, status_report, status_rows, stored_rows, with_links
from tests.core.plan.test_plan import JAN1, spec

SEEN = "2026-12-01T09:30:00.123456+00:00"


def unobserved(reason: str = f"{UNOBSERVED}: Airflow unreachable (timeout)") -> Item:
    return Item("s", "d2", Kind.WAIT, Phase.RUNNING, reason, 4, unobserved=True)


def test_an_unobserved_spec_shows_what_was_last_seen_marked_stale() -> None:
    seen = Binding(
        "s", "d", 4, Phase.RUNNING, runs=RunSummary({"success": 2, "queued": 1}), reason="in sync", updated_at=SEEN
    )
    (row,) = status_rows(Plan((unobserved(),)), {"s": seen})
    assert row == StatusRow(
        "s",
        "d2",
        "Running",
        4,
        2,
        0,
        0,
        1,
        3,
        None,
        "stale: not observed now (Airflow unreachable (timeout)); last observed 2026-12-01T09:30:00Z: in sync",
        stale=True,
        observed_at=SEEN,
    )
    (never,) = status_rows(Plan((unobserved("observation incomplete"),)), {})
    assert (never.spec, never.dag_id, never.phase, never.stale) == ("s", "d2", "Pending", True)
    assert never.note == "stale: not observed now (observation incomplete); never observed yet"
    undated = Binding("s", "d", 4, Phase.PAUSED, reason="paused by stop #3")
    (row,) = status_rows(Plan((unobserved(),)), {"s": undated})
    assert row.note == (
        "stale: not observed now (Airflow unreachable (timeout)); last observed at an unknown time: paused by stop #3"
    )


def invalid(path: str, name: str, dag_id: str = "d", errors: tuple[str, ...] = ("a: bad",)) -> InvalidSpec:
    return InvalidSpec(path, name, dag_id, errors)


def test_offline_rows_block_an_invalid_file_under_its_own_name_or_its_path() -> None:
    stored = {
        "lost": Binding("lost", "d9", 7, Phase.RUNNING, reason="in sync", updated_at=SEEN),
        "a": Binding("a", "d", 3, Phase.RUNNING, reason="in sync", updated_at=SEEN),
    }
    broken = [invalid("specs/zz.yaml", "a", "d"), invalid("specs/lost.yaml", "lost", "", ("x: y", "z: w"))]
    rows = stored_rows([spec("a")], stored, broken)
    assert [(r.spec, r.dag_id, r.phase, r.backfill_id, r.note) for r in rows] == [
        ("a", "d", "Running", 3, f"(stored {SEEN}) in sync"),
        (
            "lost",
            "d9",
            "Blocked",
            7,
            "invalid spec: x: y (and 1 more); fix the file (`backfillctl validate` lists every error)",
        ),
        (
            "specs/zz.yaml",
            "d",
            "Blocked",
            None,
            "invalid spec: a: bad; fix the file (`backfillctl validate` lists every error)",
        ),
    ]
    assert [r.refused for r in rows] == [False, False, False]
    assert [r.stale for r in rows] == [True, True, True]


def test_offline_rows_block_an_applied_spec_edited_in_place() -> None:
    edit = Edit("a", (FieldChange("to_date", "2025-01-07", "2025-01-09"),), "a" * 40, "b" * 40)
    applied = Binding("a", "d", 3, Phase.SUCCEEDED, reason="7 run(s) succeeded", updated_at=SEEN)
    rows = stored_rows([spec("a"), spec("b")], {"a": applied}, (), {"a": edit})
    assert [(r.spec, r.phase, r.note) for r in rows] == [
        ("a", "Blocked", edit.text()),
        ("b", "Pending", "(stored -) not reconciled yet"),
    ]
    assert edit.text().startswith("edited in place by commit bbbbbbbbbbbb: to_date")


def test_links_go_to_each_backfill_in_airflows_ui() -> None:
    rows = [
        StatusRow("a", "orders daily", "Running", 7, 0, 0, 0, 0, 0, None, ""),
        StatusRow("b", "d", "Pending", None, 0, 0, 0, 0, 0, None, ""),
    ]
    old, new = capabilities_of(Version("3.3.2")), capabilities_of(Version("3.4.0"))
    assert [r.link for r in with_links(rows, "https://a.example", new)] == [
        "https://a.example/dags/orders%20daily/backfills/7",
        "https://a.example/dags/d/runs?run_type=backfill",
    ]
    assert [r.link for r in with_links(rows, "https://a.example", old)] == [
        "https://a.example/dags/orders%20daily/runs?run_type=backfill",
        "https://a.example/dags/d/runs?run_type=backfill",
    ]
    assert [r.link for r in with_links(rows, None, new)] == [None, None]
    assert [r.note for r in with_links(rows, "https://a.example", new)] == ["", ""]


def test_a_queued_spec_refused_at_the_head_and_its_skipped_slots_are_in_its_row_and_json() -> None:
    skipped = (Skipped("2025-01-03", "in flight"), Skipped("2025-01-04", "already exists"))
    queued = Item(
        "s",
        "d",
        Kind.WAIT,
        Phase.QUEUED,
        "queued behind a",
        runs=RunSummary({"success": 1}, skipped=skipped),
        refused_at_head="the dry run counts 9 runs; expected_runs is 2",
    )
    (row,) = status_rows(Plan((queued,)), {})
    assert (row.refused_at_head, row.skipped) == ("the dry run counts 9 runs; expected_runs is 2", skipped)
    shown = row.as_json()
    assert shown["refused_at_head"] == "the dry run counts 9 runs; expected_runs is 2"
    assert shown["skipped"] == [
        {"slot": "2025-01-03", "reason": "in flight"},
        {"slot": "2025-01-04", "reason": "already exists"},
    ]
    plain = StatusRow("s", "d", "Queued", None, 0, 0, 0, 0, 0, None, "")
    assert "refused_at_head" not in plain.as_json()
    assert "skipped" not in plain.as_json()
    text = status_report([row], 60).splitlines()
    assert text[-2:] == [
        "s: skipped by Airflow: 2025-01-03 (in flight),",
        "    2025-01-04 (already exists)",
    ]


def test_offline_rows_keep_airflows_skipped_slots() -> None:
    skipped = (Skipped("2025-01-02", "already exists"),)
    seen = Binding("s", "d", 4, Phase.SUCCEEDED, runs=RunSummary({"success": 6}, skipped=skipped), updated_at=SEEN)
    (row,) = stored_rows([spec("s")], {"s": seen})
    assert row.skipped == skipped
    (row,) = status_rows(Plan((unobserved(),)), {"s": seen})
    assert row.skipped == skipped
    assert JAN1 + timedelta(days=1) == JAN1.replace(day=2)
