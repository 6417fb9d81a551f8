"""Which finished specs a pass counts instead of building (`core.plan.rest`): those owed nothing, with no stop held."""

from __future__ import annotations

from datetime import UTC, datetime

from controller.core.model.binding import BindingHead, Phase
from controller.core.model.policy import Policy
from controller.core.plan.rest import Finished, at_rest
from controller.core.plan.values import AtRest
from controller.core.plan.world import Context, DagObservation, World


def bound(name: str, dag: str, phase: Phase = Phase.SUCCEEDED) -> BindingHead:
    return BindingHead(name, dag, phase, "digest", applied=True)


def test_every_finished_spec_of_a_quiet_dag_rests_counted_by_phase_most_first() -> None:
    bindings = {
        "a": bound("a", "d1"),
        "b": bound("b", "d1", Phase.COMPLETED_WITH_FAILURES),
        "c": bound("c", "d2"),
        "x": bound("x", "d3", Phase.CANCELLED),
    }
    finished = [Finished(n, b.dag_id) for n, b in bindings.items()]
    rest = at_rest(finished, bindings, read_dags=(), stopped=False)
    assert rest.names == frozenset({"a", "b", "c", "x"})
    assert rest.phases == ((Phase.SUCCEEDED, 2), (Phase.CANCELLED, 1), (Phase.COMPLETED_WITH_FAILURES, 1))
    assert rest.count == 4


def test_the_finished_specs_on_a_dag_with_live_work_rest_walked() -> None:
    bindings = {
        "a": bound("a", "read"),
        "b": bound("b", "live"),
        "running": bound("running", "live", Phase.RUNNING),
        "c": bound("c", "quiet"),
    }
    finished = [Finished(n, bindings[n].dag_id) for n in ("a", "b", "c")]
    rest = at_rest(finished, bindings, read_dags={"read"}, stopped=False)
    assert rest == AtRest(((Phase.SUCCEEDED, 3),), frozenset({"a", "b", "c"}), walked=frozenset({"a", "b"}))


def test_a_spec_owed_work_stays_an_item_and_its_dag_mates_rest() -> None:
    bindings = {"owed": bound("owed", "d"), "done": bound("done", "d")}
    rest = at_rest([Finished("owed", "d", owed=True), Finished("done", "d")], bindings, (), stopped=False)
    assert rest == AtRest(((Phase.SUCCEEDED, 1),), frozenset({"done"}), walked=frozenset())


def test_nothing_rests_while_a_stop_holds() -> None:
    bindings = {"a": bound("a", "d")}
    assert at_rest([Finished("a", "d")], bindings, (), stopped=True) == AtRest()


def test_a_backfill_of_a_spec_counted_at_rest_is_still_its_queues_own() -> None:
    world = World(now=datetime(2025, 1, 1, tzinfo=UTC), rested=frozenset({"done"}))
    ctx = Context(DagObservation("d", None), Policy(), world, ("live",), frozenset())
    assert [ctx.ours(who) for who in ("live", "done", "someone-else")] == ["live", "done", None]
