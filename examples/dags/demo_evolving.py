"""A daily DAG whose code a test changes: its code number is the Airflow Variable `demo_evolving_code`, read when
the file is parsed (1 when unset or unreadable). Code 1 has a bug: it fails on the 2nd of a month; code 2 fixes it.
Each code says its number in the DAG's docs, so a change of code is a new DAG version once a run used the one
before (tests/commands/reconcile/test_select_real.py: `select: {code_version: N}` re-runs only what older code made)."""

import pendulum
from airflow.sdk import Variable, dag, task

try:
    CODE = int(Variable.get("demo_evolving_code", default="1"))
except Exception:  # noqa: BLE001 - no variable to read (a bare import, a value that is no number): the first code
    CODE = 1


@dag(dag_id="demo_evolving", schedule="@daily", start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False, doc_md=f"code {CODE}", tags=["backfillctl-demo"])
def demo_evolving():
    @task(retries=0)
    def work(**context):
        day = context["logical_date"].day
        if CODE == 1 and day == 2:
            raise RuntimeError("code 1 fails on the 2nd of a month: fixed in code 2")
        print("code", CODE, "day", day)

    work()


demo_evolving()
