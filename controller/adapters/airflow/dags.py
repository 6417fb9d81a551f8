"""The DAG endpoints: one DAG's details (and its tasks, for `depends_on_past`), its version ids (which Airflow it
is), several DAGs from the listing, and every DAG id (a missing DAG's likely fixes)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any

from controller.adapters.airflow.decode import (
    dag_info_from_json,
    decoded,
    each,
    field,
    objects,
    version_ids_from_json,
)
from controller.adapters.airflow.server import DAG_ORDER, DAGS, MAX_PAGES, PAGE, Server
from controller.core.model.airflow import DagInfo
from controller.core.model.capabilities import Capabilities


class Dags:
    def __init__(self, server: Server) -> None:
        self._server = server
        self.seen_dag_ids: set[str] = set()  # every id the DAG listing has shown: a missing DAG's likely fixes
        self._all_listed = False

    def get(self, dag_id: str, *, with_tasks: bool = True) -> DagInfo:
        """DAG details; `with_tasks` adds a call to learn `depends_on_past` (None when not asked)."""
        path, caps = f"/api/v2/dags/{dag_id}/details", self._server.capabilities
        details = self._server.json("GET", path)
        depends_on_past = self._depends_on_past(dag_id) if with_tasks else None
        return decoded(lambda data: dag_info_from_json(dag_id, data, caps, depends_on_past), details, "GET", path)

    def _depends_on_past(self, dag_id: str) -> bool:
        path = f"/api/v2/dags/{dag_id}/tasks"
        tasks = decoded(partial(objects, key="tasks"), self._server.json("GET", path), "GET", path)
        return any(t.get("depends_on_past") for t in tasks)

    def version_ids(self, dag_id: str) -> frozenset[str]:
        """The ids of the DAG's first versions, oldest first: each metadata database makes its own, so they tell two
        Airflows apart whatever their names (the first page: one Airflow answers it alike twice)."""
        params = {"limit": PAGE, "order_by": "id"}
        return version_ids_from_json(self._server.json("GET", f"/api/v2/dags/{dag_id}/dagVersions", params=params))

    def infos(self, dag_ids: Iterable[str]) -> dict[str, DagInfo]:
        """Several DAGs' infos from the DAG listing (one call per 100 DAGs instead of one per DAG).

        The listing reads pages while fewer pages remain than DAGs are missing; a DAG it does not hold
        (stale, on a page not read) is left out, for `get()` to look up; so is a DAG that is not periodic,
        whose refusal names the reason only the details tell (asset-triggered or not)."""
        wanted, found = set(dag_ids), dict[str, DagInfo]()
        offset, path = 0, DAGS
        read = partial(_listed_info, caps=self._server.capabilities, wanted=wanted)
        # a listing that holds still ends within as many pages as DAGs are wanted (see above): one whose total
        # keeps growing stops there too
        for _ in range(min(len(wanted), MAX_PAGES)):
            items, total = self._server.page(path, "dags", {**DAG_ORDER, "limit": PAGE, "offset": offset})
            listed = decoded(partial(each, read, key="dags", start=offset), items, "GET", path)
            self.seen_dag_ids.update(dag_id for dag_id, _ in listed)
            found |= {dag_id: info for dag_id, info in listed if info is not None and _periodic(info)}
            offset += len(items)
            pages_left = -(-(total - offset) // PAGE)
            self._all_listed = self._all_listed or not items or pages_left <= 0  # every id seen: `ids` reads none
            if not items or pages_left <= 0 or pages_left >= len(wanted - found.keys()):
                break
        return found

    @property
    def first_page_at_hand(self) -> bool:
        """Whether the listing's first page costs no call (the preflight read it for this command)."""
        return self._server.first_dag_page_at_hand()

    def ids(self) -> set[str]:
        """Every DAG id, from the listing (read once per client, and not at all when `infos` read it to its end)."""
        if not self._all_listed:
            self.seen_dag_ids.update(self._server.entries(DAGS, "dags", dict(DAG_ORDER), _dag_id))
            self._all_listed = True
        return self.seen_dag_ids


def _periodic(info: DagInfo) -> bool:
    return info.schedule is not None and info.schedule.periodic


def _dag_id(item: Mapping[str, Any]) -> str:
    return str(field(item, "dag_id", str, "a string"))


def _listed_info(item: Mapping[str, Any], caps: Capabilities, wanted: set[str]) -> tuple[str, DagInfo | None]:
    """A listed DAG's id, and its info when it is wanted."""
    dag_id = _dag_id(item)
    return dag_id, dag_info_from_json(dag_id, item, caps) if dag_id in wanted else None
