"""What a `drain_dag` create holds back, in the plan (text, Markdown, JSON) and the PR comment: the DAG's scheduled
and asset-triggered runs while the backfill runs (how many is not known ahead: said so), that the DAG is left paused,
and whether its `catchup` creates the missed intervals on unpause or skips them (a data gap); read from the DAG's
details (one call per drained DAG, plan only) and never in the checksum."""

from __future__ import annotations

import json
from dataclasses import replace

import httpx
import pytest
from packaging.version import Version

from controller.adapters.airflow import AirflowClient
from controller.commands.reconcile.observe import drain_hold
from controller.core.model.airflow import BackfillRequest, DagInfo, Schedule
from controller.core.model.binding import Phase
from controller.core.model.capabilities import capabilities_of
from controller.core.model.drain import DrainHold
from controller.core.model.guards import Budget
from controller.core.model.policy import Policy
from controller.core.model.secret import Secret
from controller.core.plan.drains import drained_outcomes, draining, paused_by_drain, with_drain
from controller.core.plan.values import Item, Kind, Plan
from controller.core.render.plan import plan_json, plan_markdown, plan_text
from controller.core.render.pr_comment import pr_comment
from tests.core.plan.test_plan import spec

HELD = (
    "drain: scheduled and asset-triggered runs of DAG d (schedule 0 0 * * *, At 00:00) are not created while the "
    "backfill runs (how long it runs, and so how many intervals, is not known ahead); Airflow pauses the DAG once none "
    "of its runs is left unfinished, and backfillctl never unpauses it: a person does"
)
CATCHUP = (
    "drain: DAG d has catchup: true: when a person unpauses it, the scheduler creates the intervals missed while it "
    "was drained and paused"
)
GAP = (
    "drain: DAG d has catchup: false: when a person unpauses it, the scheduler creates only the latest interval; the "
    "others missed while it was drained and paused are skipped (a data gap: backfill them with a new spec)"
)
UNKNOWN = (
    "drain: catchup of DAG d is not known (its details could not be read: boom): whether the intervals missed while "
    "it is drained and paused are created on unpause or skipped (a data gap) is not known"
)


def info(catchup: bool | None) -> DagInfo:
    schedule = Schedule(summary="0 0 * * *", description="At 00:00")
    return DagInfo("d", False, False, False, True, None, schedule=schedule, catchup=catchup)


def create(drain: bool = True) -> Item:
    source = spec(drain_dag=drain)
    request = BackfillRequest.from_spec(source)
    return Item("s", "d", Kind.CREATE, Phase.PENDING, source=source, runs_to_create=7, runs_in_range=7, request=request)


@pytest.mark.parametrize(
    ("catchup", "second", "unpause"), [(True, CATCHUP, "created"), (False, GAP, "skipped"), (None, None, None)]
)
def test_a_drain_says_what_it_holds_back_and_what_unpausing_does(
    catchup: bool | None, second: str | None, unpause: str | None
) -> None:
    hold = DrainHold.of("d", info(catchup))
    if second is None:
        second = (
            "drain: catchup of DAG d is not known: whether the intervals missed while it is drained and paused are "
            "created on unpause or skipped (a data gap) is not known"
        )
    assert hold.lines() == [HELD, second]
    assert hold.on_unpause == unpause
    assert hold.as_json() == {
        "dag_id": "d",
        "held_back": "scheduled and asset-triggered runs while the backfill runs",
        "schedule": "0 0 * * *",
        "schedule_description": "At 00:00",
        "catchup": catchup,
        "missed_on_unpause": unpause,
        "unknown": None,
    }


def test_an_unread_dag_says_why_nothing_is_known() -> None:
    hold = DrainHold.of("d", None, "its details could not be read: boom")
    assert hold.lines()[0].startswith("drain: scheduled and asset-triggered runs of DAG d are not created while")
    assert hold.lines()[1] == UNKNOWN
    assert DrainHold.of("d", None).unknown == "the DAG's details were not read"
    no_description = replace(info(True), schedule=Schedule(summary="@daily"))
    assert "of DAG d (schedule @daily) are not created" in DrainHold.of("d", no_description).lines()[0]
    assert "of DAG d are not created" in DrainHold.of("d", replace(info(True), schedule=None)).lines()[0]


def test_only_drain_creates_are_read_and_told_and_the_checksum_ignores_it() -> None:
    bare = Plan((create(), replace(create(drain=False), spec="t", dag_id="e")))
    assert draining(bare) == ["d"]
    assert draining(Plan((replace(create(), kind=Kind.WAIT, request=None),))) == []
    plan = with_drain(bare, {"d": DrainHold.of("d", info(False))})
    assert plan.checksum() == bare.checksum()
    assert [i.drain for i in plan.items] == [DrainHold.of("d", info(False)), None]
    assert plan_text(plan).splitlines()[1:3] == [f"    {HELD}", f"    {GAP}"]  # no width: one line each
    facts = json.loads(plan_json(plan))["items"]
    assert facts[0]["facts"]["drain"]["missed_on_unpause"] == "skipped"
    assert "drain" not in facts[1]["facts"]
    markdown = plan_markdown(plan)
    assert "- drain: DAG d has catchup: false: when a person unpauses it" in markdown
    assert "- drain: {" not in markdown  # the JSON fact is not listed raw
    missing = with_drain(bare, {})
    assert missing.items[0].drain == DrainHold("d", unknown="the DAG's details were not read")


