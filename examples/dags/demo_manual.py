"""A DAG without a schedule: it cannot be backfilled."""

import pendulum
from airflow.sdk import dag, task


@dag(dag_id="demo_manual", schedule=None, start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False, tags=["backfillctl-demo"])
def demo_manual():
    @task
    def work(**context):
        print("manual run")

    work()


demo_manual()
