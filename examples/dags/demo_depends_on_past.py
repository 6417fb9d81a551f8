"""A daily DAG whose task depends on its previous run: Airflow refuses run_backwards and reprocess none."""

import pendulum
from airflow.sdk import dag, task


@dag(dag_id="demo_depends_on_past", schedule="@daily", start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False, tags=["backfillctl-demo"])
def demo_depends_on_past():
    @task(depends_on_past=True)
    def work(**context):
        print("logical_date", context["logical_date"])

    work()


demo_depends_on_past()
