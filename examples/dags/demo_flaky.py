"""A daily DAG that fails on odd days of the month and succeeds on even days."""

import pendulum
from airflow.sdk import dag, task


@dag(dag_id="demo_flaky", schedule="@daily", start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False, tags=["backfillctl-demo"])
def demo_flaky():
    @task(retries=0)
    def work(**context):
        day = context["logical_date"].day
        if day % 2 == 1:
            raise RuntimeError(f"odd day {day}: failing on purpose")
        print("even day", day)

    work()


demo_flaky()
