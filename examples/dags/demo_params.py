"""A daily DAG whose params reject some dag_run_conf (region must be eu or us; batch >= 1)."""

import pendulum
from airflow.sdk import dag, task
from airflow.sdk import Param

@dag(dag_id="demo_params", schedule="@daily", start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False, tags=["backfillctl-demo"], max_active_runs=2, params={"region": Param("eu", type="string", enum=["eu", "us"]), "batch": Param(5, type="integer", minimum=1)})
def demo_params():
    @task
    def work(**context):
        print("params", context["params"])

    work()


demo_params()
