from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from controller.adapters.store import Store

PG_ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """The same tests on SQLite and on PostgreSQL (a throw-away database on 127.0.0.1:5432)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/state.db"
        return
    name = f"backfillctl_test_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    try:
        yield f"postgresql://postgres@127.0.0.1:5432/{name}"
    finally:
        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
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
