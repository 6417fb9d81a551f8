"""Issue 9 (store): read-only commands never create a store, URL mistakes exit 1, migrations serialise.

Each test fails on the code before the fix: `audit verify` on a missing store printed "OK: 0 events"
and created the SQLite file, a bad URL or a missing driver exited 3, and two first starts on a fresh
PostgreSQL store raced (`UniqueViolation … pg_type_typname_nsp_index`).
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, text

from controller.adapters.airflow import AirflowClient
from controller.adapters.store import NoStore, Store
from controller.adapters.store.database import SCHEMA_HEAD, _alembic
from controller.cli import main
from controller.commands.reconcile.reconciler import Reconciler
from controller.commands.runtime import session
from controller.core.audit.chain import AuditEntry
from controller.core.model.secret import Secret
from controller.errors import StoreError
from tests.commands.reconcile.harness import Bench
from tests.fakes.airflow import FakeAirflow

REPO = Path(__file__).resolve().parents[3]
HINT_MISSING = (
    "  hint: check BACKFILLCTL_STORE_URL, or run `backfillctl reconcile` first "
    "(`backfillctl plan --no-store` plans without one)\n"
)
READ_ONLY_COMMANDS = [
    ["audit", "verify"],
    ["audit", "show"],
    ["audit", "export", "--format", "jsonl"],
    ["status"],
    ["status", "--format", "json"],
    ["report", "daily-2025-01-week1"],
    ["report", "daily-2025-01-week1", "--format", "html"],
    ["notify", "status"],
    ["plan"],
]


def shown(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


def tables(url: str) -> list[str]:
    if url.startswith("sqlite"):
        return []  # the SQLite tests check that no file exists at all
    engine = create_engine(shown(url))
    try:
        with engine.connect() as conn:
            return sorted(inspect(conn).get_table_names())
    finally:
        engine.dispose()


def env(monkeypatch: pytest.MonkeyPatch, url: str, *, airflow: bool) -> None:
    monkeypatch.setenv("BACKFILLCTL_STORE_URL", url)
    monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", str(REPO / "specs"))
    if airflow:  # reachable or not: the store is opened (and refused) before Airflow is contacted
        monkeypatch.setenv("BACKFILLCTL_AIRFLOW_URL", "http://127.0.0.1:1")
    else:
        monkeypatch.delenv("BACKFILLCTL_AIRFLOW_URL", raising=False)


# --- 1. read-only commands ----------------------------------------------------------------------------


@pytest.mark.parametrize("command", READ_ONLY_COMMANDS, ids=" ".join)
def test_read_only_command_refuses_a_missing_sqlite_store_and_creates_nothing(
    tmp_path: Path, command: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/missing-dir/state.db"
    env(monkeypatch, url, airflow=command[0] == "plan")
    assert main(command) == 1
    err = capsys.readouterr().err.removeprefix(
        "offline: BACKFILLCTL_AIRFLOW_URL is not set; showing what the store last recorded\n"
    )
    assert err == f"error: no store at {url}; reconcile creates it\n" + HINT_MISSING
    assert not (tmp_path / "missing-dir").exists()


def test_missing_relative_sqlite_store_names_the_current_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BACKFILLCTL_STORE_URL", raising=False)  # the default, sqlite:///.backfillctl/state.db
    assert main(["audit", "verify"]) == 1
    assert capsys.readouterr().err == (
        "error: no store at sqlite:///.backfillctl/state.db; reconcile creates it\n"
        f"  hint: check BACKFILLCTL_STORE_URL (a relative SQLite path, resolved against the current directory "
        f"{tmp_path}), or run `backfillctl reconcile` first (`backfillctl plan --no-store` plans without one)\n"
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["audit", "verify"], ["audit", "show"], ["status"], ["plan"]], ids=" ".join)
def test_read_only_command_refuses_an_empty_database(
    store_url: str, command: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """On PostgreSQL the database exists but has no schema; on SQLite the file does not exist."""
    env(monkeypatch, store_url, airflow=command[0] == "plan")
    assert main(command) == 1
    assert f"error: no store at {shown(store_url)}; reconcile creates it\n" + HINT_MISSING in capsys.readouterr().err
    assert tables(store_url) == []
    if store_url.startswith("sqlite"):
        assert not Path(store_url.removeprefix("sqlite:///")).exists()


def test_store_behind_the_code_asks_for_store_migrate(
    make: Callable[..., Store], store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    old = make(store_url, migrate=False)
    with old.engine.begin() as conn:
        _alembic(conn, "upgrade", "0002")
    env(monkeypatch, store_url, airflow=False)
    for command in (["audit", "verify"], ["report", "daily-2025-01-week1"], ["status"]):
        assert main(command) == 1
        assert capsys.readouterr().err.endswith(
            f"error: store {shown(store_url)} is at schema revision 0002, this backfillctl needs {SCHEMA_HEAD}: "
            "run `backfillctl store migrate`\n"
            "  hint: read-only commands never change the store; `backfillctl reconcile` also migrates it\n"
        )
    assert old.revision() == "0002"
    assert main(["store", "migrate"]) == 0
    assert capsys.readouterr().out == f"store schema at revision {SCHEMA_HEAD} (was 0002)\n"
    assert main(["audit", "verify"]) == 0


def test_read_only_store_cannot_write(make: Callable[..., Store], store_url: str) -> None:
    make(store_url).append(AuditEntry(action="observe", phase="observation", actor="a", controller_version="0"))
    reader = make(store_url, read_only=True)
    assert reader.verify().count == 1
    with pytest.raises(StoreError) as refused:
        reader.append(AuditEntry(action="observe", phase="observation", actor="a", controller_version="0"))
    assert refused.value.message.startswith(f"store {shown(store_url)}: writing the audit event observe/observation")
    assert refused.value.hint == (
        "the database refused a write: the store's user (or file) needs write access for this command"
    )
    assert make(store_url).verify().count == 1


def test_audit_commands_leave_an_existing_sqlite_store_untouched(
    tmp_path: Path, make: Callable[..., Store], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path}/state.db"
    make(url).close()
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    env(monkeypatch, url, airflow=False)
    for command in (["audit", "verify"], ["audit", "show"], ["status"], ["report", "daily-2025-01-week1"]):
        assert main(command) == 0
    capsys.readouterr()
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir() if p.name == "state.db"} == before


# --- plan --no-store -------------------------------------------------------------------------------------


def test_plan_no_store_plans_like_a_first_apply_and_opens_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = Bench(tmp_path / "bench", fake=FakeAirflow())
    try:
        bench.spec("first", dag="demo_daily")
        first_apply = bench.reconciler().plan().plan
        with pytest.raises(StoreError) as refused:  # the stand-in refuses anything beyond the two empty reads
            NoStore().append(AuditEntry(action="x", phase="observation", actor="a", controller_version="0"))
        assert refused.value.message == (
            "writing the audit event x/observation needs a store, and this command runs with --no-store"
        )
        assert Reconciler(bench.settings(), NoStore(), bench.client()).plan().plan == first_apply

        assert bench.fake is not None
        transport = bench.fake.transport()

        def client(_settings: object, **_kw: bool) -> AirflowClient:
            return AirflowClient(bench.url, username="admin", password=Secret("admin"), transport=transport)

        monkeypatch.setattr(session, "make_client", client)
        env(monkeypatch, f"sqlite:///{tmp_path}/nowhere/state.db", airflow=True)
        monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", str(bench.specs))
        assert main(["plan", "--no-store", "--format", "json"]) == 0
        out = capsys.readouterr().out
        assert f'"checksum": "{first_apply.checksum()}"' in out
        assert not (tmp_path / "nowhere").exists()
        monkeypatch.setenv("BACKFILLCTL_STORE_URL", "not-a-url")  # never even parsed
        assert main(["plan", "--no-store"]) == 0
        assert capsys.readouterr().out.startswith("+ ")
    finally:
        bench.close()


# --- 2. store URL mistakes ----------------------------------------------------------------------------

URL_CASES = [
    (
        "not-a-url",
        "error: BACKFILLCTL_STORE_URL is not a database URL: 'not-a-url'\n"
        "  hint: use sqlite:///path/to/state.db or postgresql://USER@HOST:5432/DBNAME "
        "(supported databases: sqlite, postgresql)\n",
    ),
    (
        "postgresql//admin:CANARY-pw@db/x",
        "error: BACKFILLCTL_STORE_URL is not a database URL: 'postgresql//admin:***@db/x'\n"
        "  hint: use sqlite:///path/to/state.db or postgresql://USER@HOST:5432/DBNAME "
        "(supported databases: sqlite, postgresql)\n",
    ),
    (
        "mysql://admin:CANARY-pw@db/x",
        "error: store mysql://admin:***@db/x: 'mysql' is not a supported database (supported: sqlite, postgresql)\n"
        "  hint: use sqlite:///path/to/state.db or postgresql://USER@HOST:5432/DBNAME; PostgreSQL needs the "
        "driver: pip install 'airflow-backfill-controller[postgres]'\n",
    ),
    (
        "postgresql+pg8000://admin:CANARY-pw@db/x",
        "error: store postgresql+pg8000://admin:***@db/x: the Python driver 'pg8000' for postgresql is not "
        "installed\n"
        "  hint: use postgresql://… (psycopg 3, installed by pip install 'airflow-backfill-controller[postgres]'); "
        "supported databases: sqlite, postgresql\n",
    ),
    (
        "postgresql+nodriver://admin:CANARY-pw@db/x",
        "error: store postgresql+nodriver://admin:***@db/x: unknown database driver 'nodriver'\n"
        "  hint: use sqlite:///path/to/state.db or postgresql://USER@HOST:5432/DBNAME (PostgreSQL needs "
        "pip install 'airflow-backfill-controller[postgres]')\n",
    ),
]


@pytest.mark.parametrize(("url", "expected"), URL_CASES, ids=[c[0].split(":")[0] for c in URL_CASES])
@pytest.mark.parametrize("command", [["audit", "verify"], ["reconcile", "--once"], ["store", "migrate"]], ids=" ".join)
def test_store_url_mistakes_exit_1_with_the_fix(
    url: str, expected: str, command: list[str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BACKFILLCTL_STORE_URL", url)
    assert main(command) == 1
    err = capsys.readouterr().err
    assert err == expected
    assert "CANARY-pw" not in err


def test_postgresql_without_psycopg_names_the_extra() -> None:
    """A real interpreter in which `import psycopg` fails, as in an install without the [postgres] extra."""
    code = "import sys; sys.modules['psycopg'] = None; from controller.cli import main; sys.exit(main(sys.argv[1:]))"
    result = subprocess.run(
        [sys.executable, "-c", code, "audit", "verify"],
        env={"PATH": "/usr/bin:/bin", "BACKFILLCTL_STORE_URL": "postgresql://admin:CANARY-pw@db:5432/x"},
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "error: store postgresql+psycopg://admin:***@db:5432/x: the Python driver 'psycopg' for postgresql is not "
        "installed\n"
        "  hint: install the PostgreSQL extra: pip install 'airflow-backfill-controller[postgres]'; supported "
        "databases: sqlite, postgresql\n"
    )


# --- 3. migrations ------------------------------------------------------------------------------------

OPENER = """
import sys, time
from controller.adapters.store import Store
time.sleep(max(0.0, float(sys.argv[2]) - time.time()))  # start together
Store(sys.argv[1]).close()
"""


@pytest.mark.parametrize("processes", [4])
def test_concurrent_first_starts_on_a_fresh_store_all_succeed(
    make: Callable[..., Store], store_url: str, processes: int
) -> None:
    start = str(time.time() + 3.0)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", OPENER, store_url, start], stderr=subprocess.PIPE, text=True, cwd=str(REPO)
        )
        for _ in range(processes)
    ]
    results = [(p.communicate(timeout=120)[1], p.returncode) for p in procs]
    assert results == [("", 0)] * processes
    assert make(store_url).revision() == SCHEMA_HEAD


def test_migration_failure_names_the_real_cause(make: Callable[..., Store], store_url: str) -> None:
    squatter = make(store_url, migrate=False)
    with squatter.engine.begin() as conn:
        conn.execute(text("CREATE TABLE bindings (x INTEGER)"))  # a table of some other program
    with pytest.raises(StoreError) as failed:
        make(store_url)
    cause = (
        'DuplicateTable: relation "bindings" already exists'
        if "postgresql" in store_url
        else "OperationalError: table bindings already exists"
    )
    assert (
        failed.value.message == f"store {shown(store_url)}: migration to schema revision {SCHEMA_HEAD} failed: {cause}"
    )
    assert failed.value.hint == (
        "the database is reachable but the schema upgrade failed with the error above; fix that cause "
        "(e.g. the store's user needs CREATE rights), then run `backfillctl store migrate`"
    )
    assert squatter.revision() is None  # the failed upgrade was rolled back as a whole
