"""A daily finance DAG (the policy asks for finance approvers)."""

import pendulum
from airflow.sdk import dag, task


@dag(dag_id="demo_finance_ledger", schedule="@daily", start_date=pendulum.datetime(2025, 1, 1, tz="UTC"), catchup=False, tags=["backfillctl-demo"])
def demo_finance_ledger():
    @task
    def work(**context):
        print("ledger", context["logical_date"])

    work()


demo_finance_ledger()
