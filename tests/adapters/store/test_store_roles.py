"""The store's PostgreSQL roles (docs/store-roles.sql, docs/least-privilege.md): the migrator runs the DDL, the
reconciler may INSERT and SELECT audit rows only, DML on the other tables, and no DDL; the append-only trigger of
revision 0009 refuses UPDATE, DELETE and TRUNCATE of audit rows to every role but the table's owner.

The SQL file runs as shipped, its role names made unique per test (roles are shared by the whole server).
On the code before this change the reconciler could not append at all (`LOCK TABLE … SHARE ROW EXCLUSIVE` needs
UPDATE, DELETE or TRUNCATE), and a role granted UPDATE or DELETE on audit_events could rewrite the log.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from controller.adapters.store import SCHEMA_HEAD, Store
from controller.cli import main
from controller.core.audit.chain import AuditEntry
from controller.errors import StoreError
from tests.commands.reconcile.harness import Bench, fake, in_process
from tests.fakes.airflow import FakeAirflow

ROLES_SQL = Path(__file__).resolve().parents[3] / "docs" / "store-roles.sql"


@dataclass(frozen=True)
class Roles:
    admin: str  # a superuser on the store's database
    migrator: str
    reconciler: str
    names: tuple[str, str]


def _url(admin: str, user: str, database: str) -> str:
    host = admin.split("@", 1)[1].rsplit("/", 1)[0]
    return f"postgresql://{user}@{host}/{database}"


@pytest.fixture
def roles(postgres_admin: str) -> Iterator[Roles]:
    """A throw-away database with docs/store-roles.sql applied as shipped (unique role names)."""
    suffix = uuid.uuid4().hex[:10]
    database, migrator, reconciler = f"backfillctl_roles_{suffix}", f"bf_mig_{suffix}", f"bf_rec_{suffix}"
    script = ROLES_SQL.read_text().replace("backfillctl_migrator", migrator)
    script = script.replace("backfillctl_reconciler", reconciler)
    with psycopg.connect(postgres_admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {database}")
    admin = _url(postgres_admin, "postgres", database)
    try:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(script.encode())
        yield Roles(admin, _url(admin, migrator, database), _url(admin, reconciler, database), (migrator, reconciler))
    finally:
        with psycopg.connect(postgres_admin, autocommit=True) as conn:
            conn.execute(f"DROP DATABASE IF EXISTS {database} WITH (FORCE)")
            for role in (migrator, reconciler):
                conn.execute(f"DROP ROLE IF EXISTS {role}")


def refused(url: str, statement: str) -> str:
    """The error PostgreSQL gives `statement` run as the URL's role (the test fails if it succeeds)."""
    with psycopg.connect(url) as conn, pytest.raises(psycopg.errors.InsufficientPrivilege) as error:
        conn.execute(statement.encode())
    return str(error.value).splitlines()[0]


def run(url: str, statement: str) -> int:
    with psycopg.connect(url) as conn:
        return conn.execute(statement.encode()).rowcount


def entry(i: int) -> AuditEntry:
    return AuditEntry("create", "intent", "alice", "0.1.0", spec_name="s", dag_id="d", message=f"event {i}")


