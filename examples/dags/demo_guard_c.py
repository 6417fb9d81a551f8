"""A daily DAG for the load-guard tests (issue 14): each run's task sleeps 3 s, so backfills overlap visibly."""

import time

import pendulum
from airflow.sdk import dag, task


@dag(dag_id="demo_guard_c", schedule="@daily", start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False, tags=["backfillctl-demo"])
def demo_guard_c():
    @task
    def work(**context):
        print("logical_date", context["logical_date"], "sleeping 3 s")
        time.sleep(3)

    work()


demo_guard_c()
