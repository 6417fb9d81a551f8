"""Issue 21 (items 11-13): the audit log against someone with write access to the store.

Each test fails on the code before the fix: a BLOB `message` or `request` made verify, show and export exit 3
(TypeError), a non-JSON `request` made show and export exit 3 (JSONDecodeError), rows with seq ≤ 0 were
invisible, a dropped alembic_version read as "no store", `--expect-head ''` said TRUNCATED, and a record
appended with a recomputed hash verified OK, even with `--expect-head` (the chain had no key).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import insert, text

from controller.adapters.store import Store
from controller.adapters.store.audit_log import _row
from controller.adapters.store.database import SCHEMA_HEAD, _alembic
from controller.adapters.store.tables import audit_events
from controller.cli import main
from controller.commands.runtime.settings import Settings
from controller.commands.verbs import audit as audit_cmd
from controller.core.audit.chain import GENESIS, AuditEntry, AuditRecord, ChainProblem, record_mac, seal
from controller.core.audit.keying import key_id
from controller.core.model.secret import Secret
from controller.errors import StoreError

KEY = "k3y-" * 8  # 32 bytes
NOT_KEYED = (
    "  not keyed: BACKFILLCTL_AUDIT_KEY is not set, so a record appended with a recomputed hash by anyone with "
    "write access to the store cannot be detected"
)
SKIPPED = "skipped (run `backfillctl audit verify`)"
KEY_ID = key_id(KEY.encode())
UNKEYED_WITH_KEY = (
    "seq 1 carries no MAC, nor does any record, but BACKFILLCTL_AUDIT_KEY is set: a chain written with the key "
    "carries MACs from seq 1 or from an `audit adopt-key` record (a chain stripped of its MACs looks like this); if "
    "this chain was never keyed, check it and run `backfillctl audit adopt-key`"
)
NOT_KEYED_TAIL = (
    "store {url}: the audit chain is not keyed (seq {seq}, its newest record, carries no MAC) and "
    "BACKFILLCTL_AUDIT_KEY is set: a writer with the key continues only a keyed chain, so nothing was written"
)


def entry(i: int) -> AuditEntry:
    return AuditEntry("create", "intent", "alice", "0.1.0", spec_name="s", dag_id="d", message=f"event {i}")


def sql(store: Store, statement: str, **params: object) -> None:
    with store.engine.begin() as conn:
        conn.execute(text(statement), params)


def shown(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


def use(monkeypatch: pytest.MonkeyPatch, url: str, key: str | None = None) -> None:
    monkeypatch.setenv("BACKFILLCTL_STORE_URL", url)
    if key is None:
        monkeypatch.delenv("BACKFILLCTL_AUDIT_KEY", raising=False)
    else:
        monkeypatch.setenv("BACKFILLCTL_AUDIT_KEY", key)


def forge(store: Store, record: AuditRecord) -> None:
    """What someone with write access can do: insert a row whose hash they computed themselves."""
    with store.engine.begin() as conn:
        conn.execute(insert(audit_events).values(**_row(record)))


def three(make: Callable[..., Store], url: str, key: str | None = None) -> tuple[Store, list[AuditRecord]]:
    store = make(url, audit_key=None if key is None else Secret(key))
    return store, [store.append(entry(i)) for i in (1, 2, 3)]


# --- item 11: a tampered row is reported, not a crash --------------------------------------------------------


@pytest.mark.parametrize(
    ("column", "value", "verify_line", "show_reason"),
    [
        ("message", b"hi", "INVALID at seq 2: seq 2 cannot be read: message holds a BLOB, not text", None),
        ("request", b"{}", "INVALID at seq 2: seq 2 cannot be read: request holds a BLOB, not JSON text", None),
        ("request", "not json", "INVALID at seq 2: seq 2 was modified after it was written", "request is not JSON"),
    ],
    ids=["blob-message", "blob-request", "non-json-request"],
)
def test_a_tampered_sqlite_row_is_reported_with_its_seq(
    make: Callable[..., Store],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    column: str,
    value: object,
    verify_line: str,
    show_reason: str | None,
) -> None:
    url = f"sqlite:///{tmp_path}/state.db"
    store, records = three(make, url)
    sql(store, f"UPDATE audit_events SET {column} = :v WHERE seq = 2", v=value)
    use(monkeypatch, url)
    assert main(["audit", "verify"]) == 1
    out = capsys.readouterr().out
    assert out == f"{verify_line}\n  verified 1 events before it; last good seq 1 hash {records[0].hash}\n"
    reason = show_reason or verify_line.split("cannot be read: ")[1]
    error = f"error: audit record seq 2 is unreadable: {reason}; {SKIPPED}\n"
    summary = "error: 1 unreadable audit record(s) skipped: the store was edited outside backfillctl\n"
    assert main(["audit", "show"]) == 1
    shown_ = capsys.readouterr()
    assert [line.split()[0] for line in shown_.out.splitlines()] == ["#1", "#3"]
    assert shown_.err == error + summary
    assert main(["audit", "show", "--format", "json"]) == 1
    assert [json.loads(line)["seq"] for line in capsys.readouterr().out.splitlines()] == [1, 3]
    assert main(["audit", "export", "--format", "jsonl"]) == 1
    exported = capsys.readouterr()
    assert [json.loads(line)["hash"] for line in exported.out.splitlines()] == [records[0].hash, records[2].hash]
    assert exported.err == error + summary
    with pytest.raises(StoreError) as report:
        audit_cmd.spec_record(Settings(store_url=url), "s")
    assert report.value.message == f"audit record seq 2 is unreadable: {reason}"


# --- item 13: rows outside the sequence, a lost version table ------------------------------------------------


def test_rows_below_seq_1_are_errors_not_invisible(
    make: Callable[..., Store], store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store, records = three(make, store_url)
    forge(store, seal(0, records[0].time, entry(0), GENESIS))
    forge(store, seal(-7, records[0].time, entry(-7), GENESIS))
    use(monkeypatch, store_url)
    assert main(["audit", "verify"]) == 1
    assert capsys.readouterr().out == (
        "INVALID at seq -7: seq -7 is outside the chain, which starts at seq 1: a row added by hand\n"
        f"  verified 0 events before it; last good seq 0 hash {GENESIS}\n"
    )
    assert main(["audit", "export"]) == 1
    exported = capsys.readouterr()
    assert [json.loads(line)["seq"] for line in exported.out.splitlines()] == [1, 2, 3]
    assert exported.err.splitlines() == [
        f"error: audit record seq {seq} is unreadable: its seq is outside the chain, which starts at seq 1: "
        f"a row added by hand; {SKIPPED}"
        for seq in (-7, 0)
    ] + ["error: 2 unreadable audit record(s) skipped: the store was edited outside backfillctl"]
    assert main(["audit", "show", "--spec", "s"]) == 1
    assert capsys.readouterr().err.count("is unreadable: its seq is outside the chain") == 2


def test_a_store_without_its_version_table_says_so(
    make: Callable[..., Store], store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store, _ = three(make, store_url)
    sql(store, "DROP TABLE alembic_version")
    use(monkeypatch, store_url)
    expected = (
        f"error: the store at {shown(store_url)} has audit tables but no schema version: its alembic_version table "
        "is missing (dropped, or not restored with the rest)\n"
        "  hint: restore the store from a backup; or, if you know the revision it was at (this backfillctl writes "
        f"{SCHEMA_HEAD}), recreate the table by hand: CREATE TABLE alembic_version (version_num VARCHAR(32) NOT "
        f"NULL PRIMARY KEY); INSERT INTO alembic_version VALUES ('{SCHEMA_HEAD}'); then run `backfillctl audit "
        "verify`\n"
    )
    for command in (["audit", "verify"], ["audit", "show"], ["audit", "export"], ["store", "migrate"]):
        assert main(command) == 1
        assert capsys.readouterr().err == expected
    sql(store, "CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)")
    sql(store, f"INSERT INTO alembic_version VALUES ('{SCHEMA_HEAD}')")
    assert main(["audit", "verify"]) == 0


# --- item 12 (part): a malformed --expect-head -------------------------------------------------------------


@pytest.mark.parametrize("value", ["", "abc", "A" * 64, "g" * 64, "a" * 65], ids=repr)
def test_expect_head_must_be_a_hash(
    make: Callable[..., Store],
    store_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    value: str,
) -> None:
    three(make, store_url)
    use(monkeypatch, store_url)
    assert main(["audit", "verify", "--expect-head", value]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines()[-1] == (
        f"Error: Invalid value for '--expect-head': {value!r} is not a hash: give the 64 lowercase hex digits "
        "that `audit verify` printed after 'hash'"
    )


# --- item 13: the keyed chain ------------------------------------------------------------------------------


def test_an_unkeyed_chain_says_appended_records_cannot_be_detected(
    make: Callable[..., Store], store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store, records = three(make, store_url)
    forged = seal(4, records[2].time, entry(99), records[2].hash)
    forge(store, forged)
    use(monkeypatch, store_url)
    assert main(["audit", "verify", "--expect-head", forged.hash]) == 0
    assert capsys.readouterr().out == (f"OK: 4 events, chain intact; head seq 4 hash {forged.hash}\n{NOT_KEYED}\n")


def test_a_keyed_chain_rejects_appended_and_rewritten_records(
    make: Callable[..., Store], store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store, records = three(make, store_url, KEY)
    assert [r.mac for r in records] == [record_mac(KEY.encode(), r.hash) for r in records]
    with store.engine.connect() as conn:
        assert conn.execute(text("SELECT mac FROM audit_events ORDER BY seq")).scalars().all() == [
            r.mac for r in records
        ]
    use(monkeypatch, store_url, KEY)
    assert main(["audit", "verify", "--expect-head", records[2].hash]) == 0
    assert capsys.readouterr().out == (
        f"OK: 3 events, chain intact; head seq 3 hash {records[2].hash}\n"
        "  keyed from seq 1: every record from it on carries a MAC made with BACKFILLCTL_AUDIT_KEY\n"
    )
    forged = seal(4, records[2].time, entry(99), records[2].hash)
    forge(store, forged)
    assert main(["audit", "verify", "--expect-head", forged.hash]) == 1
    assert capsys.readouterr().out.splitlines()[0] == (
        "UNKEYED at seq 4: seq 4 carries no MAC, but the chain is keyed from seq 1: added without the key"
    )
    sql(store, "UPDATE audit_events SET mac = :m WHERE seq = 4", m="0" * 64)
    assert main(["audit", "verify", "--expect-head", forged.hash]) == 1
    assert capsys.readouterr().out.splitlines()[0] == (
        "FORGED at seq 4: seq 4 was not made with BACKFILLCTL_AUDIT_KEY: its MAC does not match (appended, "
        "rewritten or re-hashed without the key, or written with another key)"
    )
    use(monkeypatch, store_url)  # without the key the forged MAC cannot be told apart, and verify says so
    assert main(["audit", "verify"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == f"{NOT_KEYED}; the MACs of seq 1 to 4 were not checked"
    sql(store, "DELETE FROM audit_events WHERE seq = 4")
    rewritten = seal(3, records[2].time, entry(42), records[1].hash, b"another key of thirty-two bytes!")
    sql(store, "DELETE FROM audit_events WHERE seq = 3")
    forge(store, rewritten)
    use(monkeypatch, store_url, KEY)
    assert main(["audit", "verify"]) == 1
    assert capsys.readouterr().out.startswith("FORGED at seq 3: seq 3 was not made with BACKFILLCTL_AUDIT_KEY")


def test_appends_continue_a_keyed_chain_only_with_its_key(make: Callable[..., Store], store_url: str) -> None:
    three(make, store_url, KEY)
    with pytest.raises(StoreError) as unkeyed:
        make(store_url).append(entry(4))
    assert unkeyed.value.message == (
        f"store {shown(store_url)}: the audit chain is keyed (seq 3 carries a MAC) and BACKFILLCTL_AUDIT_KEY is "
        "not set: a record without a MAC would break it"
    )
    with pytest.raises(StoreError) as other:
        make(store_url, audit_key=Secret("x" * 32)).append(entry(4))
    assert other.value.message == (
        f"store {shown(store_url)}: the last audit record (seq 3) carries a MAC that BACKFILLCTL_AUDIT_KEY did not "
        "make: the key is not the one the chain was written with, or the record was added without the key"
    )
    keyed = make(store_url, audit_key=Secret(KEY))
    assert keyed.append(entry(4)).seq == 4
    assert (keyed.verify().ok, keyed.verify().count, keyed.verify().keyed_from) == (True, 4, 1)


def test_records_from_before_the_key_and_the_migration_are_adopted_and_keep_verifying(
    make: Callable[..., Store], store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    old = make(store_url, migrate=False)
    with old.engine.begin() as conn:
        _alembic(conn, "upgrade", "0005")
    prev = GENESIS
    for seq in (1, 2):  # rows as 0005 wrote them: no mac column
        record = seal(seq, "2026-01-01T00:00:00.000000Z", entry(seq), prev)
        row = {k: v for k, v in _row(record).items() if k != "mac"}
        with old.engine.begin() as conn:
            conn.execute(insert(audit_events).values(**row))
        prev = record.hash
    store = make(store_url, audit_key=Secret(KEY))  # migrates to the head
    assert store.revision() == SCHEMA_HEAD == "0011"
    assert store.verify().problem == ChainProblem(1, "UNKEYED", UNKEYED_WITH_KEY)
    with pytest.raises(StoreError) as refused:  # a keyed writer does not key an unkeyed chain by itself
        store.append(entry(3))
    assert refused.value.message == NOT_KEYED_TAIL.format(url=shown(store_url), seq=2)
    use(monkeypatch, store_url, KEY)
    monkeypatch.setenv("BACKFILLCTL_ACTOR", "carol")
    assert main(["audit", "adopt-key"]) == 0
    assert capsys.readouterr().out == (
        f"adopted the audit key {KEY_ID} at seq 3: seq 1 to 2, written without a key, are pinned by its MAC\n"
        "  from now on every writer (reconcile, stop, store unlock) needs BACKFILLCTL_AUDIT_KEY, and `backfillctl "
        "audit verify` with it checks every record from this one on\n"
    )
    fourth = store.append(entry(4))
    assert main(["audit", "verify"]) == 0
    adopted = next(r for r in store.events() if isinstance(r, AuditRecord) and r.seq == 3)
    assert (adopted.entry.action, adopted.entry.outcome, adopted.entry.actor) == ("audit-key", "adopted", "carol")
    assert capsys.readouterr().out == (
        f"OK: 4 events, chain intact; head seq 4 hash {fourth.hash}\n"
        "  keyed from seq 3: every record from it on carries a MAC made with BACKFILLCTL_AUDIT_KEY; seq 1 to 2 "
        "predate the key and are pinned by the MAC of seq 3\n"
        f"  key {KEY_ID} adopted at seq 3 by carol at {adopted.time}\n"
    )
    with old.engine.begin() as conn:  # a downgrade drops the MACs: the adoption record without its MAC says so
        _alembic(conn, "downgrade", "0005")
        _alembic(conn, "upgrade", "head")
    assert store.verify().problem == ChainProblem(
        3,
        "UNKEYED",
        "seq 3 adopted the audit key but carries no MAC: its MAC was removed (a keyed chain stripped of its MACs)",
    )


@pytest.mark.parametrize("key", ["short-CANARY-secret", "é" * 15 + "C"])  # 19 and 31 bytes
def test_a_short_key_is_refused_naming_the_variable_not_the_value(
    make: Callable[..., Store],
    store_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    key: str,
) -> None:
    three(make, store_url, "é" * 16)
    use(monkeypatch, store_url, key)
    assert main(["audit", "verify"]) == 1
    captured = capsys.readouterr()
    assert (captured.out, captured.err) == (
        "",
        "error: BACKFILLCTL_AUDIT_KEY is shorter than 32 bytes\n"
        "  hint: use a random secret of at least 32 bytes, e.g. `python -c 'import secrets; "
        "print(secrets.token_hex(32))'`, kept in your secret store\n",
    )
    use(monkeypatch, store_url, "é" * 16)  # 32 bytes: long enough
    assert main(["audit", "verify"]) == 0
