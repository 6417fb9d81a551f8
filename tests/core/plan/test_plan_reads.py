"""What a pass reads of a DAG's backfills, and who owns each (pure): bound-only reads, the backfills whose runs
the plan needs, and the spec behind each backfill id."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from controller.core.model.airflow import RunSummary
from controller.core.model.binding import Binding, Claim, Phase
from controller.core.model.chunks import Chunk, Progress, Slice
from controller.core.model.spec import DesiredState
from controller.core.plan.reads import bound_only, has_backfill, owners_of, runs_wanted, settled_chunks
from tests.core.plan.test_plan import JAN1, backfill, spec

DONE = RunSummary({"success": 3})


def bound(
    name: str, backfill_id: int | None, *, dag: str = "d", phase: Phase = Phase.RUNNING, **extra: object
) -> Binding:
    return Binding(name, dag, backfill_id, phase, DesiredState.ACTIVE, **extra)  # type: ignore[arg-type]


def chunk(backfill_id: int, *, settled: bool = False) -> Chunk:
    first = JAN1 + timedelta(days=backfill_id)
    return Chunk(backfill_id, first, first, 1, 1, summary=DONE if settled else None)


# --- has_backfill ---------------------------------------------------------------------------------------


def test_a_binding_has_a_backfill_by_its_id_or_by_a_chunk() -> None:
    assert [
        has_backfill(None),
        has_backfill(bound("s", None)),
        has_backfill(bound("s", 7)),
        has_backfill(bound("s", None, progress=Progress(10))),
        has_backfill(bound("s", None, progress=Progress(10, (chunk(3),)))),
    ] == [False, False, True, False, True]


# --- bound_only -----------------------------------------------------------------------------------------


def test_only_the_live_bound_backfills_are_read_when_every_spec_of_the_dag_is_bound() -> None:
    bindings = {
        "a": bound("a", 7),
        "b": bound("b", 8, phase=Phase.SUCCEEDED),  # finished: not read again
        "c": bound("c", 9, dag="other"),  # another DAG's
        "e": bound("e", 0),  # id 0 is no backfill Airflow makes
    }
    specs = [spec("a"), spec("b"), spec("c", dag="other"), spec("e")]
    assert bound_only("d", specs, bindings) == frozenset({7})


def test_a_spec_without_a_backfill_reads_the_whole_history() -> None:
    assert bound_only("d", [spec("a"), spec("b")], {"a": bound("a", 7)}) is None  # b is not bound
    assert bound_only("d", [spec("a")], {"a": bound("a", None)}) is None  # a was recorded before its create
    assert bound_only("other", [spec("a")], {}) == frozenset()  # only the DAG's specs count


# --- settled_chunks -------------------------------------------------------------------------------------


def test_settled_chunks_are_those_whose_final_runs_the_store_keeps() -> None:
    bindings = {
        "a": bound("a", 4, progress=Progress(10, (chunk(3, settled=True), chunk(4)))),
        "b": bound("b", 6, dag="other", progress=Progress(10, (chunk(5, settled=True),))),
        "c": bound("c", 7),
    }
    assert (settled_chunks("d", bindings), settled_chunks("other", bindings), settled_chunks("x", bindings)) == (
        {3},
        {5},
        set(),
    )


# --- runs_wanted ----------------------------------------------------------------------------------------


def test_the_runs_read_are_of_active_bound_adoptable_and_pending_backfills() -> None:
    a, b = spec("a"), spec("b", from_date=JAN1 + timedelta(days=30), to_date=JAN1 + timedelta(days=31))
    c = spec("c", from_date=JAN1 + timedelta(days=60), to_date=JAN1 + timedelta(days=70), max_active_runs=1)
    pending = Slice(JAN1 + timedelta(days=60), JAN1 + timedelta(days=61), 2, 1)
    listed = [
        backfill(1, active=True),  # active: always read
        backfill(2, a, active=False),  # a's own backfill
        backfill(3, b, active=False),  # b is not bound: it may adopt it
        replace(backfill(4, c, active=False), to_date=pending.last),  # the chunk c asked for, unanswered
        replace(backfill(5, c, active=False), from_date=pending.last, to_date=c.to_date),  # c has its chunks
        backfill(6, a, active=False),  # a settled chunk of a
    ]
    bindings = {
        "a": bound("a", 2, progress=Progress(10, (chunk(6, settled=True),))),
        "c": bound("c", 7, progress=Progress(10, (chunk(7),), pending=pending)),
    }
    wanted = runs_wanted("d", listed, [a, b, c], bindings)
    assert [w.id for w in wanted] == [1, 2, 3, 4]


def test_a_finished_binding_and_another_dags_spec_want_nothing() -> None:
    a = spec("a")
    listed = [backfill(2, a, active=False)]
    assert runs_wanted("d", listed, [a], {"a": bound("a", 2, phase=Phase.SUCCEEDED)}) == []
    assert runs_wanted("d", listed, [spec("a", dag="other")], {}) == []


def test_an_unbound_chunked_spec_adopts_its_chunks() -> None:
    a = spec("a", to_date=JAN1 + timedelta(days=30))
    inside = replace(backfill(2, a, active=False), from_date=JAN1 + timedelta(days=2), to_date=JAN1 + timedelta(days=3))
    outside = replace(inside, id=3, from_date=JAN1 + timedelta(days=40), to_date=JAN1 + timedelta(days=41))
    assert [w.id for w in runs_wanted("d", [inside, outside], [a], {})] == [2]


# --- owners_of ------------------------------------------------------------------------------------------


def test_every_backfill_a_spec_owned_is_its_own_and_an_unbound_spec_owns_its_match() -> None:
    a, b = spec("a"), spec("b", from_date=JAN1 + timedelta(days=30), to_date=JAN1 + timedelta(days=31))
    bindings = {
        "a": bound("a", 9, backfills=(4, 9), progress=Progress(10, (chunk(5), chunk(6)))),
        "c": bound("c", None),
    }
    listed = [backfill(1, b), backfill(2, a)]  # a is bound: its match (2) is not adopted by this rule
    assert owners_of(bindings, [a, b], listed) == {1: "b", 4: "a", 5: "a", 6: "a", 9: "a"}


def test_the_backfills_a_spec_at_rest_claims_are_its_own() -> None:
    a = spec("a")
    claims = {"done": Claim("done", "d", 8, (7, 8)), "old": Claim("old", "d", None, ())}
    assert owners_of({"a": bound("a", 9)}, [a], [backfill(8, a)], claims) == {7: "done", 8: "done", 9: "a"}
    assert owners_of({}, [a], [backfill(8, a)]) == {8: "a"}  # unclaimed: the unbound spec's match
    assert owners_of({}, [a], [backfill(8, a)], claims) == {7: "done", 8: "done"}  # claimed: never a match's


def test_a_spec_recorded_before_its_create_owns_the_backfill_its_create_made() -> None:
    a = spec("a")
    assert owners_of({"a": bound("a", None)}, [a], [backfill(3, a)]) == {3: "a"}
    assert owners_of({}, [a], []) == {}
