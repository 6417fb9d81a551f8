"""An asset-triggered DAG: it runs when another DAG updates its asset, so Airflow cannot backfill it."""

import pendulum
from airflow.sdk import Asset, dag, task


@dag(dag_id="demo_asset", schedule=[Asset("backfillctl://demo/orders")], start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False, tags=["backfillctl-demo"])
def demo_asset():
    @task
    def work(**context):
        print("triggered by", context["triggering_asset_events"])

    work()


demo_asset()
