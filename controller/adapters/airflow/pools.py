"""The pool endpoints: every pool's slots (`GET /api/v2/pools`), and the pool each task of a DAG runs in
(`pool` of `GET /api/v2/dags/{dag_id}/tasks`); both exist in every 3.x release."""

from __future__ import annotations

from collections.abc import Mapping
from functools import partial
from typing import Any

from controller.adapters.airflow.decode import decoded, field, objects
from controller.adapters.airflow.server import Server


class Pools:
    def __init__(self, server: Server) -> None:
        self._server = server

    def slots(self) -> dict[str, int]:
        """Pool name → its slots (-1: unlimited, as Airflow says it)."""
        return dict(self._server.entries("/api/v2/pools", "pools", {}, _pool))

    def task_pools(self, dag_id: str) -> list[str | None]:
        """The pool of each of the DAG's tasks (None: the task names none, so it runs in default_pool)."""
        path = f"/api/v2/dags/{dag_id}/tasks"
        tasks = decoded(partial(objects, key="tasks"), self._server.json("GET", path), "GET", path)
        return [None if t.get("pool") is None else str(t["pool"]) for t in tasks]


def _pool(item: Mapping[str, Any]) -> tuple[str, int]:
    return str(field(item, "name", str, "a string")), int(field(item, "slots", int, "an integer"))
