"""The load a create sets off (issue 27 §3): the exact plan, Markdown and PR-comment lines, the JSON keys, the
policy rule's findings, what server text is escaped to, and the calls it costs per pass (a fake Airflow)."""

from __future__ import annotations

import json
from dataclasses import replace

from controller.adapters.airflow import AirflowClient
from controller.commands.observe import Observer
from controller.core.model.binding import Phase
from controller.core.model.load import AssetTrigger, DagLoad, PoolUse, load_lines, pools_of
from controller.core.model.policy import Policy, Rule
from controller.core.model.secret import Secret
from controller.core.plan.load import with_load
from controller.core.plan.values import Item, Kind, Plan
from controller.core.render.plan import plan_json, plan_markdown, plan_text
from controller.core.render.pr_comment import pr_comment
from tests.core.test_plan import spec
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


def test_asset_consumers_rule_finds_the_unnamed_dags_only() -> None:
    plan = with_load(Plan((create(),)), {"d": LOAD}, REQUIRE)
    (finding,) = plan.findings
    assert finding.message == (
        "each run of d triggers finance_rollup, orders_report through the assets it emits (s3://lake/orders → "
        "finance_rollup, orders_report), and the spec's downstream does not name them (policy rule 1: "
        "asset_consumers: require_downstream); validate refuses spec s until its downstream names them"
    )
    named = with_load(Plan((create(downstream=("orders_report", "finance_rollup")),)), {"d": LOAD}, REQUIRE)
    assert named.findings == ()
    assert with_load(Plan((create(),)), {"d": LOAD}, Policy()).findings == ()
    waiting = Plan((replace(create(), kind=Kind.WAIT),))
    assert with_load(waiting, {"d": LOAD}, REQUIRE) == waiting  # only a counted create carries a load


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
