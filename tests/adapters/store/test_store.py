"""The store on SQLite and PostgreSQL: chain, tamper detection, concurrency, lease, migrations, CLI."""

from __future__ import annotations

import itertools
import json
import re
import subprocess
import sys
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from alembic.script import ScriptDirectory
from sqlalchemy import event, inspect, text

from controller.adapters.store import Store
from controller.adapters.store.database import KNOWN_REVISIONS, MIGRATIONS, SCHEMA_HEAD, _alembic
from controller.cli import main
from controller.core.audit.chain import GENESIS, AuditEntry
from controller.core.model.airflow import Rerun, RunSummary
from controller.core.model.binding import Approval, ApprovedReview, Binding, CreateFacts, Phase
from controller.core.model.chunks import Chunk, Progress
from controller.core.model.ranges import compact
from controller.core.model.stages import Stage, StageRecord, StageState
from controller.errors import LockHeld, StoreError

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def entry(i: int, **extra: object) -> AuditEntry:
    return AuditEntry(
        action="create",
        phase="intent",
        actor="alice",
        controller_version="0.1.0",
        spec_name=f"spec-{i % 3}",
        dag_id="d",
        message=f"event {i}",
        **extra,
    )  # type: ignore[arg-type]


def filled(make: Callable[..., Store], url: str, count: int = 10) -> Store:
    store = make(url)
    for i in range(count):
        store.append(entry(i))
    return store


def sql(store: Store, statement: str) -> None:
    with store.engine.begin() as conn:
        conn.execute(text(statement))


def test_append_builds_a_gap_free_chain(make: Callable[..., Store], store_url: str) -> None:
    store = filled(make, store_url, 5)
    records = list(store.events())
    assert [r.seq for r in records] == [1, 2, 3, 4, 5]
    assert records[0].prev_hash == GENESIS
    assert all(b.prev_hash == a.hash for a, b in itertools.pairwise(records))
    result = store.verify()
    assert (result.ok, result.count, result.head_seq, result.head_hash) == (True, 5, 5, records[-1].hash)


def test_request_and_response_round_trip(make: Callable[..., Store], store_url: str) -> None:
    store = make(store_url)
    store.append(
        entry(
            1,
            request={"method": "POST", "path": "/api/v2/backfills", "body": {"dag_id": "d"}},
            response={"status": 200, "detail": "ok"},
            backfill_id=7,
        )
    )
    (record,) = store.events()
    assert record.entry.request == {"method": "POST", "path": "/api/v2/backfills", "body": {"dag_id": "d"}}
    assert record.entry.backfill_id == 7
    assert store.verify().ok


def test_edited_payload_is_detected(make: Callable[..., Store], store_url: str) -> None:
    store = filled(make, store_url)
    sql(store, "UPDATE audit_events SET message = 'nothing to see' WHERE seq = 5")
    finding = store.verify().problem
    assert finding is not None
    assert (finding.kind, finding.seq, finding.message) == ("INVALID", 5, "seq 5 was modified after it was written")


def test_deleted_record_is_a_gap(make: Callable[..., Store], store_url: str) -> None:
    store = filled(make, store_url)
    sql(store, "DELETE FROM audit_events WHERE seq = 6")
    finding = store.verify().problem
    assert finding is not None
    assert (finding.kind, finding.seq, finding.message) == ("GAP", 6, "seq 6 is missing (next is 7)")


def test_reordered_records_are_detected(make: Callable[..., Store], store_url: str) -> None:
    store = filled(make, store_url)
    sql(store, "UPDATE audit_events SET seq = 1000 WHERE seq = 4")
    sql(store, "UPDATE audit_events SET seq = 4 WHERE seq = 5")
    sql(store, "UPDATE audit_events SET seq = 5 WHERE seq = 1000")
    finding = store.verify().problem
    assert finding is not None
    assert (finding.kind, finding.seq) == ("BROKEN", 4)


