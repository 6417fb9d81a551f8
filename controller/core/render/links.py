"""Links into Airflow's UI (pure): where a person sees a spec's backfill — Airflow 3.4's page of one backfill where the
server has it, else the DAG's runs filtered to backfill runs. The base is the Airflow URL without its credentials."""

from __future__ import annotations

from urllib.parse import quote, urlsplit, urlunsplit

from controller.core.model.capabilities import Capabilities


def ui_base(airflow_url: str | None) -> str | None:
    """The Airflow URL as a browser opens it: no user, password, query or fragment (None: no URL)."""
    if not airflow_url:
        return None
    parts = urlsplit(airflow_url)
    if not parts.scheme or not parts.hostname:
        return None
    name = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    host = name if parts.port is None else f"{name}:{parts.port}"
    return urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", ""))


def backfill_link(base: str | None, server: Capabilities | None, dag_id: str, backfill_id: int | None) -> str | None:
    """The UI page of a backfill (3.4+), else its DAG's runs filtered to backfill runs (None: no base, no DAG)."""
    if base is None or not dag_id:
        return None
    dag = quote(dag_id, safe="")
    if backfill_id is not None and server is not None and server.backfill_page:
        return f"{base}/dags/{dag}/backfills/{backfill_id}"
    return f"{base}/dags/{dag}/runs?run_type=backfill"
