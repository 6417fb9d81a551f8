"""An asset-scheduled DAG: it runs each time s3://backfillctl-demo/orders is updated (by demo_orders_export),
backfilled runs included."""

import pendulum
from airflow.sdk import Asset, dag, task


@dag(dag_id="demo_finance_rollup", schedule=[Asset("s3://backfillctl-demo/orders")], start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False, tags=["backfillctl-demo"])
def demo_finance_rollup():
    @task
    def work(**context):
        print("triggered by", context["triggering_asset_events"])

    work()


demo_finance_rollup()
