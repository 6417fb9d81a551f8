"""A fast daily DAG: each run takes well under a second."""

import pendulum
from airflow.sdk import dag, task


@dag(dag_id="demo_daily", schedule="@daily", start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False, tags=["backfillctl-demo"])
def demo_daily():
    @task
    def work(**context):
        print("logical_date", context["logical_date"], "conf", context["dag_run"].conf)

    work()


demo_daily()
