from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from controller.adapters.store import Store

PG_ADMIN = os.environ.get("BACKFILLCTL_TEST_PG_ADMIN_URL", "postgresql://postgres@127.0.0.1:5432/postgres")


@pytest.fixture(scope="session")
def postgres_admin() -> str:
    """PostgreSQL for the store tests; a clear failure (not a driver traceback) when it is not running."""
    try:
        with psycopg.connect(PG_ADMIN, connect_timeout=5):
            return PG_ADMIN
    except psycopg.OperationalError as exc:
        pytest.fail(
            f"the store tests need PostgreSQL at {PG_ADMIN} (set BACKFILLCTL_TEST_PG_ADMIN_URL to another "
            f"server with CREATE DATABASE rights); it is not reachable: {str(exc).splitlines()[0]}. "
            "On Debian: pg_ctlcluster --skip-systemctl-redirect 15 main start",
            pytrace=False,
        )


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The same tests on SQLite and on PostgreSQL (a throw-away database on 127.0.0.1:5432)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/state.db"
        return
    with throwaway_database(request.getfixturevalue("postgres_admin")) as url:
        yield url


@contextmanager
def throwaway_database(admin: str) -> Iterator[str]:
    """The URL of a new, empty PostgreSQL database, dropped afterwards (its connections too)."""
    name = f"backfillctl_test_{uuid.uuid4().hex[:10]}"
    base = admin.rsplit("/", 1)[0]
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


@pytest.fixture
def make() -> Iterator[Callable[..., Store]]:
    """Open stores that are disposed after the test (no connection leaks)."""
    opened: list[Store] = []

    def _make(*args: Any, **kwargs: Any) -> Store:
        store = Store(*args, **kwargs)
        opened.append(store)
        return store

    yield _make
    for store in opened:
        store.close()
