"""Issue 44, ownership by identity (pure): only backfills this controller's Airflow login made are adopted; another
login's blocks the queue, named as owned elsewhere."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from controller.core.model.airflow import Backfill, DagRun, RunSummary
from controller.core.model.policy import Policy
from controller.core.plan.identity import (
    NO_IDENTITY,
    Identity,
    creator_of,
    elsewhere,
    owned_elsewhere,
    shown,
)
from controller.core.plan.queue import make_plan
from controller.core.plan.values import Finding
from tests.core.plan.test_plan import JAN1, T0, backfill, dates, decided, spec, world

ME = Identity("team-a")


def run(day: int, queued: timedelta | None, by: str | None) -> DagRun:
    created = T0 + timedelta(hours=5)
    return DagRun(
        f"backfill__{day}",
        JAN1 + timedelta(days=day),
        "queued",
        None,
        None,
        queued_at=None if queued is None else created + queued,
        triggering_user_name=by,
    )


def test_the_creator_is_the_login_the_runs_queued_in_its_creation_window_name() -> None:
    made = backfill(5)  # created at T0 + 5 h
    assert creator_of(made, [run(0, timedelta(seconds=1), "team-b"), run(1, timedelta(seconds=2), "team-b")]) == (
        "team-b"
    )
    # runs queued before it or after its window (a later re-run, a clear by hand) do not say who made it
    late = [run(0, -timedelta(seconds=1), "x"), run(1, timedelta(minutes=3), "y"), run(2, None, "z")]
    assert creator_of(made, late) is None
    assert creator_of(made, [run(0, timedelta(minutes=2), "edge")]) == "edge"  # the window's last moment
    assert creator_of(made, [run(0, timedelta(seconds=1), None)]) is None  # a re-run of a scheduled run: no name
    assert creator_of(made, []) is None
    most = [run(0, timedelta(0), "b"), run(1, timedelta(seconds=1), "a"), run(2, timedelta(seconds=2), "a")]
    assert creator_of(made, most) == "a"
    assert creator_of(made, [run(0, timedelta(0), "b"), run(1, timedelta(0), "a")]) == "a"  # a tie: by name
    most_b = [run(0, timedelta(0), "b"), run(1, timedelta(seconds=1), "b"), run(2, timedelta(seconds=2), "a")]
    assert creator_of(made, most_b) == "b"  # the most runs, whatever the name
    finished = replace(made, completed_at=made.created_at + timedelta(seconds=10))
    assert creator_of(finished, [run(0, timedelta(seconds=11), "after")]) is None  # queued after it completed
    assert creator_of(finished, [run(0, timedelta(seconds=10), "at")]) == "at"


def test_the_identity_test_is_one_function_and_decides_nothing_it_cannot_know() -> None:
    theirs = replace(backfill(5), creator="team-b")
    assert elsewhere(theirs, ME) == "team-b"
    assert elsewhere(replace(theirs, creator="team-a"), ME) is None
    assert elsewhere(backfill(5), ME) is None  # creator not known: the parameters decide, as before
    assert elsewhere(theirs, NO_IDENTITY) is None  # our login not known
    assert elsewhere(theirs, Identity("team-a", by_runs=False)) is None  # 3.4: display names are never compared


def test_a_login_is_shown_as_one_plain_line_and_cut() -> None:
    assert shown("team-b") == "team-b"
    assert shown("evil\n\x1b[31mname") == "evil [31mname"  # control characters go: no escape sequence is left
    assert shown("x" * 150) == "x" * 100 + "..."
    assert shown("x" * 100) == "x" * 100
    assert shown("x" * 101) == "x" * 100 + "..."
    assert owned_elsewhere(backfill(7), "team-b") == "backfill #7 owned elsewhere (created by team-b)"


def theirs(b: Backfill, login: str = "team-b") -> Backfill:
    return replace(b, creator=login)


def test_another_logins_identical_backfill_is_never_adopted_and_is_reported() -> None:
    s = spec()
    other = theirs(backfill(5, s, active=False))
    w = replace(world(other, dry={"s": dates(7)}, runs={5: RunSummary({"success": 7})}), identity=ME)
    plan = make_plan([s], Policy(), w)
    assert decided(plan) == [("s", "create", "Pending", "", None)]
    assert plan.findings == (
        Finding(
            "unmanaged",
            "d",
            "backfill #5 owned elsewhere (created by team-b) has the parameters of spec s: not adopted, it is another "
            "controller's (this controller adopts only the backfills its own Airflow login made)",
            "s",
            5,
        ),
    )
    mine = make_plan(
        [s],
        Policy(),
        replace(w, observations={"d": replace(w.observations["d"], backfills=(replace(other, creator="team-a"),))}),
    )
    assert decided(mine)[0][1] == "adopt"
    unknown = make_plan([s], Policy(), replace(w, identity=NO_IDENTITY))
    assert decided(unknown)[0][1] == "adopt"  # without our login, the parameters decide as before


def test_another_logins_running_backfill_blocks_the_queue_with_its_creator_named() -> None:
    s = spec()
    other = theirs(backfill(9, spec(from_date=T0, to_date=T0)), "team\tb")
    plan = make_plan([s], Policy(), replace(world(other, dry={"s": dates(7)}), identity=ME))
    assert decided(plan) == [
        ("s", "wait", "Queued", "queued behind a backfill owned elsewhere (created by team b) (backfill #9)", None)
    ]
    assert plan.findings == (
        Finding(
            "unmanaged",
            "d",
            "backfill #9 owned elsewhere (created by team b) blocks this DAG's queue; backfillctl never touches it",
            None,
            9,
        ),
    )


def test_an_identical_running_backfill_of_another_login_blocks_and_is_not_adopted() -> None:
    s = spec()
    plan = make_plan([s], Policy(), replace(world(theirs(backfill(5, s)), dry={"s": dates(7)}), identity=ME))
    assert decided(plan) == [
        ("s", "wait", "Queued", "queued behind a backfill owned elsewhere (created by team-b) (backfill #5)", None)
    ]
    assert [f.message.split(" has ")[0].split(" blocks ")[0] for f in plan.findings] == [
        "backfill #5 owned elsewhere (created by team-b)",
        "backfill #5 owned elsewhere (created by team-b)",
    ]


def test_a_bound_backfill_is_ours_by_the_store_whoever_made_it() -> None:
    from tests.core.plan.test_plan import bound  # noqa: PLC0415

    s = spec()
    w = replace(world(theirs(backfill(5, s)), bindings={"s": bound("s", 5)}), identity=ME)
    plan = make_plan([s], Policy(), w)
    assert [(i.spec, i.backfill_id) for i in plan.items] == [("s", 5)]
    assert plan.findings == ()
