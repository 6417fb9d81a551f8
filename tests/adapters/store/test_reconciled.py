"""Reconciled commits on SQLite and PostgreSQL: a row per commit (or policy) a pass reconciled, its time renewed by
each good pass over the same commit; the newest valid policy is what a lift reads while HEAD's is invalid."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import func, select

from controller.adapters.store import Store
from controller.adapters.store.tables import reconciled

T = datetime(2026, 12, 6, 9, tzinfo=UTC)
POLICY = "version: 1\noncall: [alice]\n"


def test_a_good_pass_renews_its_commits_row_and_a_new_commit_adds_one(store_url: str) -> None:
    now = [T]
    with Store(store_url, clock=lambda: now[0]) as store:
        assert (store.last_reconciled(), store.last_valid_policy()) == (None, None)
        store.record_reconciled("a" * 40, POLICY)
        now[0] = T + timedelta(minutes=15)
        store.record_reconciled("a" * 40, POLICY)
        last = store.last_reconciled()
        assert last is not None
        assert (last.commit, last.policy_text, last.first_pass_at, last.last_pass_at) == ("a" * 40, POLICY, T, now[0])
        store.record_reconciled("b" * 40, None)  # HEAD's policy is invalid: nothing recorded of it
        assert store.last_valid_policy() == POLICY
        with store.engine.connect() as conn:
            assert conn.execute(select(func.count()).select_from(reconciled)).scalar() == 2
        last = store.last_reconciled()
        assert last is not None
        assert (last.commit, last.policy_text) == ("b" * 40, None)
