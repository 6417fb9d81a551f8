"""An hourly DAG."""

import pendulum
from airflow.sdk import dag, task


@dag(dag_id="demo_hourly", schedule="@hourly", start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False, tags=["backfillctl-demo"])
def demo_hourly():
    @task
    def work(**context):
        print("logical_date", context["logical_date"])

    work()


demo_hourly()
