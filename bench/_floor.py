"""The floor: a minimal httpx client doing only the necessary Airflow calls, run as its own process.

    python bench/_floor.py create BODIES.json    # one auth + one POST /backfills per body
    python bench/_floor.py dry_run BODIES.json   # one auth + one POST /backfills/dry_run per body
    python bench/_floor.py count DAG_ID FROM TO  # one auth + GET backfills + one counting dagRuns GET per state
    python bench/_floor.py live DAG,FROM,TO …    # one auth + per DAG: its newest backfill + every page of its runs

Reads BACKFILLCTL_AIRFLOW_URL / _USERNAME / _PASSWORD / _TOKEN like backfillctl. Prints the number of calls.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys

import httpx


def client() -> httpx.Client:
    url = os.environ["BACKFILLCTL_AIRFLOW_URL"].rstrip("/")
    http = httpx.Client(base_url=url, timeout=600)
    token = os.environ.get("BACKFILLCTL_AIRFLOW_TOKEN")
    if not token:
        answer = http.post(
            "/auth/token",
            json={
                "username": os.environ["BACKFILLCTL_AIRFLOW_USERNAME"],
                "password": os.environ["BACKFILLCTL_AIRFLOW_PASSWORD"],
            },
        )
        answer.raise_for_status()
        token = answer.json()["access_token"]
    http.headers["Authorization"] = f"Bearer {token}"
    return http


def live(http: httpx.Client, dag_id: str, start: str, end: str) -> int:
    """A live backfill's state and its runs by state: the DAG's newest backfill, then its range's runs page by page."""
    http.get("/api/v2/backfills", params={"dag_id": dag_id, "limit": 1, "order_by": "-id"}).raise_for_status()
    calls, offset, total = 1, 0, 1
    params: dict[str, str | int] = {"run_type": "backfill", "logical_date_gte": start, "logical_date_lte": end}
    while offset < total:
        answer = http.get(f"/api/v2/dags/{dag_id}/dagRuns", params={**params, "limit": 100, "offset": offset})
        answer.raise_for_status()
        page = answer.json()
        calls, offset, total = calls + 1, offset + max(1, len(page["dag_runs"])), page["total_entries"]
    return calls


def main() -> None:
    action, *rest = sys.argv[1:]
    calls = 0 if os.environ.get("BACKFILLCTL_AIRFLOW_TOKEN") else 1
    http = client()
    with contextlib.closing(http):
        if action in ("create", "dry_run"):
            path = "/api/v2/backfills" + ("/dry_run" if action == "dry_run" else "")
            with open(rest[0], encoding="utf-8") as handle:
                bodies = json.load(handle)
            for body in bodies:
                http.post(path, json=body).raise_for_status()
                calls += 1
        elif action == "count":
            dag_id, start, end = rest
            http.get("/api/v2/backfills", params={"dag_id": dag_id, "limit": 1, "order_by": "-id"}).raise_for_status()
            calls += 1
            for state in ("queued", "running", "success", "failed"):
                http.get(
                    f"/api/v2/dags/{dag_id}/dagRuns",
                    params={
                        "run_type": "backfill",
                        "logical_date_gte": start,
                        "logical_date_lte": end,
                        "state": state,
                        "limit": 1,
                    },
                ).raise_for_status()
                calls += 1
        elif action == "live":  # a steady pass's necessary reads, one after another
            for triple in rest:
                calls += live(http, *triple.split(","))
        else:
            sys.exit(f"unknown action {action}")
    print(calls)


if __name__ == "__main__":
    main()
