"""A daily DAG whose re-runs keep the DAG version each run first ran with (`rerun_with_latest_version=False`,
Airflow 3.3.0+): a backfill whose spec does not say re-runs history on that older code (issue 23)."""

import pendulum
from airflow.sdk import dag, task


@dag(dag_id="demo_pinned_code", schedule="@daily", start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False, rerun_with_latest_version=False, tags=["backfillctl-demo"])
def demo_pinned_code():
    @task
    def work(**context):
        print("logical_date", context["logical_date"])

    work()


demo_pinned_code()
