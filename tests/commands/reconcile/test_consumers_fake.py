"""The policy rule `asset_consumers` through validate, plan and reconcile on the fake Airflow (issue 27 §3):
`require_downstream` refuses the create (exit 5, audited as a refusal, nothing created) until the spec names
every DAG its runs trigger, by its id or by a downstream system whose `dags` list it; `warn` still creates."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller.cli import main
from tests.commands.reconcile.harness import NOT_GIT, Bench, count_calls, fake, in_process
from tests.support.logcheck import untimed

POLICY = """\
version: 1
require_reviewed_merge: false
scope: {{dags: ['*']}}
rules:
  - dags: ["demo_*"]
    asset_consumers: {mode}
downstream:
  warehouse: {{max_active_runs: 8, dags: [orders_report]}}
  finance: {{max_active_runs: 8, dags: [finance_rollup]}}
"""
UNNAMED = (
    "each run of demo_daily triggers finance_rollup through the assets it emits (s3://lake/orders → "
    "finance_rollup), and the spec's downstream does not name it (policy rule 1: asset_consumers: require_downstream)"
)
FIX = (
    "add finance to the spec's downstream (its `dags` in specs/policy.yaml list finance_rollup), so their owners "
    "approve"
)


@pytest.fixture
def consumed(bench: Bench, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Bench:
    """demo_daily's runs emit s3://lake/orders, on which orders_report and finance_rollup are scheduled."""
    fake(bench).assets = [("s3://lake/orders", ("demo_daily",), ("finance_rollup", "orders_report"))]
    in_process(bench, monkeypatch)
    monkeypatch.chdir(tmp_path)
    return bench


def test_require_downstream_refuses_the_create_until_a_system_names_each_triggered_dag(
    consumed: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = consumed
    bench.policy(POLICY.format(mode="require_downstream"))
    bench.spec("orders", downstream="[warehouse]")  # warehouse's dags name orders_report, not finance_rollup
    assert main(["validate"]) == 1
    assert capsys.readouterr().out.splitlines() == [
        f"specs/orders.yaml:12:13: $.downstream: {UNNAMED}",
        f"  hint: {FIX}",
        "1 error, 0 warnings in 2 files including the policy specs/policy.yaml.",
    ]

    before = len(fake(bench).requests)
    assert main(["reconcile", "--once"]) == 5
    out, err = capsys.readouterr()
    assert untimed(err) == f"{NOT_GIT}refused: orders: {UNNAMED}: {FIX}\n"  # the log line, then the refusal
    assert out.splitlines()[0] == (
        "! refused   orders  demo_daily  2025-01-01 → 2025-01-07  reprocess none  max_active_runs 3  forward  runs 7 "
        "of 7 in range  Airflow 3.3.2: every run: the latest DAG version (run_on_latest_version: true)  approvers bob  "
        f"ticket CHG-1  — {UNNAMED}: {FIX}  [Blocked]"
    )
    calls = count_calls(fake(bench).requests[before:])
    assert (calls["POST /api/v2/backfills"], calls["GET /api/v2/assets"]) == (0, 1)  # its assets, read once
    assert fake(bench).backfills == {}
    binding = bench.store.binding("orders")
    assert binding is not None
    assert (binding.phase.value, binding.refused, binding.backfill_id) == ("Blocked", True, None)
    assert [(e.entry.action, e.entry.outcome, e.entry.message) for e in bench.events("orders")] == [
        ("observe", "Blocked", f"{UNNAMED}: {FIX}")
    ]
    assert main(["reconcile", "--once"]) == 5  # refused again, nothing new to record
    capsys.readouterr()
    assert len(bench.events("orders")) == 1

    bench.spec("orders", downstream="[warehouse, finance]")  # both consumers named through their systems
    assert main(["validate"]) == 0
    capsys.readouterr()
    assert main(["reconcile", "--once"]) == 0
    capsys.readouterr()
    assert [b["dag_id"] for b in fake(bench).backfills.values()] == ["demo_daily"]


def test_warn_still_creates_and_reconcile_reads_no_assets(consumed: Bench, capsys: pytest.CaptureFixture[str]) -> None:
    bench = consumed
    bench.policy(POLICY.format(mode="warn"))
    bench.spec("orders", downstream="[warehouse]")
    assert main(["validate"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == (
        f"specs/orders.yaml:12:13: $.downstream: warning: {UNNAMED.replace('require_downstream', 'warn')}"
    )
    assert main(["plan"]) == 0
    assert f"! asset-consumers: {UNNAMED.replace('require_downstream', 'warn')}" in capsys.readouterr().out
    before = len(fake(bench).requests)
    assert main(["reconcile", "--once"]) == 0
    capsys.readouterr()
    assert count_calls(fake(bench).requests[before:])["GET /api/v2/assets"] == 0
    assert len(fake(bench).backfills) == 1


def test_plan_refuses_what_reconcile_refuses_with_the_checksum_reconcile_accepts(
    consumed: Bench, capsys: pytest.CaptureFixture[str]
) -> None:
    """`plan` applies the consumers rule on the loads it reads (`observe.load`), reconcile as a refining step
    (`commands/reconcile/steps.py`): the same refusal, and the plan's checksum is the one a reviewed reconcile
    checks (the rule only takes starts away)."""
    bench = consumed
    bench.policy(POLICY.format(mode="require_downstream"))
    bench.spec("orders", downstream="[warehouse]")
    assert main(["plan", "--format", "json"]) == 5
    out, err = capsys.readouterr()
    assert err == f"refused: orders: {UNNAMED}: {FIX}\n"
    document = json.loads(out)
    (item,) = document["items"]
    assert (item["spec"], item["action"], item["reason"]) == ("orders", "refuse", f"{UNNAMED}: {FIX}")
    assert main(["reconcile", "--once", "--plan-checksum", document["checksum"]]) == 5
    _out, err = capsys.readouterr()
    assert untimed(err) == f"{NOT_GIT}refused: orders: {UNNAMED}: {FIX}\n"  # refused, not a stale plan
    assert fake(bench).backfills == {}