def test_truncated_tail_needs_the_saved_head(make: Callable[..., Store], store_url: str) -> None:
    store = filled(make, store_url)
    head = store.verify().head_hash
    sql(store, "DELETE FROM audit_events WHERE seq > 7")
    assert store.verify().ok  # without an anchor a truncation is invisible (documented)
    result = store.verify(expect_head=head)
    assert result.problem is not None
    assert result.problem.kind == "TRUNCATED"
    assert result.problem.message == f"the expected head {head} is not in the chain, which ends at seq 7"
    store.append(entry(99))
    assert make(store_url).verify(expect_head=store.verify().head_hash).ok


APPENDER = """
import sys
from controller.adapters.store import KNOWN_REVISIONS, MIGRATIONS, SCHEMA_HEAD, Store
from controller.adapters.store.database import _alembic
from controller.core.audit.chain import AuditEntry
store = Store(sys.argv[1])
for i in range(int(sys.argv[2])):
    store.append(AuditEntry(action="observe", phase="observation", actor=sys.argv[3], controller_version="0"))
"""


def test_concurrent_appenders_share_one_chain(make: Callable[..., Store], store_url: str) -> None:
    make(store_url).close()
    procs = [subprocess.Popen([sys.executable, "-c", APPENDER, store_url, "500", who]) for who in ("p1", "p2")]
    assert [p.wait(timeout=240) for p in procs] == [0, 0]
    store = make(store_url)
    result = store.verify()
    assert (result.ok, result.count) == (True, 1000)
    actors = [r.entry.actor for r in store.events()]
    assert actors.count("p1") == actors.count("p2") == 500


def test_lease_is_exclusive_until_it_expires(make: Callable[..., Store], store_url: str) -> None:
    store = make(store_url, clock=lambda: T0)
    mine, taken_over = store.acquire("reconcile@ci-1", ttl=60, now=T0)
    assert taken_over is None
    with pytest.raises(LockHeld) as held:
        store.acquire("reconcile@ci-2", ttl=60, now=T0 + timedelta(seconds=30))
    assert held.value.message == (
        f"lock held by reconcile@ci-1 on {mine.host} (pid {mine.pid}) since "
        f"2026-11-29T12:00:00.000000Z, lease {mine.lease_id}; it expires at "
        "2026-11-29T12:01:00.000000Z"
    )
    theirs, previous = store.acquire("reconcile@ci-2", ttl=60, now=T0 + timedelta(seconds=61))
    assert previous == mine
    with pytest.raises(LockHeld):
        store.heartbeat(mine, ttl=60)
    store.release(theirs)
    assert store.current_lease() is None


def test_heartbeat_extends_the_lease(make: Callable[..., Store], store_url: str) -> None:
    now = [T0]
    store = make(store_url, clock=lambda: now[0])
    mine, _ = store.acquire("a", ttl=60)
    now[0] = T0 + timedelta(seconds=50)
    renewed = store.heartbeat(mine, ttl=60)
    assert renewed.expires_at == "2026-11-29T12:01:50.000000Z"
    with pytest.raises(LockHeld):
        store.acquire("b", ttl=60, now=T0 + timedelta(seconds=100))


RACER = """
import sys
from controller.adapters.store import KNOWN_REVISIONS, MIGRATIONS, SCHEMA_HEAD, Store
from controller.adapters.store.database import _alembic
from controller.errors import LockHeld
store = Store(sys.argv[1], migrate=False)
try:
    store.acquire(sys.argv[2], ttl=300)
except LockHeld:
    sys.exit(5)
"""


def test_two_processes_racing_for_the_lease_one_wins(make: Callable[..., Store], store_url: str) -> None:
    make(store_url).close()
    procs = [subprocess.Popen([sys.executable, "-c", RACER, store_url, who]) for who in ("r1", "r2", "r3")]
    codes = sorted(p.wait(timeout=60) for p in procs)
    assert codes == [0, 5, 5]


