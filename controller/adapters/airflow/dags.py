"""The DAG endpoints: one DAG's details (and its tasks, for `depends_on_past`), several DAGs from the listing,
and every DAG id (a missing DAG's likely fixes)."""

from __future__ import annotations

from collections.abc import Iterable

from controller.adapters.airflow.decode import dag_info_from_json
from controller.adapters.airflow.server import PAGE, Server
from controller.core.model.airflow import DagInfo


class Dags:
    def __init__(self, server: Server) -> None:
        self._server = server
        self.seen_dag_ids: set[str] = set()  # every id the DAG listing has shown: a missing DAG's likely fixes
        self._all_listed = False

    def get(self, dag_id: str, *, with_tasks: bool = True) -> DagInfo:
        """DAG details; `with_tasks` adds a call to learn `depends_on_past` (None when not asked)."""
        details = self._server.json("GET", f"/api/v2/dags/{dag_id}/details")
        tasks = self._server.json("GET", f"/api/v2/dags/{dag_id}/tasks") if with_tasks else None
        depends_on_past = None if tasks is None else any(t.get("depends_on_past") for t in tasks.get("tasks", []))
        return dag_info_from_json(dag_id, details, self._server.capabilities, depends_on_past)

    def infos(self, dag_ids: Iterable[str]) -> dict[str, DagInfo]:
        """Several DAGs' infos from the DAG listing (one call per 100 DAGs instead of one per DAG).

        The listing reads pages while fewer pages remain than DAGs are missing; a DAG it does not hold
        (stale, on a page not read) is left out, for `get()` to look up; so is a DAG that is not periodic,
        whose refusal names the reason only the details tell (asset-triggered or not)."""
        wanted, found = set(dag_ids), dict[str, DagInfo]()
        offset, caps = 0, self._server.capabilities
        while wanted - found.keys():
            data = self._server.json(
                "GET", "/api/v2/dags", params={"limit": PAGE, "offset": offset, "order_by": "dag_id"}
            )
            items = data["dags"]
            self.seen_dag_ids.update(str(item["dag_id"]) for item in items)
            for item in items:
                info = dag_info_from_json(item["dag_id"], item, caps) if item["dag_id"] in wanted else None
                if info is not None and info.schedule is not None and info.schedule.periodic:
                    found[item["dag_id"]] = info
            offset += len(items)
            pages_left = -(-(int(data["total_entries"]) - offset) // PAGE)
            if not items or pages_left <= 0 or pages_left >= len(wanted - found.keys()):
                break
        return found

    def ids(self) -> set[str]:
        """Every DAG id, from the listing (read once per client)."""
        if not self._all_listed:
            params = {"order_by": "dag_id"}
            self.seen_dag_ids.update(
                str(item["dag_id"]) for item in self._server.paginate("/api/v2/dags", "dags", params)
            )
            self._all_listed = True
        return self.seen_dag_ids
