"""The pool endpoints: every pool's slots (`GET /api/v2/pools`), and the pool each task of a DAG runs in
(`pool` of `GET /api/v2/dags/{dag_id}/tasks`); both exist in every 3.x release."""

from __future__ import annotations

from controller.adapters.airflow.server import Server


class Pools:
    def __init__(self, server: Server) -> None:
        self._server = server

    def slots(self) -> dict[str, int]:
        """Pool name → its slots (-1: unlimited, as Airflow says it)."""
        return {str(p["name"]): int(p["slots"]) for p in self._server.paginate("/api/v2/pools", "pools", {})}

    def task_pools(self, dag_id: str) -> list[str | None]:
        """The pool of each of the DAG's tasks (None: the task names none, so it runs in default_pool)."""
        tasks = self._server.json("GET", f"/api/v2/dags/{dag_id}/tasks").get("tasks", [])
        return [None if t.get("pool") is None else str(t["pool"]) for t in tasks]
