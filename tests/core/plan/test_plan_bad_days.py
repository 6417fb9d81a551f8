"""Validation per spec and what was approved is what runs (pure, table-driven): an invalid file is Blocked alone, an
invalid policy holds every start and no reduction, an applied spec edited in place is planned as applied and shown
Blocked (`core.plan.invalid`, `core.plan.edits`, `core.checks.changes.edited_fields`)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from types import MappingProxyType

import pytest

from controller.core.checks.changes import FieldChange, edited_fields, mutable_changes
from controller.core.model.airflow import RunSummary
from controller.core.model.binding import Applied, Binding, Phase
from controller.core.model.policy import Policy
from controller.core.model.spec import DesiredState, Execution, InvalidSpec, ReprocessBehavior
from controller.core.plan.desired import Desired, plan_desired
from controller.core.plan.edits import Edit, applied_view, hold_edited
from controller.core.plan.invalid import hold_starts, invalid_items
from controller.core.plan.queue import make_plan
from controller.core.plan.values import Finding, FindingKind, Item, Kind, Plan
from tests.core.plan.test_plan import JAN1, backfill, bound, dates, decided, spec, world

INVALID = InvalidSpec("specs/typo.yaml", "typo", "d", ("specs/typo.yaml:3:1: $.dagid: unknown field 'dagid'",))
REASON = (
    "invalid spec: specs/typo.yaml:3:1: $.dagid: unknown field 'dagid'; fix the file (`backfillctl validate` lists "
    "every error)"
)


def applied(
    name: str, backfill_id: int, of: object = None, *, phase: Phase = Phase.RUNNING, **fields: object
) -> Binding:
    s = spec(name, **fields)  # type: ignore[arg-type]
    return replace(bound(name, backfill_id, phase=phase), applied=Applied(s.identity(), "c0ffee" * 6 + "abcd", False))


# --- an invalid file is Blocked alone ---------------------------------------------------------------------


def test_an_invalid_file_is_one_blocked_item_and_the_valid_spec_beside_it_is_created() -> None:
    plan = make_plan([spec()], Policy(), world(dry={"s": dates(7)}), invalid=[INVALID])
    assert decided(plan) == [("s", "create", "Pending", "", None), ("typo", "blocked", "Blocked", REASON, None)]
    assert plan.items[1].error
    assert plan.findings == (Finding(FindingKind.INVALID_SPEC, "d", f"specs/typo.yaml: {REASON}", "typo"),)


def test_an_invalid_files_backfill_is_neither_orphaned_nor_adopted_and_keeps_its_place_in_the_queue() -> None:
    mine = backfill(4, spec("typo"))
    bindings = {"typo": bound("typo", 4)}
    plan = make_plan(
        [spec("later")], Policy(), world(mine, bindings=bindings, dry={"later": dates(7)}), invalid=[INVALID]
    )
    assert decided(plan) == [
        ("later", "wait", "Queued", "queued behind typo (backfill #4)", None),
        ("typo", "blocked", "Blocked", REASON, 4),
    ]
    assert [f.kind for f in plan.findings] == [FindingKind.INVALID_SPEC]  # no orphan, no unmanaged finding
    assert plan.items[1].true_phase is Phase.RUNNING  # its backfill runs on


def test_a_file_taking_a_valid_specs_name_is_shown_by_its_path_and_takes_no_binding() -> None:
    twin = InvalidSpec("specs/copy.yaml", "s", "d", ("specs/copy.yaml:2:7: $.name: name 's' is already used",))
    twin2 = InvalidSpec("specs/copy2.yaml", "specs/copy.yaml", "", ("x",))
    items, findings = invalid_items([twin, twin2], world(bindings={"s": bound("s", 4)}), {"s"})
    assert [(i.spec, i.backfill_id, i.dag_id) for i in items] == [
        ("specs/copy.yaml", None, "d"),
        ("specs/copy2.yaml", None, ""),
    ]
    assert [f.spec for f in findings] == ["specs/copy.yaml", "specs/copy2.yaml"]


def test_an_unreadable_files_dag_comes_from_its_binding() -> None:
    nameless = InvalidSpec("specs/typo.yaml", "typo", "", ("e",))
    (item,), _ = invalid_items([nameless], world(bindings={"typo": bound("typo", 9)}), ())
    assert (item.dag_id, item.backfill_id, item.true_phase) == ("d", 9, Phase.RUNNING)


@pytest.mark.parametrize(
    ("errors", "reason"),
    [
        (("a",), "invalid spec: a; fix the file (`backfillctl validate` lists every error)"),
        (("a", "b", "c"), "invalid spec: a (and 2 more); fix the file (`backfillctl validate` lists every error)"),
    ],
)
def test_an_invalid_specs_reason_counts_the_other_errors(errors: tuple[str, ...], reason: str) -> None:
    assert InvalidSpec("p", "n", "d", errors).reason() == reason


# --- an invalid policy holds every start, never a reduction ---------------------------------------------------


def test_an_invalid_policy_holds_creates_and_unpauses_and_lets_pauses_through() -> None:
    items = (
        Item("new", "d", Kind.CREATE, Phase.PENDING),
        Item("head", "d", Kind.WAIT, Phase.PENDING, "awaiting dry run", awaiting_dry_run=True),
        Item("resumed", "d", Kind.UNPAUSE, Phase.RUNNING, backfill_id=2),
        Item("paused", "d", Kind.PAUSE, Phase.PAUSED, backfill_id=3),
        Item("cancelled", "d", Kind.CANCEL, Phase.CANCELLED, backfill_id=4),
        Item("running", "d", Kind.NOOP, Phase.RUNNING, backfill_id=5),
    )
    held = hold_starts(Plan(items), ("p.yaml:2:1: bad", "p.yaml:3:1: worse"), "p.yaml")
    reason = "held: p.yaml is invalid (p.yaml:2:1: bad (and 1 more)); nothing new starts until it is fixed"
    assert [(i.spec, i.kind.value, i.phase.value, i.reason, i.error) for i in held.items] == [
        ("new", "blocked", "Blocked", reason, True),
        ("head", "blocked", "Blocked", reason, True),
        ("resumed", "blocked", "Paused", reason, True),
        ("paused", "pause", "Paused", "", False),
        ("cancelled", "cancel", "Cancelled", "", False),
        ("running", "noop", "Running", "", False),
    ]
    assert [(i.held is items[n]) for n, i in enumerate(held.items)] == [True, True, True, False, False, False]
    assert held.findings == (
        Finding(
            FindingKind.INVALID_POLICY,
            "",
            "p.yaml:2:1: bad (and 1 more): every create and resume is held until the policy is fixed; pauses, "
            "cancels and stops apply",
            cause="p.yaml:2:1: bad (and 1 more)",
        ),
    )
    assert hold_starts(Plan(items), (), "p.yaml") == Plan(items)


# --- what was approved is what runs ----------------------------------------------------------------------


def test_an_edited_field_is_found_and_a_chunked_specs_concurrency_may_change() -> None:
    before = spec().identity()
    assert edited_fields(before, False, spec()) == ()
    widened = spec(to_date=JAN1 + timedelta(days=9))
    assert edited_fields(before, False, widened) == (
        FieldChange("to_date", "2025-01-07T00:00:00Z", "2025-01-10T00:00:00Z"),
    )
    faster = spec(max_active_runs=5, execution=Execution(chunk_runs=3))
    assert edited_fields(before, True, faster) == ()  # applies from the next chunk
    assert edited_fields(before, False, faster) == (FieldChange("max_active_runs", 2, 5),)
    assert edited_fields(before, True, spec(max_active_runs=5)) == (FieldChange("max_active_runs", 2, 5),)
    conf = spec(dag_run_conf=MappingProxyType({"x": 1}))
    assert edited_fields(before, False, conf) == (FieldChange("dag_run_conf", None, '{"x":1}'),)
    assert FieldChange("to_date", "a", "b").text() == "to_date 'a' → 'b'"
    assert FieldChange("run_on_latest_version", None, True).text() == "run_on_latest_version unset → True"


def test_the_mutable_fields_a_change_touches() -> None:
    assert mutable_changes(spec(), spec()) == frozenset()
    assert mutable_changes(spec(), spec(state=DesiredState.PAUSED, promote=True)) == {"state", "promote"}
    assert mutable_changes(spec(), spec(max_active_runs=3)) == {"max_active_runs"}


def test_an_edited_spec_is_planned_as_applied_and_shown_blocked_whatever_it_would_do() -> None:
    now = spec(to_date=JAN1 + timedelta(days=9), reprocess_behavior=ReprocessBehavior.FAILED)
    bindings = {"s": applied("s", 4)}
    viewed, edits = applied_view([now], bindings, {"specs/s.yaml": "beef" * 10})
    assert (viewed[0].to_date, viewed[0].reprocess_behavior) == (JAN1 + timedelta(days=6), ReprocessBehavior.NONE)
    assert (viewed[0].digest, viewed[0].path) == (now.digest, now.path)  # the file is still this one
    edit = edits["s"]
    assert edit.text() == (
        "edited in place by commit beefbeefbeef: to_date '2025-01-07T00:00:00Z' → '2025-01-10T00:00:00Z'; "
        "reprocess_behavior 'none' → 'failed' (applied at c0ffeec0ffee); nothing more is created for it and the "
        "change record keeps what ran: revert the edit, and make a new spec for other dates or settings"
    )
    plan = make_plan(viewed, Policy(), world(backfill(4), bindings=bindings, runs={4: RunSummary({"running": 1})}))
    held = hold_edited(plan, edits)
    assert decided(held) == [("s", "blocked", "Blocked", edit.text(), 4)]
    (item,) = held.items
    assert (item.error, item.edited, item.true_phase, item.request) == (True, edit.text(), Phase.RUNNING, None)
    assert held.findings == (Finding(FindingKind.EDITED_IN_PLACE, "d", f"s: {edit.text()}", "s", 4),)


def test_an_unedited_spec_and_one_never_applied_are_left_as_they_are() -> None:
    s, fresh = spec(), spec("fresh")
    viewed, edits = applied_view([s, fresh], {"s": applied("s", 4)}, {})
    assert (viewed, edits) == ([s, fresh], {})
    plan = make_plan([s], Policy(), world(backfill(4), bindings={"s": bound("s", 4)}))
    assert hold_edited(plan, {}) is plan


def test_an_edited_specs_pause_goes_through_and_a_working_tree_edit_says_so() -> None:
    edit = Edit("s", (FieldChange("to_date", "a", "b"),), None, None)
    assert edit.text().startswith("edited in place by the working tree: to_date 'a' → 'b'; nothing more")
    pause = Item("s", "d", Kind.PAUSE, Phase.PAUSED, backfill_id=4)
    create = Item("s2", "d", Kind.CREATE, Phase.PENDING, awaiting_dry_run=False)
    held = hold_edited(Plan((pause, create)), {"s": edit, "s2": replace(edit, spec="s2")})
    assert [(i.kind.value, i.phase.value, i.edited) for i in held.items] == [
        ("pause", "Paused", edit.text()),
        ("blocked", "Blocked", edit.text()),
    ]
    assert held.items[1].true_phase is Phase.BLOCKED  # a held create has no backfill: nothing else to show


def test_plan_desired_blocks_the_edit_and_holds_under_an_invalid_policy() -> None:
    now = spec(to_date=JAN1 + timedelta(days=9))
    bindings = {"s": applied("s", 4)}
    viewed, edits = applied_view([now], bindings, {})
    desired = Desired((*viewed, spec("new", dag="d2")), Policy(), (INVALID,), edits, ("p: bad",), "p")
    observed = world(backfill(4), bindings=bindings)
    plan = plan_desired(desired, replace(observed, dry_runs={"new": dates(3)}))
    assert [(i.spec, i.kind.value, i.phase.value, i.reason[:24]) for i in plan.items] == [
        ("s", "blocked", "Blocked", "edited in place by the w"),
        ("new", "blocked", "Blocked", "observation incomplete: "),  # d2 is not observed in this world
        ("typo", "blocked", "Blocked", "invalid spec: specs/typo"),
    ]
    d2 = world(dag="d2").observations
    held = plan_desired(desired, replace(observed, observations={**observed.observations, **d2}))
    assert [(i.spec, i.kind.value, i.reason) for i in held.items if i.spec == "new"] == [
        ("new", "blocked", "held: p is invalid (p: bad); nothing new starts until it is fixed")
    ]


def test_a_bound_invalid_file_shows_what_the_store_recorded_of_its_backfill() -> None:
    runs = RunSummary({"success": 2, "queued": 5})
    binding = replace(bound("typo", 4), runs=runs, reason="in sync")
    (item,), (finding,) = invalid_items([INVALID], world(bindings={"typo": binding}), ())
    assert (item.spec, item.dag_id, item.backfill_id, item.runs) == ("typo", "d", 4, runs)
    assert item.held is not None
    held = item.held
    assert (held.spec, held.dag_id, held.kind, held.phase, held.reason, held.backfill_id, held.runs) == (
        "typo",
        "d",
        Kind.NOOP,
        Phase.RUNNING,
        "in sync",
        4,
        runs,
    )
    assert finding == Finding(FindingKind.INVALID_SPEC, "d", f"specs/typo.yaml: {REASON}", "typo", 4)
    nameless = InvalidSpec("specs/typo.yaml", "typo", "", ("e",))
    (item,), _ = invalid_items([nameless], world(bindings={"typo": binding}), ())
    assert item.held is not None
    assert (item.held.spec, item.held.dag_id) == ("typo", "d")


def test_a_held_start_sends_nothing_and_awaits_no_dry_run() -> None:
    from controller.core.model.airflow import BackfillRequest  # noqa: PLC0415

    create = Item("new", "d", Kind.CREATE, Phase.PENDING, request=BackfillRequest("d", JAN1, JAN1))
    waiting = Item("head", "d", Kind.WAIT, Phase.PENDING, awaiting_dry_run=True)
    held = hold_starts(Plan((create, waiting)), ("bad",), "p")
    assert [(i.request, i.awaiting_dry_run) for i in held.items] == [(None, False), (None, False)]
    edited = hold_edited(Plan((create, waiting)), {n: Edit(n, (), None, None) for n in ("new", "head")})
    assert [(i.request, i.awaiting_dry_run) for i in edited.items] == [(None, False), (None, False)]


def test_an_edit_is_judged_with_the_chunking_recorded_at_apply() -> None:
    chunked = spec(max_active_runs=5, execution=Execution(chunk_runs=3))
    binding = replace(bound("s", 4), applied=Applied(spec().identity(), None, True))
    assert applied_view([chunked], {"s": binding}, {}) == ([chunked], {})  # chunked then: it may change
    unchunked = replace(binding, applied=Applied(spec().identity(), None, False))
    _, edits = applied_view([chunked], {"s": unchunked}, {})
    assert list(edits) == ["s"]
    assert edits["s"].spec == "s"
