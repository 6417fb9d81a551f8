"""An hourly DAG that fails every third hour (00, 03, 06, … UTC), without retries: a third of its runs fail,
enough to trip a spec's `halt_on_failure_ratio` (issue 13)."""

import pendulum
from airflow.sdk import dag, task


@dag(dag_id="demo_halting", schedule="@hourly", start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False, tags=["backfillctl-demo"])
def demo_halting():
    @task(retries=0)
    def work(**context):
        hour = context["logical_date"].hour
        if hour % 3 == 0:
            raise RuntimeError(f"hour {hour}: failing on purpose")
        print("hour", hour)

    work()


demo_halting()
