"""A publish DAG (schedule=None): backfillctl triggers it once, after the final verification of a spec whose
`publish.dag_id` names it passed (issue 28). It only logs what it would publish."""

import pendulum
from airflow.sdk import dag, task


@dag(dag_id="demo_orders_publish", schedule=None, start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False, tags=["backfillctl-demo"])
def demo_orders_publish():
    @task(retries=0)
    def publish(**context):
        conf = context["dag_run"].conf or {}
        run = conf.get("backfillctl") or {}
        print("publishing", run.get("spec"), run.get("from_date"), "to", run.get("to_date"),
              "from backfills", run.get("backfill_ids"), "conf", {k: v for k, v in conf.items() if k != "backfillctl"})

    publish()


demo_orders_publish()
