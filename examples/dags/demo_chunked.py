"""An hourly DAG for chunked backfills (issue 13): two weeks are 336 runs. Its one task is an EmptyOperator,
which the scheduler marks successful itself (no worker process), so a chunk of 48 runs finishes in seconds even
on a busy machine; Airflow then marks the chunk's backfill complete at its next 30 s tick."""

import pendulum
from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import dag


@dag(dag_id="demo_chunked", schedule="@hourly", start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False, tags=["backfillctl-demo"])
def demo_chunked():
    EmptyOperator(task_id="work")


demo_chunked()
