"""The load a create sets off (issue 27 §3): the exact plan, Markdown and PR-comment lines, the JSON keys, the
policy rule's findings, what server text is escaped to, and the calls it costs per pass (a fake Airflow)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

from controller.adapters.airflow import AirflowClient
from controller.commands.reconcile.observe import Observer
from controller.core.model.binding import Phase
from controller.core.model.chunks import Chunk, Progress, Slice
from controller.core.model.guards import Budget
from controller.core.model.load import AssetTrigger, DagLoad, PoolUse, load_lines, pools_of
from controller.core.model.policy import Policy, Rule
from controller.core.model.secret import Secret
from controller.core.plan.load import refuse_unnamed, required, with_load
from controller.core.plan.values import Item, Kind, Plan, refusals
from controller.core.render.plan import plan_json, plan_markdown, plan_text
from controller.core.render.pr_comment import pr_comment
from tests.core.plan.test_plan import spec
from tests.fakes.airflow import FakeAirflow
from tests.fakes.calls import record_calls

ORDERS = AssetTrigger("s3://lake/orders", ("finance_rollup", "orders_report"))
LOAD = DagLoad("d", 2, (ORDERS,), (PoolUse("default_pool", 1, 128), PoolUse("warehouse", 1, None)))
LINES = [
    "each run emits asset s3://lake/orders → triggers finance_rollup, orders_report (up to 7 runs each)",
    "pools: default_pool 128 slots (1 task), warehouse (not in Airflow: its 1 task will not be queued)",
    "metadata database: adds up to 7 DAG runs and 14 task instances (7 runs × 2 tasks), plus up to 14 runs of the "
    "DAGs it triggers",
]
REQUIRE = Policy(rules=(Rule(dags=("d",), asset_consumers="require_downstream"),))
WARN = Policy(rules=(Rule(dags=("d",), asset_consumers="warn"),))
T = datetime(2025, 1, 1, tzinfo=UTC)


def create(**extra: object) -> Item:
    return Item("s", "d", Kind.CREATE, Phase.PENDING, source=spec(**extra), runs_to_create=7, runs_in_range=7)


def test_lines_say_the_triggered_dags_the_pools_and_the_metadata_rows() -> None:
    assert load_lines(LOAD, 7) == LINES
    assert load_lines(DagLoad("d", 1, (), pools_of([None], {"default_pool": 128})), 1) == [
        "pools: default_pool 128 slots (1 task)",
        "metadata database: adds up to 1 DAG run and 1 task instance (1 run × 1 task)",
    ]
    assert load_lines(DagLoad("d", unknown=("assets: not known (GET /api/v2/assets -> 403)",)), 3) == [
        "assets: not known (GET /api/v2/assets -> 403)"
    ]


def test_plan_text_markdown_and_json_carry_the_load_and_the_checksum_ignores_it() -> None:
    bare = Plan((create(),))
    plan = with_load(bare, {"d": LOAD}, Policy())
    assert plan_text(plan).splitlines()[1:4] == [f"    {line}" for line in LINES]
    assert plan.checksum() == bare.checksum()
    assert (
        "- each run emits asset s3://lake/orders → triggers finance\\_rollup, orders\\_report \\(up to 7 runs each\\)"
        in (plan_markdown(plan))
    )
    facts = json.loads(plan_json(plan))["items"][0]["facts"]
    assert facts["load"]["assets"] == [
        {"uri": "s3://lake/orders", "triggers": ["finance_rollup", "orders_report"], "runs_each": 7}
    ]
    assert facts["load"]["metadata"] == {"dag_runs": 7, "task_instances": 14, "tasks": 2}
    assert "load" not in json.loads(plan_json(bare))["items"][0]["facts"]  # nothing to say: no key


def test_pr_comment_lists_the_triggered_dags() -> None:
    plan = with_load(Plan((create(),)), {"d": LOAD}, Policy())
    comment = pr_comment(plan, ["specs/s.yaml"], {})
    assert (
        "**Asset-triggered DAGs: each backfilled run emits its asset events, so these DAGs run too** (their owners "
        "should approve; name them in the spec's `downstream`):\n\n"
        "- `s`: each run emits asset s3://lake/orders → triggers finance\\_rollup, orders\\_report "
        "\\(up to 7 runs each\\)\n"
    ) in comment


def test_server_text_is_escaped_where_it_is_shown() -> None:
    hostile = DagLoad("d", 1, (AssetTrigger("s3://x/<b>|y`\n", ("a|b",)),), ())
    plan = with_load(Plan((create(),)), {"d": hostile}, Policy())
    assert "    each run emits asset s3://x/<b>|y`  → triggers a|b (up to 7 runs each)" in plan_text(plan)
    assert "s3://x/\\<b\\>\\|y\\` → triggers a\\|b" in plan_markdown(plan)
    assert "<b>" not in pr_comment(plan, ["specs/s.yaml"], {})


def test_asset_consumers_warn_finds_the_unnamed_dags_only_and_still_creates() -> None:
    plan = with_load(Plan((create(),)), {"d": LOAD}, WARN)
    (finding,) = plan.findings
    assert finding.message == (
        "each run of d triggers finance_rollup, orders_report through the assets it emits (s3://lake/orders → "
        "finance_rollup, orders_report), and the spec's downstream does not name them (policy rule 1: "
        "asset_consumers: warn)"
    )
    assert plan.items[0].kind is Kind.CREATE
    named = with_load(Plan((create(downstream=("orders_report", "finance_rollup")),)), {"d": LOAD}, WARN)
    assert named.findings == ()
    assert with_load(Plan((create(),)), {"d": LOAD}, Policy()).findings == ()
    waiting = Plan((replace(create(), kind=Kind.WAIT),))
    assert with_load(waiting, {"d": LOAD}, WARN) == waiting  # only a counted create carries a load
    assert (required(Plan((create(),)), WARN), required(Plan((create(),)), REQUIRE)) == ([], ["d"])


def test_require_downstream_refuses_the_create_naming_the_dags_and_the_fix_outside_the_checksum() -> None:
    bare = Plan((create(),))
    plan = with_load(bare, {"d": LOAD}, REQUIRE)
    (item,) = plan.items
    assert (item.kind, item.phase, item.request, item.load) == (Kind.REFUSE, Phase.BLOCKED, None, LOAD)
    assert item.reason == (
        "each run of d triggers finance_rollup, orders_report through the assets it emits (s3://lake/orders → "
        "finance_rollup, orders_report), and the spec's downstream does not name them (policy rule 1: "
        "asset_consumers: require_downstream): add finance_rollup, orders_report to the spec's downstream, so "
        "their owners approve"
    )
    assert plan.findings == ()  # the refusal says it
    assert refusals(plan) == (item,)
    assert plan.checksum() == bare.checksum()  # a consumer DAG added in Airflow does not make a reviewed plan stale
    assert plan_text(plan).splitlines()[0].startswith("! refused   s  d  ")
    named = with_load(Plan((create(downstream=("orders_report", "finance_rollup")),)), {"d": LOAD}, REQUIRE)
    assert [(i.kind, i.reason) for i in named.items] == [(Kind.CREATE, "")]


SYSTEMS = replace(
    REQUIRE,
    path="specs/policy.yaml",
    downstream=(Budget("warehouse", 8, dags=("orders_report",)), Budget("finance", 4, dags=("finance_rollup", "x"))),
)


def test_a_system_whose_dags_list_a_consumer_names_it() -> None:
    """`downstream.<system>.dags`: listing the system names its DAGs (a spec's downstream must name declared
    systems, so a DAG id of its own would not validate)."""
    both = with_load(Plan((create(downstream=("warehouse", "finance")),)), {"d": LOAD}, SYSTEMS)
    assert [(i.kind, i.reason) for i in both.items] == [(Kind.CREATE, "")]
    one = with_load(Plan((create(downstream=("warehouse",)),)), {"d": LOAD}, SYSTEMS)
    assert one.items[0].kind is Kind.REFUSE
    assert one.items[0].reason.endswith(
        "the spec's downstream does not name it (policy rule 1: asset_consumers: require_downstream): add finance to "
        "the spec's downstream (its `dags` in specs/policy.yaml list finance_rollup), so their owners approve"
    )
    assert one.items[0].reason.startswith("each run of d triggers finance_rollup through the assets it emits")
    unlisted = replace(SYSTEMS, downstream=SYSTEMS.downstream[:1])
    alone = with_load(Plan((create(downstream=("warehouse",)),)), {"d": LOAD}, unlisted)
    assert alone.items[0].reason.endswith(
        ": list finance_rollup in the `dags` of a downstream system in specs/policy.yaml and add that system, so "
        "their owners approve"
    )
    neither = with_load(Plan((create(),)), {"d": LOAD}, SYSTEMS)
    assert neither.items[0].reason.endswith(
        ": add finance, warehouse to the spec's downstream (their `dags` in specs/policy.yaml list finance_rollup, "
        "orders_report), so their owners approve"
    )


def test_require_downstream_fails_closed_when_the_assets_cannot_be_read_and_a_refused_chunk_is_not_pending() -> None:
    why = "assets: not known (GET /api/v2/assets -> 403)"
    unread = DagLoad("d", unknown=(why, "tasks and pools: not known (x)"), assets_unknown=why)
    (item,) = with_load(Plan((create(),)), {"d": unread}, REQUIRE).items
    assert (item.kind, item.reason) == (
        Kind.REFUSE,
        "the DAGs each run of d triggers cannot be read (assets: not known (GET /api/v2/assets -> 403)), and policy "
        "rule 1 (asset_consumers: require_downstream) requires the spec's downstream to name them",
    )
    first = replace(create(), progress=Progress(7, pending=Slice(T, T, 7, 3)), chunk=(1, 2))
    later = replace(first, progress=Progress(14, (Chunk(1, T, T, 7, 3),), pending=Slice(T, T, 7, 3)))
    refused = refuse_unnamed(Plan((first, replace(later, spec="s2"))), {"d": LOAD}, REQUIRE)
    assert [i.kind for i in refused.items] == [Kind.REFUSE, Kind.REFUSE]
    assert [i.progress for i in refused.items] == [None, Progress(14, (Chunk(1, T, T, 7, 3),))]  # nothing to adopt


def test_reading_the_load_costs_three_calls_per_dag_with_a_create_and_one_pools_read_per_pass() -> None:
    fake = FakeAirflow()
    fake.assets = [("s3://lake/orders", ("demo_daily",), ("orders_report",)), ("s3://other", ("x",), ("y",))]
    client = AirflowClient(
        "http://fake-airflow", username="admin", password=Secret("admin"), transport=fake.transport()
    )
    items = tuple(
        replace(create(), spec=f"s{n}", dag_id=dag, source=spec(f"s{n}", dag))
        for n, dag in enumerate(["demo_daily", "demo_tz"])
    )
    calls = record_calls(client)
    plan = Observer(client).load(Plan((*items, replace(create(), kind=Kind.WAIT))), Policy())
    paths = sorted(path for _method, path in calls if path != "/api/v2/version")
    assert paths == [
        "/api/v2/assets",
        "/api/v2/assets",
        "/api/v2/dags/demo_daily/tasks",
        "/api/v2/dags/demo_tz/tasks",
        "/api/v2/pools",
    ]
    assert plan.items[0].load == DagLoad(
        "demo_daily", 1, (AssetTrigger("s3://lake/orders", ("orders_report",)),), (PoolUse("default_pool", 1, 128),)
    )
    assert plan.items[1].load == DagLoad("demo_tz", 1, (), (PoolUse("default_pool", 1, 128),))
    none = record_calls(client)
    assert Observer(client).load(Plan((replace(create(), kind=Kind.NOOP),)), Policy()).items[0].load is None
    assert none == []
