"""A verification DAG (schedule=None) that backfillctl triggers after a rehearsal, a canary chunk or the last
backfill of a spec whose `verify.dag_id` names it (issue 28).

backfillctl triggers it with a derived dag_run_id and this conf: the spec's own `verify.conf` keys, and under
"backfillctl" what the run verifies: {spec, environment, stage, from_date, to_date, backfill_ids, ticket}.
The final task `result` returns {"passed": bool, "metrics": {...}} (its XCom return_value); name it in the
spec's `verify.result_task` to let it decide and to put its metrics in the change record.

Drivable by conf, for tests and the demo:
- `expect: "fail"` → the checks run, the run succeeds, and `result` says passed: false;
- `fail_task: "<task id>"` (`check_rows` or `result`) → that task raises, so the run fails;
- `expect` is a param (pass | fail): any other value is refused by Airflow when the run is triggered.

`result` keeps the default trigger rule (all_success) on purpose: a final task with trigger_rule=all_done runs
after a failed check too, so the run ends `success` and a failed check hides behind a passing run.
"""

import pendulum
from airflow.sdk import Param, dag, task

TASKS = ("check_rows", "result")


def _fail_if_asked(conf, task_id):
    if conf.get("fail_task") == task_id:
        raise RuntimeError(f"{task_id}: failing on purpose (conf fail_task={task_id!r})")


@dag(
    dag_id="demo_orders_verify",
    schedule=None,
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    tags=["backfillctl-demo"],
    params={"expect": Param("pass", type="string", enum=["pass", "fail"])},
)
def demo_orders_verify():
    @task(retries=0)
    def check_rows(**context):
        conf = context["dag_run"].conf or {}
        _fail_if_asked(conf, "check_rows")
        run = conf.get("backfillctl") or {}
        print("verifying", run.get("spec"), "in", run.get("environment"), "stage", run.get("stage"),
              "backfills", run.get("backfill_ids"), "ticket", run.get("ticket"), "table", conf.get("table"))
        days = 0
        if run.get("from_date") and run.get("to_date"):
            start, end = pendulum.parse(run["from_date"]), pendulum.parse(run["to_date"])
            days = (end.date() - start.date()).days + 1
        return {"days": days, "rows": days * 100}

    @task(retries=0)
    def result(checked, **context):
        conf = context["dag_run"].conf or {}
        _fail_if_asked(conf, "result")
        passed = conf.get("expect", "pass") != "fail"
        print("passed" if passed else "failed", checked)
        return {"passed": passed, "metrics": checked}

    result(check_rows())


demo_orders_verify()
