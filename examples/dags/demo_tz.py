"""A daily DAG at midnight America/New_York (05:00 UTC)."""

import pendulum
from airflow.sdk import dag, task


@dag(dag_id="demo_tz", schedule="0 0 * * *", start_date=pendulum.datetime(2025, 1, 1, tz="America/New_York"), catchup=False, tags=["backfillctl-demo"])
def demo_tz():
    @task
    def work(**context):
        print("logical_date", context["logical_date"])

    work()


demo_tz()
