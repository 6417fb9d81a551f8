"""An hourly DAG with a very fast task, for chunked backfills (issue 13): two weeks are 336 runs."""

import pendulum
from airflow.sdk import dag, task


@dag(dag_id="demo_chunked", schedule="@hourly", start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False, tags=["backfillctl-demo"])
def demo_chunked():
    @task
    def work(**context):
        print("logical_date", context["logical_date"])

    work()


demo_chunked()