def test_the_pr_comment_says_the_drain_once_at_the_top() -> None:
    plan = with_drain(Plan((create(),)), {"d": DrainHold.of("d", info(False))})
    comment = pr_comment(plan, ["specs/s.yaml"], {})
    assert (
        "**Drains: these specs stop their DAG's own runs while they run and leave it paused** (the owners of the "
        "systems it loads approve; backfillctl never unpauses it):\n\n"
        "- `s`: drain: scheduled and asset-triggered runs of DAG d \\(schedule 0 0 \\* \\* \\*, At 00:00\\) are not "
        "created while the backfill runs"
    ) in comment
    assert comment.count("catchup: false") == 1
    assert "Drains:" not in pr_comment(Plan((create(drain=False),)), ["specs/s.yaml"], {})


DETAILS = {"dag_id": "d", "is_paused": False, "timetable_summary": "0 0 * * *", "timetable_description": "At 00:00"}


@pytest.mark.parametrize(("catchup", "expected"), [(True, True), (False, False), ("yes", None), ("absent", None)])
def test_catchup_is_read_from_the_dag_details(catchup: object, expected: bool | None) -> None:
    sent: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        sent.append(f"{request.method} {request.url.path}")
        body = DETAILS | ({} if catchup == "absent" else {"catchup": catchup})
        return httpx.Response(200, json=body)

    caps = capabilities_of(Version("3.4.0b2"), "3.4.0b2")
    transport = httpx.MockTransport(handle)
    with AirflowClient("http://af", token=Secret("t"), transport=transport, capabilities=caps) as client:
        hold = drain_hold(client, "d")
    assert hold == DrainHold("d", "0 0 * * *", "At 00:00", expected)
    assert sent == ["GET /api/v2/dags/d/details"]  # one call, no tasks


def test_a_details_read_that_fails_says_so_in_the_plan() -> None:
    transport = httpx.MockTransport(lambda _r: httpx.Response(403, json={"detail": "Forbidden"}))
    caps = capabilities_of(Version("3.4.0b2"), "3.4.0b2")
    with AirflowClient("http://af", token=Secret("t"), transport=transport, capabilities=caps) as client:
        hold = drain_hold(client, "d")
    assert (hold.catchup, hold.unknown) == (
        None,
        "its details could not be read: Airflow at http://af refused the credentials (GET /api/v2/dags/d/details -> "
        "403): check BACKFILLCTL_AIRFLOW_TOKEN",
    )


OWNED = Policy(downstream=(Budget("warehouse", 8, ("olga", "pete"), dags=("d",)), Budget("api", 2, ("ann",))))
LEFT_PAUSED = (
    "DAG d is paused by drain (not a stop) once none of its runs is left unfinished: backfillctl never unpauses it, "
    "and specs queued on it wait until a person unpauses it"
)


def finished(drain: bool = True, **fields: object) -> Item:
    item = Item("s", "d", Kind.NOOP, Phase.SUCCEEDED, "7 run(s) succeeded", 4, source=spec(drain_dag=drain))
    return replace(item, **fields)  # type: ignore[arg-type]


def test_a_finished_drain_says_its_dag_is_left_paused_and_whose_decision_unpausing_is() -> None:
    (item,) = drained_outcomes(Plan((finished(),)), OWNED).items
    owners = "; unpausing it is for its downstream owners to decide: warehouse (olga, pete)"
    assert item.reason == f"7 run(s) succeeded; {LEFT_PAUSED}{owners}"
    assert paused_by_drain("d", ()) == LEFT_PAUSED
    assert paused_by_drain("d", (("a", ("x", "y")), ("b", ("z",)))) == (
        f"{LEFT_PAUSED}; unpausing it is for its downstream owners to decide: a (x, y); b (z)"
    )
    (bare,) = drained_outcomes(Plan((finished(reason=""),)), Policy()).items
    assert bare.reason == LEFT_PAUSED
    (cancelled,) = drained_outcomes(Plan((finished(phase=Phase.CANCELLED),)), Policy()).items
    assert cancelled.reason.endswith(LEFT_PAUSED)


@pytest.mark.parametrize(
    "item",
    [
        finished(drain=False),  # no drain
        finished(phase=Phase.RUNNING),  # not finished
        finished(backfill_id=None, reason="nothing to reprocess"),  # no backfill: no drain
        finished(reason=f"7 run(s) succeeded; {LEFT_PAUSED}"),  # recorded with it
        finished(source=None),  # an orphan
    ],
)
def test_only_a_finished_drain_with_a_backfill_is_told_and_only_once(item: Item) -> None:
    plan = Plan((item,))
    assert drained_outcomes(plan, OWNED) is plan
