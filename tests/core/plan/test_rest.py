"""Which finished specs a pass counts instead of building (`core.plan.rest`): those owed nothing, with no stop held."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from controller.core.model.airflow import Backfill, DagInfo
from controller.core.model.binding import BindingHead, Claim, Phase
from controller.core.model.policy import Policy
from controller.core.plan.queue import make_plan
from controller.core.plan.rest import Finished, Resting, at_rest, busy, resting
from controller.core.plan.values import AtRest, Kind
from controller.core.plan.world import Context, DagObservation, World
from tests.core.plan.test_plan import JAN1, NOW, OK, backfill, dates, decided, spec


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


# --- what the walk sees of a spec at rest on its DAG: its claim ----------------------------------------------


def claimed(*backfills: Backfill, claims: dict[str, Claim], info: DagInfo = OK, dry: int = 7) -> World:
    return World(
        {"d": DagObservation("d", info, backfills)},
        {},
        {"new": dates(dry)},
        now=NOW,
        rested=frozenset(claims),
        claims=claims,
    )


def test_a_backfill_a_spec_at_rest_claims_is_never_adopted_by_a_new_spec() -> None:
    new, old = spec("new"), spec("done")  # the same request: done's backfills would match new
    listed = (backfill(4, old, active=False), backfill(5, old, active=False))
    claims = {"done": Claim("done", "d", 5, (4, 5))}
    adopting = "observation incomplete: the runs of finished backfill #5, which it would adopt, were not read"
    assert decided(make_plan([new], Policy(), claimed(*listed, claims={}))) == [  # unclaimed: new would adopt #5
        ("new", "blocked", "Blocked", adopting, None)
    ]
    plan = make_plan([new], Policy(), claimed(*listed, claims=claims))
    assert [(i.spec, i.kind, i.backfill_id) for i in plan.items] == [("new", Kind.CREATE, None)]
    assert plan.findings == ()


def test_an_active_backfill_a_spec_at_rest_claims_holds_the_queue_as_its_own() -> None:
    new, old = spec("new", from_date=JAN1 + timedelta(days=40)), spec("done")
    plan = make_plan([new], Policy(), claimed(backfill(5, old), claims={"done": Claim("done", "d", 5, (5,))}))
    assert decided(plan) == [("new", "wait", "Queued", "queued behind done (backfill #5)", None)]
    assert plan.items[0].behind == "done"
    assert plan.findings == ()


def test_a_dag_a_drain_at_rest_left_paused_says_so() -> None:
    paused = replace(OK, is_paused=True)
    claims = {"old": Claim("old", "d", 3, (3,)), "drainer": Claim("drainer", "d", 4, (4,), drained=True)}
    plan = make_plan([spec("new")], Policy(), claimed(claims=claims, info=paused))
    why = (
        "DAG d is paused by drain (spec drainer set drain_dag; not a stop): backfillctl never unpauses a DAG; "
        "specs queued on it wait until a person unpauses it"
    )
    assert decided(plan) == [("new", "blocked", "Blocked", why, None)]
    undrained = {"old": Claim("old", "d", 3, (3,))}
    assert decided(make_plan([spec("new")], Policy(), claimed(claims=undrained, info=paused)))[0][3] != why


def test_a_kept_resting_value_walks_only_the_busy_dags_it_lists() -> None:
    bindings = {
        n: BindingHead(n, d, Phase.SUCCEEDED, f"sha256:{n}", True) for n, d in [("a", "x"), ("b", "y"), ("c", "x")]
    }
    bindings["d"] = BindingHead("d", "y", Phase.CANCELLED, "sha256:d", True)
    kept = resting(
        [Finished("c", "x"), Finished("a", "x"), Finished("b", "y"), Finished("d", "y", owed=True)], bindings
    )
    assert kept == Resting(((Phase.SUCCEEDED, 3),), {"x": ("a", "c"), "y": ("b",)})
    assert kept.at_rest({"x", "elsewhere"}) == AtRest(((Phase.SUCCEEDED, 3),), frozenset("abc"), frozenset("ac"))
    assert kept.at_rest(()) == AtRest(((Phase.SUCCEEDED, 3),), frozenset("abc"), frozenset())
    live = {"e": BindingHead("e", "z", Phase.RUNNING, "sha256:e", True), **bindings}
    assert busy({"w"}, live) == frozenset({"w", "z"})
