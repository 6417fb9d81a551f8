"""A `select` spec at the head of its DAG's queue (pure): refused on an Airflow line without run_on_latest_version,
over max_backfills or its expected runs; Blocked while its selection or its code is not known to be right; held by
a guard; Succeeded with nothing to re-run; else the first backfill over its first sub-range, counting the whole
selection (joined first where the policy's `merge_sub_ranges` lets it)."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from packaging.version import Version

from controller.core.model.airflow import DagRun, DagVersion
from controller.core.model.capabilities import capabilities_of
from controller.core.model.guards import Freeze, Guard, GuardKind
from controller.core.model.policy import Policy, Rule
from controller.core.model.spec import ReprocessBehavior, Select
from controller.core.plan.queue import make_plan
from controller.core.plan.selecting import UNKNOWN
from controller.core.plan.values import Item
from controller.core.plan.world import DryRun, World
from controller.core.rules.selection import select
from tests.core.plan.test_plan import JAN1, NOW, OK, spec, world

V1, V2 = DagVersion(1), DagVersion(2)
TARGET = Select(code_version=2)
SELECTING = spec(reprocess_behavior=ReprocessBehavior.COMPLETED, select=TARGET, max_active_runs=3)
DAYS = tuple(JAN1 + timedelta(days=i) for i in range(7))  # the spec's range: January 1-7


def _run(day: int, state: str, version: DagVersion) -> DagRun:
    return DagRun(f"r{day}", DAYS[day - 1], state, None, None, queued_at=JAN1, dag_versions=(version,))


# days 1 and 4-5 on old code, 6 failed, 7 never ran: sub-ranges 1, 4-7
HISTORY = [_run(1, "success", V1), _run(2, "success", V2), _run(3, "success", V2), _run(4, "success", V1)]
HISTORY += [_run(5, "success", V1), _run(6, "failed", V2)]
SELECTION = select(DAYS, HISTORY, TARGET)
AT_HEAD = DryRun(DAYS, 7, selection=SELECTION)
ANY = Policy()


def _head(
    policy: Policy = ANY, dry: DryRun = AT_HEAD, *, version: str = "3.3.2", latest: DagVersion | None = V2
) -> Item:
    seen = world(dry={"s": dry}, info=replace(OK, latest_version=latest))
    seen = replace(seen, airflow=capabilities_of(Version(version)))
    (item,) = make_plan([SELECTING], policy, seen).items
    return item


def _view(item: Item) -> tuple[str, str, str, int | None]:
    return (item.kind.value, item.phase.value, item.reason, item.runs_to_create)


def test_the_first_backfill_covers_the_first_sub_range_and_counts_the_whole_selection() -> None:
    item = _head()
    assert _view(item) == ("create", "Pending", "chunk 1: 1 run(s)", 5)
    assert item.selection == SELECTION
    assert (item.chunk, item.first_date, item.last_date) == ((1, 2), JAN1, DAYS[-1])
    assert item.request is not None
    assert (item.request.from_date, item.request.to_date, item.request.run_on_latest_version) == (JAN1, JAN1, True)
    assert item.progress is not None
    assert item.progress.sub_ranges == ((DAYS[0], DAYS[0]), (DAYS[3], DAYS[6]))
    assert item.progress.total == 5


def test_an_airflow_line_without_run_on_latest_version_refuses_it() -> None:
    item = _head(version="3.1.5")
    assert _view(item) == (
        "refuse",
        "Blocked",
        "select needs Airflow 3.1.6 or newer (run_on_latest_version); Airflow 3.1.5 re-runs each run on the DAG "
        "version it first ran with, so no selected interval would move to the target (remove select, or upgrade "
        "Airflow)",
        7,
    )


def test_too_many_sub_ranges_or_runs_refuse_it_with_the_selection_shown() -> None:
    one = Policy(rules=(Rule(dags=("*",), max_backfills=1),))
    item = _head(one)
    assert _view(item) == (
        "refuse",
        "Blocked",
        "select makes 2 backfills (contiguous sub-ranges of the 5 selected intervals); the policy allows at most 1 "
        "(max_backfills): narrow the range, or raise max_backfills in a reviewed policy change",
        5,
    )
    assert item.selection == SELECTION
    few = Policy(rules=(Rule(dags=("*",), max_runs=4),))
    assert _view(_head(few))[2:] == ("the dry run counts 5 runs; the policy allows at most 4 for *", 5)


def test_merge_sub_ranges_joins_them_instead_of_refusing() -> None:
    joined = Policy(rules=(Rule(dags=("*",), max_backfills=1, merge_sub_ranges=True),))
    item = _head(joined)
    assert _view(item) == ("create", "Pending", "chunk 1: 7 run(s)", 7)
    assert item.selection is not None
    assert (item.selection.merged, item.selection.sub_ranges) == (2, ((DAYS[0], DAYS[6]),))


def test_an_unknown_selection_or_code_blocks_and_an_empty_one_succeeds() -> None:
    unknown = _head(dry=DryRun(DAYS, 7))
    assert _view(unknown) == ("blocked", "Blocked", UNKNOWN, 7)
    moved = _head(latest=DagVersion(3))
    assert moved.kind.value == "blocked"
    assert moved.reason.startswith("the DAG's latest code is DAG version 3, not the reviewed target (version 2)")
    assert moved.runs_to_create == 5
    done = select(DAYS, [_run(d, "success", V2) for d in range(1, 8)], TARGET)
    empty = _head(dry=DryRun(DAYS, 7, selection=done))
    assert _view(empty) == (
        "noop",
        "Succeeded",
        "nothing to re-run: re-runs 0 of 7 intervals: nothing to re-run; 7 already on version 2",
        0,
    )


def test_a_freeze_holds_it_queued() -> None:
    frozen = Policy(freezes=(Freeze(NOW - timedelta(hours=1), NOW + timedelta(hours=1), "close"),))
    item = _head(frozen)
    assert (item.kind.value, item.phase.value, item.guard, item.runs_to_create) == (
        "wait",
        "Queued",
        Guard(GuardKind.FREEZE, "close"),
        5,
    )
    assert item.selection == SELECTION


def test_without_the_release_read_the_line_is_not_judged() -> None:
    seen: World = world(dry={"s": AT_HEAD}, info=replace(OK, latest_version=V2))
    (item,) = make_plan([SELECTING], Policy(), seen).items
    assert (item.kind.value, item.reason) == ("create", "chunk 1: 1 run(s)")  # a release not read: no refusal
