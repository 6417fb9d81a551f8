"""Upgrading a populated store from every released schema revision to this backfillctl's, on SQLite and PostgreSQL,
the way docs/upgrade.md says: `store migrate`, then `audit verify`.

There are no release tags: every revision under controller/adapters/store/migrations/versions up to LAST_RELEASED
counts as released. For each, a store is migrated to that revision and filled with rows of that revision's shape
(the tables and columns it has): bindings, an audit chain (keyed from 0006, with `spec_commit` from 0004), the
outbox, the lease, emergency stops, the spec index and analysis state (0007), stages (0008). The values are the
ones this backfillctl writes (a reference store at the head), cut to the revision's columns; the chain is sealed
with only the fields the revision stores, so its hashes are what that release computed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import MetaData, insert, select

from controller import __version__
from controller.adapters.store import Store, tables
from controller.adapters.store.database import MIGRATIONS, SCHEMA_HEAD, _alembic
from controller.adapters.store.spec_index import IndexedSpec
from controller.cli import main
from controller.core.audit.chain import GENESIS, AuditEntry, seal
from controller.core.audit.notify import Notification
from controller.core.model.binding import Binding, DesiredState, Phase, RunSummary
from controller.core.model.secret import Secret
from controller.core.model.stages import Stage, StageRecord, StageState
from controller.core.model.stops import EmergencyStopKind, StopSource
from controller.core.rules.analysis import AnalysisState

LAST_RELEASED = "0008"  # 0009 (reconciled commits) and 0010 (backfill history) came with this release
REVISIONS = sorted(p.name[:4] for p in (MIGRATIONS / "versions").glob("[0-9][0-9][0-9][0-9]_*.py"))
RELEASED = [r for r in REVISIONS if r <= LAST_RELEASED]
KEY = "k" * 32 + "-upgrade-test-key"
T = datetime(2026, 11, 29, 12, tzinfo=UTC)


def test_every_revision_before_this_release_is_tested() -> None:
    assert RELEASED == ["0001", "0002", "0003", "0004", "0005", "0006", "0007", "0008"]
    assert REVISIONS[-1] == SCHEMA_HEAD > LAST_RELEASED


def has(revision: str, since: str) -> bool:
    return revision >= since


def chain(revision: str) -> list[tuple[AuditEntry, tuple[Notification, ...]]]:
    """The records a store of `revision` could hold: `spec_commit` only from 0004 (the column came then)."""
    commit = "c0ffee" * 6 + "abcd" if has(revision, "0004") else None
    base = {"actor": "ci", "controller_version": "0.0.9", "spec_name": "orders-fix", "spec_commit": commit}
    notify = (Notification("team", "created", "json", {"event": "created", "spec": "orders-fix"}),)
    return [
        (AuditEntry(action="create", phase="intent", request={"method": "POST", "path": "/backfills"}, **base), ()),
        (AuditEntry(action="create", phase="outcome", outcome="done", backfill_id=7, **base), notify),
        (AuditEntry(action="observe", phase="observation", outcome="Running", backfill_id=7, **base), ()),
    ]


def reference(path: Path, revision: str) -> tuple[Store, dict[str, list[dict[str, Any]]]]:
    """A head store holding what a store of `revision` holds, and its rows by table."""
    store = Store(f"sqlite:///{path}", audit_key=Secret(KEY) if has(revision, "0006") else None, clock=lambda: T)
    for entry, notifications in chain(revision):
        store.append(entry, notifications)
    binding = Binding(
        "orders-fix", "orders_daily", 7, Phase.RUNNING, DesiredState.PAUSED, "sha256:ab", "", RunSummary({"success": 2})
    )
    store.save_binding(replace(binding, backfills=(7,), git_commit="c0ffee", airflow_url="http://airflow:8080"))
    store.acquire("reconciler@ci", ttl=3600, now=T)
    store.add_stop(EmergencyStopKind.DOWNSTREAM, "warehouse", "CPU at 95%", "oncall", source=StopSource.CLI)
    store.save_analysis_states({"warehouse": AnalysisState(over=2, last_sample=T)})
    indexed = IndexedSpec("b" * 40, "specs/orders-fix.yaml", "orders-fix", "orders_daily", "sha256:ab", "Running",
                          {"name": "orders-fix"}, 1_700_000_000, "alice@example.com", "c0ffee")  # fmt: skip
    store.index_specs([indexed], {indexed.blob_id})
    store.save_stage(StageRecord("orders-fix", "staging", Stage.REHEARSAL, "k1", StageState.PASSED, T, (3,), "r1"))
    with store.engine.connect() as conn:
        rows = {t.name: [dict(r) for r in conn.execute(select(t)).mappings()] for t in tables.metadata.sorted_tables}
    return store, rows


def populate(store: Store, revision: str, rows: dict[str, list[dict[str, Any]]]) -> dict[str, int]:
    """Migrate an empty store to `revision` and insert the reference rows cut to the columns it has there."""
    with store.engine.begin() as conn:
        _alembic(conn, "upgrade", revision)
    shape = MetaData()
    shape.reflect(store.engine)
    written = {}
    with store.engine.begin() as conn:
        for name, table in shape.tables.items():
            if name == "alembic_version":
                continue
            kept = [{k: v for k, v in row.items() if k in table.c} for row in rows[name]]
            if kept:
                conn.execute(insert(table), kept)
            written[name] = len(kept)
    return written


TABLES_SINCE = {  # the revision that made each table, and the rows the reference holds
    "bindings": ("0001", 1),
    "audit_events": ("0001", 3),
    "lease": ("0001", 1),
    "notifications": ("0005", 1),
    "analysis_state": ("0007", 1),
    "stops": ("0007", 1),
    "spec_index": ("0007", 1),
    "stages": ("0008", 1),
}


@pytest.mark.parametrize("revision", RELEASED)
def test_a_populated_store_upgrades_from_every_released_revision_and_its_chain_verifies(
    make: Callable[..., Store],
    store_url: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    revision: str,
) -> None:
    ref, rows = reference(tmp_path / "reference.db", revision)
    old = make(store_url, migrate=False)
    written = populate(old, revision, rows)
    assert written == {name: count for name, (since, count) in TABLES_SINCE.items() if has(revision, since)}
    assert old.revision() == revision

    keyed = has(revision, "0006")
    monkeypatch.setenv("BACKFILLCTL_STORE_URL", store_url)
    if keyed:
        monkeypatch.setenv("BACKFILLCTL_AUDIT_KEY", KEY)
    assert main(["store", "migrate"]) == 0  # the runbook: back up, store migrate, audit verify, roll the reconciler
    assert capsys.readouterr().out == f"store schema at revision {SCHEMA_HEAD} (was {revision})\n"
    assert main(["audit", "verify"]) == 0
    head = rows["audit_events"][-1]["hash"]
    verified = capsys.readouterr().out.splitlines()
    assert verified[0] == f"OK: 3 events, chain intact; head seq 3 hash {head}"
    assert verified[1].startswith("  keyed from seq 1:" if keyed else "  not keyed:"), verified

    store = make(store_url, audit_key=Secret(KEY) if keyed else None, clock=lambda: T)
    assert store.revision() == SCHEMA_HEAD
    (binding,) = store.bindings().values()
    expected = ref.binding("orders-fix")
    assert expected is not None
    if not has(revision, "0003"):  # applied_state and the JSON detail came with 0003: their defaults
        expected = replace(expected, applied_state=DesiredState.ACTIVE, backfills=(7,), reason="")
    if not has(revision, "0002"):
        expected = replace(expected, runs=None)
    assert binding == expected
    assert store.current_lease() == ref.current_lease()
    assert [r.receiver for r in store.undelivered_notifications()] == (["team"] if has(revision, "0005") else [])
    assert store.stops() == (ref.stops() if has(revision, "0007") else ())
    assert store.analysis_states() == (ref.analysis_states() if has(revision, "0007") else {})
    assert store.indexed_specs() == (ref.indexed_specs() if has(revision, "0007") else {})
    assert store.stages() == (ref.stages() if has(revision, "0008") else ())

    # the new release appends to the old chain, and the whole chain still verifies
    record = store.append(AuditEntry(action="observe", phase="observation", actor="ci", controller_version=__version__))
    assert (record.seq, record.prev_hash) == (4, head)
    result = store.verify()
    assert (result.ok, result.count, result.head_hash) == (True, 4, record.hash)
    assert result.keyed_from == (1 if keyed else None)
    ref.close()


def test_the_reference_chain_is_sealed_as_each_release_sealed_it(tmp_path: Path) -> None:
    """Before 0004 no record carries spec_commit, before 0006 none a MAC: the hashes a release of then computed."""
    for revision, commit, mac in (("0003", None, None), ("0005", "c0ffee", None), ("0006", "c0ffee", "mac")):
        _, rows = reference(tmp_path / f"{revision}.db", revision)
        first = rows["audit_events"][0]
        assert (first["spec_commit"] is None, first["mac"] is None) == (commit is None, mac is None)
        entry, _ = chain(revision)[0]
        assert first["hash"] == seal(1, first["time"], entry, GENESIS).hash