def test_unlock_needs_the_exact_id_and_is_audited(
    make: Callable[..., Store], store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = make(store_url)
    mine, _ = store.acquire("stuck", ttl=3600)
    monkeypatch.setenv("BACKFILLCTL_STORE_URL", store_url)
    monkeypatch.setenv("BACKFILLCTL_ACTOR", "oncall")
    assert main(["store", "unlock", "wrong-id"]) == 1
    assert capsys.readouterr().err.startswith(f"error: no lease with id 'wrong-id'; the lease is {mine.lease_id}\n")
    assert main(["store", "unlock", mine.lease_id]) == 0
    assert capsys.readouterr().out == f"released the lease of {mine.describe()}\n"
    (event,) = store.events()
    assert (event.entry.action, event.entry.actor, event.entry.outcome) == ("unlock", "oncall", "released")
    assert store.current_lease() is None


def test_migration_from_the_first_revision_keeps_data(make: Callable[..., Store], store_url: str) -> None:
    store = make(store_url, migrate=False)
    with store.engine.begin() as conn:
        _alembic(conn, "upgrade", "0001")
    assert store.revision() == "0001"
    sql(
        store,
        "INSERT INTO bindings (spec_name, airflow_url, dag_id, backfill_id, spec_digest, phase, created_at, "
        "updated_at) VALUES ('s', 'http://a', 'd', 3, 'sha256:x', 'Running', 't', 't')",
    )
    assert store.migrate() == ("0001", "0011")
    old = store.bindings()["s"]
    assert (old.backfill_id, old.phase, old.backfills, old.runs, old.applied_state.value) == (
        3,
        Phase.RUNNING,
        (3,),
        None,
        "active",
    )
    store.save_binding(replace(old, runs=RunSummary({"success": 2})))
    assert store.bindings()["s"].runs == RunSummary({"success": 2})
    assert old.refused is False
    store.save_binding(replace(old, phase=Phase.BLOCKED, backfill_id=None, refused=True))  # in the JSON detail
    assert (store.bindings()["s"].phase, store.bindings()["s"].refused) == (Phase.BLOCKED, True)


def test_who_approved_is_kept_in_the_bindings_detail(make: Callable[..., Store], store_url: str) -> None:
    store = make(store_url)
    approval = Approval(41, "abc", (ApprovedReview("bob", 9001, "c0ffee", "2026-11-01T10:00:00Z"),))
    store.save_binding(Binding("s", "d", None, Phase.PENDING, spec_digest="sha256:x", approval=approval))
    store.save_binding(Binding("t", "d", None, Phase.PENDING, spec_digest="sha256:y"))  # no evidence, or older
    kept = store.bindings()
    assert (kept["s"].approval, kept["t"].approval) == (approval, None)


def test_an_approval_refusal_is_kept_and_read_from_a_store_written_before_its_flag(
    make: Callable[..., Store], store_url: str
) -> None:
    """The approval gate's refusal holds until the spec changes: its flag is stored; a row written before the flag
    existed says so by its reason (an upgrade must not let an unapproved spec be created)."""
    store = make(store_url)
    gate = "approval gate at reconcile: the approvals of #41 are not there: bob did not approve"
    store.save_binding(Binding("new", "d", None, Phase.BLOCKED, reason="x", refused=True, approval_refused=True))
    detail = {"reason": gate, "backfills": [], "refused": True}  # as the release before the flag wrote it
    for name, row_detail in (("old", detail), ("limit", {**detail, "reason": "the dry run counts 25 runs"})):
        sql(
            store,
            "INSERT INTO bindings (spec_name, airflow_url, dag_id, spec_digest, phase, detail, created_at, "
            f"updated_at) VALUES ('{name}', 'http://a', 'd', 'sha256:x', 'Blocked', '{json.dumps(row_detail)}', "
            "'t', 't')",
        )
    kept = store.bindings()
    assert [(n, kept[n].refused, kept[n].approval_refused) for n in ("new", "old", "limit")] == [
        ("new", True, True),
        ("old", True, True),
        ("limit", True, False),
    ]


def test_store_from_a_newer_version_is_refused(make: Callable[..., Store], store_url: str) -> None:
    store = make(store_url)
    sql(store, "UPDATE alembic_version SET version_num = '9999'")
    with pytest.raises(StoreError) as refused:
        make(store_url)
    assert "has schema revision 9999, newer than this backfillctl knows (head 0011)" in refused.value.message


def test_unreachable_store_fails_closed_without_leaking_the_password(make: Callable[..., Store]) -> None:
    with pytest.raises(StoreError) as failed:
        make("postgresql://admin:CANARY-pw-55@127.0.0.1:1/nowhere")
    assert "CANARY-pw-55" not in failed.value.message
    assert failed.value.message.startswith(
        "store postgresql+psycopg://admin:***@127.0.0.1:1/nowhere: reading the schema revision failed: "
        "OperationalError: connection failed"
    )


def test_audit_cli(
    make: Callable[..., Store], store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = filled(make, store_url, 6)
    monkeypatch.setenv("BACKFILLCTL_STORE_URL", store_url)
    assert main(["audit", "show", "--spec", "spec-1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["#2", "#5"]
    assert lines[0].endswith("alice create/intent spec=spec-1 dag=d — event 1")
    assert main(["audit", "export", "--format", "jsonl"]) == 0
    exported = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["seq"] for e in exported] == [1, 2, 3, 4, 5, 6]
    assert exported[5]["hash"] == store.verify().head_hash
    assert main(["audit", "verify"]) == 0
    assert capsys.readouterr().out.startswith("OK: 6 events, chain intact; head seq 6 hash ")
    sql(store, "UPDATE audit_events SET actor = 'mallory' WHERE seq = 3")
    assert main(["audit", "verify"]) == 1
    assert capsys.readouterr().out.startswith("INVALID at seq 3: seq 3 was modified after it was written\n")


def test_audit_show_tail_limit_and_an_age_for_since(
    make: Callable[..., Store], store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    now = datetime.now(UTC)
    moments = iter([now - timedelta(days=4), now - timedelta(hours=3), now - timedelta(minutes=90), now])
    store = make(store_url, clock=lambda: next(moments))
    for i in range(4):
        store.append(entry(i))
    monkeypatch.setenv("BACKFILLCTL_STORE_URL", store_url)

    def shown(*args: str) -> list[str]:
        assert main(["audit", "show", *args]) == 0
        return [line.split()[0] for line in capsys.readouterr().out.splitlines()]

    assert shown("--tail", "2") == ["#3", "#4"]  # the newest two, oldest first
    assert shown("--limit", "2") == ["#1", "#2"]
    assert shown("--since", "2h") == ["#3", "#4"]
    assert shown("--since", "3d") == ["#2", "#3", "#4"]
    assert shown("--since", "1w", "--tail", "1") == ["#4"]
    assert shown("--spec", "spec-0", "--tail", "5") == ["#1", "#4"]
    assert main(["audit", "show", "--since", "2y"]) == 2
    assert "'2y' is not a date, date-time or age; use e.g. 2025-01-31, 2025-01-31T12:00:00Z or 2h" in (
        capsys.readouterr().err
    )
    assert main(["audit", "show", "--tail", "1", "--limit", "1"]) == 2
    assert "--limit is the first N, --tail the last N: give one" in capsys.readouterr().err


def test_schema_head_constant_matches_the_migrations() -> None:
    script = ScriptDirectory(str(MIGRATIONS))
    assert script.get_current_head() == SCHEMA_HEAD
    assert {rev.revision for rev in script.walk_revisions()} == KNOWN_REVISIONS


def test_a_batch_is_one_transaction_all_or_nothing(tmp_path: Path) -> None:
    """Records of observations written in a batch commit once (1,000 adoptions after a lost store
    cost one fsync, not 2,000), and a failure inside the batch leaves none of them."""
    store = Store(f"sqlite:///{tmp_path}/state.db")
    commits: list[int] = []
    event.listen(store.engine, "commit", lambda _conn: commits.append(1))
    with store.batch("test"):
        for n in range(3):
            store.append(AuditEntry("observe", "observation", "ci", "0", spec_name=f"s{n}"))
    assert (len(commits), [e.entry.spec_name for e in store.events()]) == (1, ["s0", "s1", "s2"])

    def crash_midway() -> None:
        with store.batch("test"):
            store.append(AuditEntry("observe", "observation", "ci", "0", spec_name="lost"))
            raise RuntimeError("a crash in the middle of the batch")

    with pytest.raises(RuntimeError):
        crash_midway()
    assert [e.entry.spec_name for e in store.events()] == ["s0", "s1", "s2"]
    assert (store.verify().ok, store.verify().count) == (True, 3)
    store.close()


def test_a_specs_own_dates_and_reruns_round_trip_without_a_migration(
    make: Callable[..., Store], store_url: str
) -> None:
    """The recorded date ranges live in the binding's JSON detail (create facts, chunks), re-runs in its run
    counts: the same on SQLite and PostgreSQL, schema unchanged."""
    store = make(store_url)
    jan1 = datetime(2025, 1, 1, tzinfo=UTC)
    dates = compact([jan1 + timedelta(days=d) for d in (0, 2, 4, 5)])
    runs = RunSummary({"success": 3}, reruns=(Rerun(jan1, "spec b (#7)", "failed"),))
    chunk = Chunk(7, jan1, jan1 + timedelta(days=5), 4, 2, runs, dates)
    binding = Binding(
        "s",
        "d",
        7,
        Phase.COMPLETED_WITH_FAILURES,
        runs=runs,
        created=CreateFacts(4, 6, dates=dates, whole=False),
        backfills=(7,),
        progress=Progress(4, (chunk,)),
    )
    store.save_binding(binding)
    kept = store.bindings()["s"]
    assert (kept.created, kept.runs, kept.progress) == (binding.created, runs, binding.progress)
    assert kept.created is not None
    assert kept.created.own_dates == [
        jan1,
        jan1 + timedelta(days=2),
        jan1 + timedelta(days=4),
        jan1 + timedelta(days=5),
    ]
    assert store.revision() == SCHEMA_HEAD


def test_migration_0007_adds_the_pass_state_tables_and_downgrades_cleanly(
    make: Callable[..., Store], store_url: str
) -> None:
    store = make(store_url)
    assert store.revision() == "0011"
    tables = set(inspect(store.engine).get_table_names())
    assert {"analysis_state", "stops", "spec_index"} <= tables
    with store.engine.begin() as conn:
        _alembic(conn, "downgrade", "0006")
    assert not {"analysis_state", "stops", "spec_index", "stages"} & set(inspect(store.engine).get_table_names())
    with store.engine.begin() as conn:
        _alembic(conn, "upgrade", "head")
    assert store.revision() == "0011"


def test_migration_0008_adds_stages_and_a_stage_is_saved_read_and_updated_by_its_key(
    make: Callable[..., Store], store_url: str
) -> None:
    store = make(store_url)
    started = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    first = StageRecord("s", "staging", Stage.REHEARSAL, "k1", StageState.REHEARSING, started, backfill_ids=(7,))
    store.save_stage(first)
    store.save_stage(replace(first, key="k2"))
    passed = replace(first, state=StageState.PASSED, backfill_ids=(7, 8), run_id="r", metrics={"rows": 3})
    store.save_stage(passed)
    assert store.stage("s", "staging", Stage.REHEARSAL, "k1") == passed
    assert store.stage("s", "production", Stage.REHEARSAL, "k1") is None
    assert [r.key for r in store.stages_of("s")] == ["k1", "k2"]
    assert [r.state for r in store.stages()] == [StageState.PASSED, StageState.REHEARSING]
    with store.engine.begin() as conn:
        _alembic(conn, "downgrade", "0007")
    assert "stages" not in set(inspect(store.engine).get_table_names())


def test_every_binding_reads_back_as_it_does_alone_with_its_json_read_by_the_scanner(
    make: Callable[..., Store], store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A pass reads every binding (a history of specs): the JSON columns' texts go to the C scanner, one value
    each, not through `json.loads` (or the driver's) per row."""
    from controller.adapters.store import database  # noqa: PLC0415 - its scanner is counted

    store = make(store_url)
    runs = RunSummary({"success": 3, "failed": 1}, (T0,), never_started=1, mean_duration=12.5)
    names = [f"s{n:02d}" for n in range(12)]
    for n, name in enumerate(names):
        phase = Phase.SUCCEEDED if n % 2 else Phase.RUNNING
        store.save_binding(Binding(name, "d", 100 + n, phase, spec_digest=f"sha256:{n}", reason=f"r{n}", runs=runs))
    store.save_binding(replace(store.bindings()["s03"], runs=None))
    sql(store, "UPDATE bindings SET detail = NULL WHERE spec_name = 's05'")  # as the first schema left it
    scans, parses = _counted_json(monkeypatch, database)
    every = store.bindings()
    monkeypatch.undo()
    assert (len(scans), parses) == (12 + 11, [])  # run_counts (None is stored as JSON null), detail (one NULL)
    assert every == {name: store.binding(name) for name in names}
    kept = (every["s03"].runs, every["s04"].runs, every["s05"].reason, every["s05"].backfills)
    assert kept == (None, runs, "", (105,))  # no detail: the one backfill column stands for it


def test_json_texts_read_as_json_loads_reads_each_and_one_that_is_not_one_value_fails_as_it_does() -> None:
    from controller.adapters.store.database import decoded  # noqa: PLC0415

    texts = ['{"a": [1, 2]}', None, "null", '"x"', "3", ' {"b": 1}\n', "NaN"]
    assert decoded(texts) == [{"a": [1, 2]}, None, None, "x", 3, {"b": 1}, pytest.approx(float("nan"), nan_ok=True)]
    assert decoded([]) == []
    for bad, error in (
        (['{"a": 1}', "1,2"], "Extra data: line 1 column 2"),
        (['1,"', '"'], "Extra data: line 1 column 2"),  # two halves of a value: each is read alone, not joined
        (["1,[2", "3]"], "Extra data: line 1 column 2"),
        (["{}", ""], "Expecting value: line 1 column 1"),
        (['{"a":'], "Expecting value: line 1 column 6"),
    ):
        with pytest.raises(json.JSONDecodeError, match=re.escape(error)):
            decoded(bad)


def _counted_json(monkeypatch: pytest.MonkeyPatch, database: Any) -> tuple[list[str], list[str]]:
    """The texts the store's JSON scanner is given, and those `json.loads` is."""
    scans: list[str] = []
    parses: list[str] = []
    scan, loads = database._SCAN, json.loads
    monkeypatch.setattr(database, "_SCAN", lambda text, at: scans.append(text) or scan(text, at))
    monkeypatch.setattr(json, "loads", lambda text, **kw: parses.append(text) or loads(text, **kw))
    return scans, parses


def test_the_spec_index_reads_back_what_was_indexed_with_its_facts_read_by_the_scanner(
    make: Callable[..., Store], store_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from controller.adapters.store import IndexedSpec, database  # noqa: PLC0415

    store = make(store_url)
    rows = [
        IndexedSpec(f"blob{n}", f"specs/s{n}.yaml", f"s{n}", "d", f"sha256:{n}", "Succeeded", {"name": f"s{n}"},
                    1_600_000_000 + n if n % 2 else None, f"dev{n}@example.com", None if n == 3 else f"c{n}")
        for n in range(6)
    ]  # fmt: skip
    store.index_specs(rows, {r.blob_id for r in rows})
    scans, parses = _counted_json(monkeypatch, database)
    kept = store.indexed_specs()
    monkeypatch.undo()
    assert (len(scans), parses, kept) == (6, [], {r.blob_id: r for r in rows})