def migrate_as_migrator(roles: Roles, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("BACKFILLCTL_STORE_URL", roles.migrator)
    assert main(["store", "migrate"]) == 0
    assert capsys.readouterr().out == f"store schema at revision {SCHEMA_HEAD} (was None)\n"


def test_the_reconcilers_role_inserts_and_selects_audit_rows_only_and_runs_no_ddl(
    roles: Roles, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    migrate_as_migrator(roles, monkeypatch, capsys)
    migrator, reconciler = roles.names
    with Store(roles.reconciler) as store:  # at the head: opens without trying to migrate
        records = [store.append(entry(i)) for i in (1, 2, 3)]
        assert store.verify().ok
    assert run(roles.reconciler, "SELECT seq FROM audit_events") == 3
    denied = "permission denied for table audit_events"
    assert refused(roles.reconciler, "UPDATE audit_events SET message = 'rewritten' WHERE seq = 2") == denied
    assert refused(roles.reconciler, "DELETE FROM audit_events WHERE seq = 3") == denied
    assert refused(roles.reconciler, "TRUNCATE audit_events") == denied
    assert refused(roles.reconciler, "CREATE TABLE x (i int)") == "permission denied for schema backfillctl"
    assert refused(roles.reconciler, "CREATE TABLE public.x (i int)") == "permission denied for schema public"
    assert refused(roles.reconciler, "CREATE TEMP TABLE x (i int)").startswith(
        "permission denied to create temporary tables in database"
    )
    assert refused(roles.reconciler, "DROP TABLE bindings") == "must be owner of table bindings"
    assert refused(roles.reconciler, "ALTER TABLE audit_events DISABLE TRIGGER ALL") == (
        "must be owner of table audit_events"
    )
    # DML on its other tables
    assert run(roles.reconciler, "UPDATE lease SET holder = holder") == 0
    assert run(roles.reconciler, "DELETE FROM notifications") == 0
    # a grant does not reopen the audit log: the trigger refuses every role but the owner
    run(roles.admin, f"GRANT UPDATE, DELETE, TRUNCATE ON backfillctl.audit_events TO {reconciler}")
    trigger = "audit_events is append-only: {} refused for role " + reconciler
    assert refused(roles.reconciler, "UPDATE audit_events SET message = 'x' WHERE seq = 2") == trigger.format("UPDATE")
    assert refused(roles.reconciler, "DELETE FROM audit_events WHERE seq = 3") == trigger.format("DELETE")
    assert refused(roles.reconciler, "TRUNCATE audit_events") == trigger.format("TRUNCATE")
    with Store(roles.reconciler, read_only=True) as store:
        assert [r.hash for r in store.events()] == [r.hash for r in records]  # type: ignore[union-attr]
    # the owner (the migrator) still can: what a downgrade needs, and what the audit key's MACs detect
    assert run(roles.migrator, "UPDATE audit_events SET message = 'rewritten' WHERE seq = 2") == 1
    with Store(roles.reconciler, read_only=True) as store:
        assert store.verify().problem is not None
    assert migrator in run_owner(roles)


def run_owner(roles: Roles) -> str:
    with psycopg.connect(roles.admin) as conn:
        row = conn.execute(b"SELECT tableowner FROM pg_tables WHERE tablename = 'audit_events'").fetchone()
    assert row is not None
    return str(row[0])


def test_a_reconciler_without_ddl_refuses_a_store_behind_the_code_and_names_store_migrate(
    roles: Roles, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Store(roles.migrator, migrate=False) as old:
        from controller.adapters.store.database import _alembic  # noqa: PLC0415

        with old.engine.begin() as conn:
            _alembic(conn, "upgrade", "0008")
    with pytest.raises(StoreError) as behind:
        Store(roles.reconciler)
    assert behind.value.message.endswith(
        f"migration to schema revision {SCHEMA_HEAD} failed: InsufficientPrivilege: permission denied for schema "
        "backfillctl"
    )
    assert behind.value.hint is not None
    assert "run `backfillctl store migrate`" in behind.value.hint
    monkeypatch.setenv("BACKFILLCTL_STORE_URL", roles.migrator)
    assert main(["store", "migrate"]) == 0  # 0008 → 0009 as the owner: the trigger is created
    with Store(roles.reconciler) as store:
        assert store.append(entry(1)).seq == 1


def test_a_whole_reconcile_pass_runs_under_the_reconcilers_role(
    roles: Roles, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    migrate_as_migrator(roles, monkeypatch, capsys)
    bench = Bench(tmp_path, fake=FakeAirflow(), store_url=roles.reconciler)
    try:
        bench.spec("roles-a")
        result = bench.run()
        assert [(i.spec, o) for i, o in result.applied] == [("roles-a", "created")]
        assert bench.trail("roles-a")[:2] == [("create", "intent", None), ("create", "outcome", "created")]
        in_process(bench, monkeypatch)
        bench.spec("roles-b", dag="demo_hourly")
        assert main(["reconcile", "--once"]) == 0
        assert len(fake(bench).backfills) == 2
        assert "+ create    roles-b" in capsys.readouterr().out
        assert main(["audit", "verify"]) == 0
        assert capsys.readouterr().out.startswith(f"OK: {len(bench.events())} events, chain intact")
    finally:
        bench.close()
