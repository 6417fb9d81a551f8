"""The audit key cannot be adopted or lost silently (DESIGN §5): a chain becomes keyed only by `audit adopt-key`, a
keyed writer refuses an unkeyed tail, `audit rotate-key` changes the key without a new store, and `audit verify`
takes the set of keys.

On the code before this change a keyed reconciler keyed any unkeyed tail without a word (so a chain stripped of its
MACs, edited and re-sealed verified as "pinned" and OK once the next keyed pass ran), `audit verify` with the key
said OK and "not keyed yet" for a stripped chain, and there was no way to change the key but a new store.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from sqlalchemy import insert, text

from controller.adapters.store import Store
from controller.adapters.store.audit_log import _row
from controller.adapters.store.tables import audit_events
from controller.cli import main
from controller.core.audit.chain import GENESIS, AuditEntry, AuditRecord, record_mac, seal
from controller.core.audit.keying import key_id, rotation_mac
from controller.core.model.secret import Secret
from controller.errors import StoreError
from tests.commands.reconcile.harness import Bench, fake, in_process
from tests.fakes.airflow import FakeAirflow

OLD = "old-audit-key-" * 3  # 42 bytes
NEW = "new-audit-key-" * 3
THIRD = "third-audit-key-" * 2
OLD_ID, NEW_ID, THIRD_ID = key_id(OLD.encode()), key_id(NEW.encode()), key_id(THIRD.encode())


def entry(i: int, message: str | None = None, action: str = "create") -> AuditEntry:
    return AuditEntry(action, "intent", "alice", "0.1.0", spec_name=f"s{i}", dag_id="d", message=message or f"e{i}")


def keys(monkeypatch: pytest.MonkeyPatch, url: str, key: str | None, previous: str | None = None) -> None:
    monkeypatch.setenv("BACKFILLCTL_STORE_URL", url)
    monkeypatch.setenv("BACKFILLCTL_ACTOR", "carol")
    for name, value in (("BACKFILLCTL_AUDIT_KEY", key), ("BACKFILLCTL_AUDIT_KEYS_PREVIOUS", previous)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)


def shown(url: str) -> str:
    return url.replace("postgresql://", "postgresql+psycopg://", 1)


def rows(store: Store) -> list[AuditRecord]:
    return [r for r in store.events() if isinstance(r, AuditRecord)]


def reseal(store: Store, records: list[AuditRecord], key: bytes | None = None) -> list[AuditRecord]:
    """What someone with write access does: delete every row and write the given records again, chained anew."""
    sealed, prev = [], GENESIS
    for seq, record in enumerate(records, 1):
        sealed.append(seal(seq, record.time, record.entry, prev, key))
        prev = sealed[-1].hash
    with store.engine.begin() as conn:
        conn.execute(text("DELETE FROM audit_events"))
        for record in sealed:
            conn.execute(insert(audit_events).values(**_row(record)))
    return sealed


# --- a keyed writer and an unkeyed chain ---------------------------------------------------------------------


@pytest.fixture
def bench(tmp_path: Path, store_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[Bench]:
    made = Bench(tmp_path, fake=FakeAirflow(), store_url=store_url)
    in_process(made, monkeypatch)
    monkeypatch.delenv("BACKFILLCTL_AUDIT_KEY", raising=False)
    yield made
    made.close()


def test_a_keyed_reconciler_refuses_an_unkeyed_chain_until_audit_adopt_key(
    bench: Bench, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bench.spec("first")
    assert main(["reconcile", "--once"]) == 0
    unkeyed = rows(bench.store)
    assert [r.mac for r in unkeyed] == [None] * len(unkeyed)
    head = unkeyed[-1]
    bench.spec("second", dag="demo_hourly")
    monkeypatch.setenv("BACKFILLCTL_AUDIT_KEY", NEW)
    capsys.readouterr()
    assert main(["reconcile", "--once"]) == 1
    assert capsys.readouterr().err.endswith(
        f"error: store {shown(bench.store_url)}: the audit chain is not keyed (seq {head.seq}, its newest record, "
        "carries no MAC) and BACKFILLCTL_AUDIT_KEY is set: a writer with the key continues only a keyed chain, so "
        "nothing was written\n"
        "  hint: if this chain was never keyed, check it (`backfillctl audit verify` without the key) and adopt the "
        "key: `backfillctl audit adopt-key`; if it was keyed, its MACs were removed: restore the store from a backup\n"
    )
    assert len(fake(bench).backfills) == 1  # nothing created without its audit record
    assert [r.hash for r in rows(bench.store)] == [r.hash for r in unkeyed]
    assert main(["audit", "verify"]) == 1
    assert capsys.readouterr().out.startswith("UNKEYED at seq 1: seq 1 carries no MAC, nor does any record")
    monkeypatch.setenv("BACKFILLCTL_ACTOR", "carol")
    assert main(["audit", "adopt-key", "--expect-head", head.hash]) == 0
    adoption = head.seq + 1
    assert capsys.readouterr().out.splitlines()[0] == (
        f"adopted the audit key {NEW_ID} at seq {adoption}: seq 1 to {head.seq}, written without a key, are pinned by "
        "its MAC"
    )
    assert main(["reconcile", "--once"]) == 0
    assert len(fake(bench).backfills) == 2
    after = rows(bench.store)
    assert [r.mac is not None for r in after] == [r.seq >= adoption for r in after]
    record = after[adoption - 1]
    assert (record.entry.action, record.entry.phase, record.entry.outcome) == ("audit-key", "outcome", "adopted")
    assert (record.entry.actor, record.entry.request) == ("carol", {"audit_key": {"key_id": NEW_ID}})
    capsys.readouterr()
    assert main(["audit", "verify"]) == 0
    assert capsys.readouterr().out == (
        f"OK: {len(after)} events, chain intact; head seq {after[-1].seq} hash {after[-1].hash}\n"
        f"  keyed from seq {adoption}: every record from it on carries a MAC made with BACKFILLCTL_AUDIT_KEY; seq 1 "
        f"to {head.seq} predate the key and are pinned by the MAC of seq {adoption}\n"
        f"  key {NEW_ID} adopted at seq {adoption} by carol at {record.time}\n"
    )


def test_every_writer_refuses_an_unkeyed_tail_and_an_empty_store_starts_keyed(
    make: Callable[..., Store], store_url: str
) -> None:
    fresh = make(store_url, audit_key=Secret(NEW))
    assert fresh.append(entry(1)).mac == record_mac(NEW.encode(), rows(fresh)[0].hash)  # no adoption at seq 1
    assert fresh.verify().adoption is None
    assert fresh.verify().ok
    with fresh.engine.begin() as conn:
        conn.execute(text("UPDATE audit_events SET mac = NULL"))
    for kind in ("intent", "outcome", "observation"):  # an intent runs the fences first: refused all the same
        with pytest.raises(StoreError) as refused:
            fresh.append(replace(entry(2), phase=kind))
        assert "the audit chain is not keyed (seq 1, its newest record, carries no MAC)" in refused.value.message
    assert len(rows(fresh)) == 1


@pytest.mark.parametrize("where", ["keyed-from-seq-1", "adopted"])
def test_a_keyed_chain_stripped_of_its_macs_and_resealed_with_edits_fails_verify_with_the_key(
    make: Callable[..., Store],
    store_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    where: str,
) -> None:
    if where == "adopted":
        make(store_url).append(entry(1))
        keys(monkeypatch, store_url, NEW)
        assert main(["audit", "adopt-key"]) == 0
    store = make(store_url, audit_key=Secret(NEW))
    for i in (2, 3, 4):
        store.append(entry(i, action="create" if i != 3 else "pause"))
    keys(monkeypatch, store_url, NEW)
    capsys.readouterr()
    assert main(["audit", "verify"]) == 0
    capsys.readouterr()
    # the forgery: every MAC stripped, a create deleted, an intent reworded, everything re-sealed without a key
    kept = [r for r in rows(store) if r.entry.spec_name != "s2"]
    kept = [
        replace(r, entry=replace(r.entry, message="nothing to see")) if r.entry.action == "pause" else r for r in kept
    ]
    forged = reseal(store, kept)
    assert main(["audit", "verify"]) == 1
    if where == "adopted":  # the adoption record has lost its MAC: seen even without the key
        line = "UNKEYED at seq 2: seq 2 adopted the audit key but carries no MAC: its MAC was removed (a keyed chain "
        expected = [
            line + "stripped of its MACs)",
            f"  verified 1 events before it; last good seq 1 hash {forged[0].hash}",
        ]
        assert capsys.readouterr().out.splitlines() == expected
        keys(monkeypatch, store_url, None)
        assert main(["audit", "verify"]) == 1
        assert capsys.readouterr().out.splitlines() == expected
        return
    assert capsys.readouterr().out.splitlines() == [
        "UNKEYED at seq 1: seq 1 carries no MAC, nor does any record, but BACKFILLCTL_AUDIT_KEY is set: a chain "
        "written with the key carries MACs from seq 1 or from an `audit adopt-key` record (a chain stripped of its "
        "MACs looks like this); if this chain was never keyed, check it and run `backfillctl audit adopt-key`",
        f"  verified 0 events before it; last good seq 0 hash {GENESIS}",
    ]
    with pytest.raises(StoreError):  # and the next keyed pass does not key the forged tail
        store.append(entry(5))
    # a writer that keyed it anyway (a backfillctl before this change): keying starts after seq 1, unadopted
    late = seal(len(forged) + 1, forged[-1].time, entry(5), forged[-1].hash, NEW.encode())
    with store.engine.begin() as conn:
        conn.execute(insert(audit_events).values(**_row(late)))
    assert main(["audit", "verify"]) == 1
    assert capsys.readouterr().out.splitlines()[0] == (
        f"UNADOPTED at seq {late.seq}: seq {late.seq} is the first record with a MAC and no `audit adopt-key` record: "
        f"seq 1 to {late.seq - 1} were written without a key, and a chain becomes keyed only by `backfillctl audit "
        "adopt-key` (a chain stripped of its MACs, edited, and then keyed looks like this)"
    )


def test_adopt_key_refuses_what_it_must_not_vouch_for(
    make: Callable[..., Store], store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = make(store_url)
    records = [store.append(entry(i)) for i in (1, 2)]
    keys(monkeypatch, store_url, None)
    assert main(["audit", "adopt-key"]) == 1
    assert capsys.readouterr().err == (
        "error: audit adopt-key needs BACKFILLCTL_AUDIT_KEY: the key to adopt\n"
        "  hint: a random secret of at least 32 bytes, e.g. `python -c 'import secrets; print(secrets.token_hex(32))'"
        "`, kept in your secret store\n"
    )
    keys(monkeypatch, store_url, NEW)
    assert main(["audit", "adopt-key", "--expect-head", "a" * 64]) == 1
    assert capsys.readouterr().err == (
        f"error: store {shown(store_url)}: the audit chain does not verify (TRUNCATED at seq 3: the expected head "
        f"{'a' * 64} is not in the chain, which ends at seq 2), so nothing was written: adopting a key would vouch "
        "for it\n"
        "  hint: see `backfillctl audit verify`; restore the store from a backup if it was tampered with\n"
    )
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE audit_events SET message = 'edited' WHERE seq = 1"))
    assert main(["audit", "adopt-key", "--expect-head", records[1].hash]) == 1
    assert "(INVALID at seq 1: seq 1 was modified after it was written)" in capsys.readouterr().err
    with store.engine.begin() as conn:
        conn.execute(text("UPDATE audit_events SET message = 'e1' WHERE seq = 1"))
    assert main(["audit", "adopt-key", "--expect-head", records[1].hash]) == 0
    capsys.readouterr()
    for key in (NEW, OLD):
        keys(monkeypatch, store_url, key)
        assert main(["audit", "adopt-key"]) == 1
        assert capsys.readouterr().err == (
            f"error: store {shown(store_url)}: the audit chain is keyed already, from seq 3: a chain adopts a key "
            "once\n"
            "  hint: `backfillctl audit verify` checks it with the key; `backfillctl audit rotate-key` changes it\n"
        )
    assert len(rows(store)) == 3


# --- rotation ------------------------------------------------------------------------------------------------


def rotated(
    make: Callable[..., Store], store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> tuple[Store, AuditRecord]:
    """Three records under OLD, `audit rotate-key` to NEW (seq 4), one more record under NEW (seq 5)."""
    old = make(store_url, audit_key=Secret(OLD))
    for i in (1, 2, 3):
        old.append(entry(i))
    keys(monkeypatch, store_url, NEW, OLD)
    assert main(["audit", "rotate-key"]) == 0
    assert capsys.readouterr().out == (
        f"rotated the audit key at seq 4: {OLD_ID} → {NEW_ID}; this record carries the MACs of both\n"
        "  set BACKFILLCTL_AUDIT_KEY to the new key for every writer now: one with the old key refuses to append; "
        "keep the old key in BACKFILLCTL_AUDIT_KEYS_PREVIOUS to check the records before seq 4 too (without it they "
        "are pinned by this record's MAC)\n"
    )
    with pytest.raises(StoreError) as stale:
        old.append(entry(5))
    assert stale.value.message == (
        f"store {shown(store_url)}: the last audit record (seq 4) carries a MAC that BACKFILLCTL_AUDIT_KEY did not "
        "make: the key is not the one the chain was written with, or the record was added without the key"
    )
    new = make(store_url, audit_key=Secret(NEW))
    new.append(entry(5))
    rotation = rows(new)[3]
    return new, rotation


def test_rotate_key_writes_a_record_both_keys_vouch_for_and_the_chain_goes_on_under_the_new_key(
    make: Callable[..., Store], store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store, rotation = rotated(make, store_url, monkeypatch, capsys)
    before = rows(store)[2]
    assert (rotation.entry.action, rotation.entry.outcome, rotation.entry.actor) == ("audit-key", "rotated", "carol")
    assert rotation.entry.request == {
        "audit_key": {
            "key_id": NEW_ID,
            "previous_key_id": OLD_ID,
            "previous_key_mac": rotation_mac(OLD.encode(), before.hash, NEW_ID),
        }
    }
    assert rotation.mac == record_mac(NEW.encode(), rotation.hash)
    assert [r.mac == record_mac(OLD.encode(), r.hash) for r in rows(store)] == [True, True, True, False, False]
    head = rows(store)[-1]
    assert main(["audit", "verify"]) == 0  # both keys: every MAC checked
    assert capsys.readouterr().out == (
        f"OK: 5 events, chain intact; head seq 5 hash {head.hash}\n"
        "  keyed from seq 1: every record from it on carries a MAC, from seq 4 (the last rotation) on made with "
        "BACKFILLCTL_AUDIT_KEY, those before it a previous key's, checked with BACKFILLCTL_AUDIT_KEYS_PREVIOUS\n"
        f"  key rotated at seq 4 by carol at {rotation.time}: {OLD_ID} → {NEW_ID}, the old key's MAC in it checked\n"
    )
    keys(monkeypatch, store_url, NEW)  # the new key alone: the rotation's MAC pins what came before
    assert main(["audit", "verify"]) == 0
    assert capsys.readouterr().out == (
        f"OK: 5 events, chain intact; head seq 5 hash {head.hash}\n"
        "  keyed from seq 1: every record from it on carries a MAC, from seq 4 (the last rotation) on made with "
        "BACKFILLCTL_AUDIT_KEY, those before seq 4 a key not given, so their MACs were not checked: they are pinned "
        "by the MAC of seq 4\n"
        f"  key rotated at seq 4 by carol at {rotation.time}: {OLD_ID} → {NEW_ID}, the old key's MAC in it not "
        "checked (that key was not given)\n"
    )
    keys(monkeypatch, store_url, OLD)  # the old key alone: told to set the new one
    assert main(["audit", "verify"]) == 1
    assert capsys.readouterr().out.splitlines()[0] == (
        f"UNKNOWN_KEY at seq 4: seq 4 rotated the audit key to key {NEW_ID}, which is none of the keys given: set "
        "BACKFILLCTL_AUDIT_KEY to the current key (and the earlier ones in BACKFILLCTL_AUDIT_KEYS_PREVIOUS)"
    )
    keys(monkeypatch, store_url, OLD, NEW)  # swapped
    assert main(["audit", "verify"]) == 1
    assert capsys.readouterr().out.splitlines()[0] == (
        f"OLD_KEY at seq 4: the records from seq 4 on carry the MACs of key {NEW_ID} from "
        "BACKFILLCTL_AUDIT_KEYS_PREVIOUS, not of BACKFILLCTL_AUDIT_KEY: no record rotates the chain to the current "
        "key (records cut off after a rotation and replaced, or the two variables swapped)"
    )
    keys(monkeypatch, store_url, THIRD, f"{NEW}\n{OLD}\n")  # a second rotation: the previous keys one a line
    assert main(["audit", "rotate-key"]) == 0
    capsys.readouterr()
    assert main(["audit", "verify"]) == 0
    assert capsys.readouterr().out.splitlines()[2:] == [
        f"  key rotated at seq 4 by carol at {rotation.time}: {OLD_ID} → {NEW_ID}, the old key's MAC in it checked",
        f"  key rotated at seq 6 by carol at {rows(store)[5].time}: {NEW_ID} → {THIRD_ID}, the old key's MAC in it "
        "checked",
    ]


def test_a_rotation_is_not_forged_with_a_leaked_old_key(
    make: Callable[..., Store], store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store, rotation = rotated(make, store_url, monkeypatch, capsys)
    records = rows(store)
    # someone with the old key and write access cuts the chain at the rotation and goes on under the old key
    with store.engine.begin() as conn:
        conn.execute(text("DELETE FROM audit_events WHERE seq >= 4"))
    appended = seal(4, rotation.time, entry(9, "forged"), records[2].hash, OLD.encode())
    with store.engine.begin() as conn:
        conn.execute(insert(audit_events).values(**_row(appended)))
    keys(monkeypatch, store_url, NEW, OLD)
    assert main(["audit", "verify"]) == 1
    assert capsys.readouterr().out.splitlines()[0].startswith("OLD_KEY at seq 1: the records from seq 1 on carry the")
    keys(monkeypatch, store_url, NEW)
    assert main(["audit", "verify"]) == 1
    assert capsys.readouterr().out.splitlines()[0] == (
        "FORGED at seq 1: seq 1 was not made with BACKFILLCTL_AUDIT_KEY: its MAC does not match (appended, rewritten "
        "or re-hashed without the key, or written with another key)"
    )
    # or rotates to a key of their own: the old key signs it, but the current key did not make its MAC
    with store.engine.begin() as conn:
        conn.execute(text("DELETE FROM audit_events WHERE seq >= 4"))
    from controller.core.audit.keying import rotation_entry  # noqa: PLC0415

    theirs = seal(
        4,
        rotation.time,
        rotation_entry("mallory", OLD.encode(), THIRD.encode(), records[2].hash, 4),
        records[2].hash,
        THIRD.encode(),
    )
    with store.engine.begin() as conn:
        conn.execute(insert(audit_events).values(**_row(theirs)))
    keys(monkeypatch, store_url, NEW, OLD)
    assert main(["audit", "verify"]) == 1
    assert (
        capsys.readouterr()
        .out.splitlines()[0]
        .startswith(f"UNKNOWN_KEY at seq 4: seq 4 rotated the audit key to key {THIRD_ID}")
    )
    # and a rotation record whose old-key MAC was not made with the old key
    facts = dict(json.loads(json.dumps(rotation.entry.request))["audit_key"], previous_key_mac="0" * 64)
    bad = seal(4, rotation.time, replace(rotation.entry, request={"audit_key": facts}), records[2].hash, NEW.encode())
    with store.engine.begin() as conn:
        conn.execute(text("DELETE FROM audit_events WHERE seq >= 4"))
        conn.execute(insert(audit_events).values(**_row(bad)))
    assert main(["audit", "verify"]) == 1
    assert capsys.readouterr().out.splitlines()[0] == (
        f"FORGED at seq 4: seq 4 rotates the audit key, but key {OLD_ID}, which made the records before it, did not "
        "sign the rotation: its previous-key MAC does not match"
    )


def test_rotate_key_refuses_without_the_old_key_or_a_new_one(
    make: Callable[..., Store], store_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = make(store_url, audit_key=Secret(OLD))
    store.append(entry(1))
    cases = [
        (
            (NEW, None),
            "error: audit rotate-key needs the chain's key in BACKFILLCTL_AUDIT_KEYS_PREVIOUS (and the new one in "
            "BACKFILLCTL_AUDIT_KEY)\n"
            '  hint: e.g. BACKFILLCTL_AUDIT_KEYS_PREVIOUS="$OLD_KEY" BACKFILLCTL_AUDIT_KEY="$NEW_KEY" backfillctl '
            "audit rotate-key\n",
        ),
        (
            (OLD, OLD),
            "error: BACKFILLCTL_AUDIT_KEY is also in BACKFILLCTL_AUDIT_KEYS_PREVIOUS: a rotation needs a new key\n"
            "  hint: make one: `python -c 'import secrets; print(secrets.token_hex(32))'`\n",
        ),
        (
            (NEW, THIRD),
            f"error: store {shown(store_url)}: the audit chain does not verify (FORGED at seq 1: seq 1 was not made "
            "with BACKFILLCTL_AUDIT_KEY or a key in BACKFILLCTL_AUDIT_KEYS_PREVIOUS: its MAC does not match (appended, "
            "rewritten or re-hashed without the key, or written with another key)), so nothing was written: rotating "
            "the key would vouch for it\n"
            "  hint: see `backfillctl audit verify`; restore the store from a backup if it was tampered with\n",
        ),
        (
            (NEW, "short"),
            "error: line 1 of BACKFILLCTL_AUDIT_KEYS_PREVIOUS is shorter than 32 bytes\n"
            "  hint: use a random secret of at least 32 bytes, e.g. `python -c 'import secrets; "
            "print(secrets.token_hex(32))'`, kept in your secret store\n",
        ),
    ]
    said = []
    for (key, previous), err in cases:
        keys(monkeypatch, store_url, key, previous)
        assert main(["audit", "rotate-key"]) == 1
        captured = capsys.readouterr()
        assert (captured.out, captured.err) == ("", err)
        said.append(captured.err)
    keys(monkeypatch, store_url, NEW, OLD)
    assert main(["audit", "rotate-key"]) == 0
    said.append(capsys.readouterr().out)
    assert main(["audit", "rotate-key"]) == 1
    said.append(capsys.readouterr().err)
    assert said[-1] == (
        f"error: store {shown(store_url)}: the audit chain's newest records carry BACKFILLCTL_AUDIT_KEY's MACs "
        "already: there is nothing to rotate\n"
        "  hint: set the keys as they are; nothing to do\n"
    )
    assert len(rows(store)) == 2
    assert not [text for text in said for secret in (OLD, NEW, THIRD) if secret in text]  # no key in any output
