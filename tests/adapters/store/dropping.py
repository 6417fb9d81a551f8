"""Dropping the store's PostgreSQL connections mid-transaction, in this process or in a `backfillctl` subprocess.

A listener on every SQLAlchemy engine kills the store database's connections with `pg_terminate_backend` right
before a chosen statement runs: the moment a drop reaches a pass (the engine pings a pooled connection before
lending it, so one killed while idle is replaced unseen). `python -m tests.adapters.store.dropping ADMIN_URL STORE_URL
WHEN ARGS...` runs `backfillctl ARGS` with the listener installed (WHEN: `create-outcome`).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from sqlalchemy import Engine, event

KILL = "SELECT pg_terminate_backend(pid, 5000) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()"
Statement = Callable[[str, Any], bool]


def kill_connections(admin: str, store_url: str) -> int:
    """Terminate every connection to the store's database (waiting for each to end); how many there were."""
    with psycopg.connect(admin, autocommit=True) as conn:
        return len(conn.execute(KILL, (store_url.rsplit("/", 1)[1],)).fetchall())


@contextmanager
def killing(admin: str, store_url: str, when: Statement, then: Callable[[], None] | None = None) -> Iterator[list[str]]:
    """Kill every connection to the store's database before each statement `when` picks (or call `then`, which
    does); yields those statements."""
    killed: list[str] = []

    def before(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _many: bool) -> None:
        if when(statement, parameters):
            killed.append(statement)
            (then or (lambda: kill_connections(admin, store_url)))()

    event.listen(Engine, "before_cursor_execute", before)
    try:
        yield killed
    finally:
        event.remove(Engine, "before_cursor_execute", before)


def create_outcome(statement: str, parameters: Any) -> bool:
    """The INSERT of a create's outcome record: after Airflow made the backfill, before the store knows it."""
    return (
        statement.startswith("INSERT INTO audit_events")
        and isinstance(parameters, dict)
        and (parameters.get("action"), parameters.get("phase")) == ("create", "outcome")
    )


def first(when: Statement) -> Statement:
    """`when`, the first time it is true only."""
    seen: list[bool] = []

    def once(statement: str, parameters: Any) -> bool:
        if seen or not when(statement, parameters):
            return False
        seen.append(True)
        return True

    return once


if __name__ == "__main__":
    admin_url, url, when_name, *args = sys.argv[1:]
    chosen = {"create-outcome": first(create_outcome)}[when_name]
    from controller.cli import main

    with killing(admin_url, url, chosen):
        code = main(args)
    sys.exit(code)
