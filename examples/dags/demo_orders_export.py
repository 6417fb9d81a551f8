"""A daily DAG that produces an asset: each of its runs, a backfilled one too, emits an asset event on
s3://backfillctl-demo/orders, so the DAGs scheduled on it (demo_orders_report, demo_finance_rollup) run once per
run (apache/airflow#52665). The plan of a backfill on it names them, its pool and its metadata rows."""

import pendulum
from airflow.sdk import Asset, dag, task

ORDERS = Asset("s3://backfillctl-demo/orders")


@dag(dag_id="demo_orders_export", schedule="@daily", start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False, tags=["backfillctl-demo"])
def demo_orders_export():
    @task
    def extract(**context):
        print("logical_date", context["logical_date"])

    @task(outlets=[ORDERS], pool="default_pool")
    def export(**context):
        print("exported orders of", context["logical_date"])

    extract() >> export()


demo_orders_export()
