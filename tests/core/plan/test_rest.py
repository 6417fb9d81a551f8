"""Which finished specs a pass counts instead of building (`core.plan.rest`): those on DAGs at rest, owed nothing."""

from __future__ import annotations

from datetime import UTC, datetime

from controller.core.model.binding import Binding, CreateFacts, NotesMark, Phase
from controller.core.model.ranges import DateRange
from controller.core.model.run_notes import AirflowNotes
from controller.core.model.spec import DesiredState
from controller.core.plan.rest import Finished, at_rest
from controller.core.plan.values import AtRest

JAN1, JAN2 = datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 1, 2, tzinfo=UTC)


def bound(name: str, dag: str, phase: Phase = Phase.SUCCEEDED, **more: object) -> Binding:
    return Binding(name, dag, 7, phase, DesiredState.ACTIVE, "digest", **more)  # type: ignore[arg-type]


def test_every_finished_spec_of_a_quiet_dag_rests_counted_by_phase_most_first() -> None:
    bindings = {
        "a": bound("a", "d1"),
        "b": bound("b", "d1", Phase.COMPLETED_WITH_FAILURES),
        "c": bound("c", "d2"),
        "x": bound("x", "d3", Phase.CANCELLED),
    }
    finished = [Finished(n, b.dag_id, publishes=False) for n, b in bindings.items()]
    rest = at_rest(finished, bindings, read_dags=(), notes=None, stopped=False)
    assert rest.names == frozenset({"a", "b", "c", "x"})
    assert rest.phases == ((Phase.SUCCEEDED, 2), (Phase.CANCELLED, 1), (Phase.COMPLETED_WITH_FAILURES, 1))
    assert rest.count == 4


def test_a_dag_a_spec_was_read_on_or_a_live_binding_names_does_not_rest() -> None:
    bindings = {
        "a": bound("a", "read"),
        "b": bound("b", "live"),
        "running": bound("running", "live", Phase.RUNNING),
        "c": bound("c", "quiet"),
    }
    finished = [Finished(n, bindings[n].dag_id, publishes=False) for n in ("a", "b", "c")]
    rest = at_rest(finished, bindings, read_dags={"read"}, notes=None, stopped=False)
    assert rest == AtRest(((Phase.SUCCEEDED, 1),), frozenset({"c"}))


def test_a_spec_owed_a_publish_run_or_run_notes_stays_an_item() -> None:
    made = CreateFacts(dates=(DateRange(JAN1, JAN2, 2),))
    bindings = {
        "publishes": bound("publishes", "d"),
        "unnoted": bound("unnoted", "noted_dag", created=made, noted=NotesMark(7, JAN1)),
        "noted": bound("noted", "noted_dag", created=made, noted=NotesMark(7, JAN2)),
        "elsewhere": bound("elsewhere", "other", created=made),
    }
    finished = [Finished(n, b.dag_id, publishes=n == "publishes") for n, b in bindings.items()]
    notes = AirflowNotes(("noted_*",))
    rest = at_rest(finished, bindings, read_dags=(), notes=notes, stopped=False)
    assert rest.names == frozenset({"noted", "elsewhere"})


def test_nothing_rests_while_a_stop_holds() -> None:
    bindings = {"a": bound("a", "d")}
    assert at_rest([Finished("a", "d", publishes=False)], bindings, (), None, stopped=True) == AtRest()
