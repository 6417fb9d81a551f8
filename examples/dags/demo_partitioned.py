"""A daily partitioned DAG (CronPartitionTimetable): runs carry a partition key, not a logical date.

The task fails when the partition's day of the month is odd, so a backfill over a few days ends with
failed partitions, and a `reprocess_behavior: failed` backfill re-runs exactly those (beside the old runs).
"""

import pendulum
from airflow.sdk import CronPartitionTimetable, dag, task


@dag(
    dag_id="demo_partitioned",
    schedule=CronPartitionTimetable("0 0 * * *", timezone="UTC"),
    start_date=pendulum.datetime(2025, 1, 1, tz="UTC"),
    catchup=False,
    tags=["backfillctl-demo"],
)
def demo_partitioned():
    @task(retries=0)
    def work(**context):
        key = context["dag_run"].partition_key  # e.g. "2024-03-01T00:00:00"
        day = int(key[8:10])
        if day % 2 == 1:
            raise RuntimeError(f"partition {key}: odd day, failing on purpose")
        print("partition", key)

    work()


demo_partitioned()
