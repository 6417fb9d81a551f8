"""A slow daily DAG: each run's task sleeps 25 s, so a test can catch a run while it is running."""

import time

import pendulum
from airflow.sdk import dag, task


@dag(dag_id="demo_slow", schedule="@daily", start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False, tags=["backfillctl-demo"])
def demo_slow():
    @task
    def work(**context):
        print("logical_date", context["logical_date"], "sleeping 25 s")
        time.sleep(25)

    work()


demo_slow()
