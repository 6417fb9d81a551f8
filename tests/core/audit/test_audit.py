"""The audit hash chain, pinned by independent test vectors (not by the code agreeing with itself).

The hashes below were computed once with `reference_hash`, a few lines written here from the contract
(DESIGN §5: hash = sha256(prev_hash + canonical JSON of the record)), not with controller code.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import replace
from typing import Any

from controller import __version__
from controller.core.audit.chain import (
    ENTRY_FIELDS,
    GENESIS,
    SCALARS,
    AuditEntry,
    AuditRecord,
    ChainProblem,
    Unreadable,
    VerifyResult,
    chain_hash,
    controller_event,
    key_bytes,
    record_mac,
    seal,
)
from controller.core.audit.keying import verify_chain
from controller.core.render.audit import verify_text

FIRST_HASH = "c2ead8c01ce3e663287a4bbb7f927b068b9ede040ee2a0bc341454185c029c5e"
SECOND_HASH = "e668a78d221b612cd934d78f86558f3be8400c6312190d5bd4af500cfccffda8"
SECOND_AFTER_FFFF = "94f72c6644a42526c26dded4b3eff8edc7b25ded8167077fd2c55520008b34ed"
KEY = b"k" * 32
FIRST_MAC = "6aaf7773843dae115d7f76bdd9db878609fc2ff7ff9a34824c2dafa0bd780c20"  # HMAC-SHA256(KEY, FIRST_HASH)

FIRST = AuditEntry(
    action="create",
    phase="intent",
    actor="alice",
    controller_version="0.1.0",
    spec_name="orders-fix",
    dag_id="orders_daily",
    request={"method": "POST", "path": "/api/v2/backfills", "body": {"dag_id": "orders_daily", "max_active_runs": 3}},
    message="requested by alice; ticket CHG-1 — Zürich",
)
SECOND = AuditEntry(
    action="create",
    phase="outcome",
    actor="alice",
    controller_version="0.1.0",
    outcome="created",
    spec_name="orders-fix",
    dag_id="orders_daily",
    backfill_id=7,
    response={"status": 200, "detail": ""},
)
FIELDS = (
    "action",
    "phase",
    "actor",
    "controller_version",
    "outcome",
    "git_commit",
    "spec_commit",
    "spec_name",
    "spec_path",
    "spec_digest",
    "dag_id",
    "backfill_id",
    "request",
    "response",
    "message",
)


def reference_hash(prev_hash: str, seq: int, time: str, entry: AuditEntry) -> str:
    """The contract, written independently: every field, sorted keys, no spaces, UTF-8 kept as is."""
    body: dict[str, Any] = {name: getattr(entry, name) for name in FIELDS}
    body.update(seq=seq, time=time)
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256((prev_hash + text).encode("utf-8")).hexdigest()


def test_the_vectors_come_from_the_reference() -> None:
    assert reference_hash(GENESIS, 1, "2026-01-02T03:04:05.000006Z", FIRST) == FIRST_HASH
    assert reference_hash(FIRST_HASH, 2, "2026-01-02T03:04:06.000000Z", SECOND) == SECOND_HASH
    assert reference_hash("f" * 64, 2, "2026-01-02T03:04:06.000000Z", SECOND) == SECOND_AFTER_FFFF


def test_seal_matches_the_vectors_and_the_hash_depends_on_prev_hash() -> None:
    first = seal(1, "2026-01-02T03:04:05.000006Z", FIRST, GENESIS)
    second = seal(2, "2026-01-02T03:04:06.000000Z", SECOND, first.hash)
    assert (first.prev_hash, first.hash) == (GENESIS, FIRST_HASH)
    assert (second.prev_hash, second.hash) == (FIRST_HASH, SECOND_HASH)
    assert seal(2, "2026-01-02T03:04:06.000000Z", SECOND, "f" * 64).hash == SECOND_AFTER_FFFF
    assert GENESIS == "0" * 64


def test_chain_hash_is_sha256_of_prev_then_body() -> None:
    assert chain_hash("ab", '{"x":1}') == hashlib.sha256(b'ab{"x":1}').hexdigest()
    assert chain_hash("", "é") == hashlib.sha256("é".encode()).hexdigest()


def test_body_and_json_shapes() -> None:
    record = seal(1, "2026-01-02T03:04:05.000006Z", FIRST, GENESIS)
    assert ENTRY_FIELDS == FIELDS
    assert list(record.body()) == ["seq", "time", *FIELDS]
    assert record.as_json() == {**record.body(), "prev_hash": GENESIS, "hash": FIRST_HASH, "mac": None}
    seq, prev, hash_, body, mac = record.link()
    assert (seq, prev, hash_, mac) == (1, GENESIS, FIRST_HASH, None)
    assert json.loads(body) == record.body()
    assert tuple(sorted({"seq", "time", *FIELDS} - {"request", "response"})) == SCALARS


def test_controller_event_fields() -> None:
    event = controller_event("lease", "ci-bot", "taken-over", "holder x expired")
    assert event == AuditEntry(
        action="lease",
        phase="observation",
        actor="ci-bot",
        controller_version=__version__,
        outcome="taken-over",
        message="holder x expired",
    )
    assert controller_event("pass", "a", "ok", "m", phase="outcome").phase == "outcome"


def chain(n: int) -> list[AuditRecord]:
    records, prev = [], GENESIS
    for seq in range(1, n + 1):
        record = seal(seq, f"2026-01-01T00:00:0{seq}Z", replace(SECOND, message=f"m{seq}"), prev)
        records.append(record)
        prev = record.hash
    return records


def test_a_forged_record_with_a_patched_successor_is_caught() -> None:
    """Edit seq 2, re-seal it, and patch seq 3's prev_hash to the forged hash: seq 3 no longer verifies."""
    records = chain(4)
    forged = seal(2, records[1].time, replace(records[1].entry, message="forged"), records[0].hash)
    patched = replace(records[2], prev_hash=forged.hash)
    tampered = [records[0], forged, patched, records[3]]
    result = verify_chain((r.link() for r in tampered), expect_head=records[3].hash)
    assert result.problem == ChainProblem(3, "INVALID", "seq 3 was modified after it was written")
    assert (result.ok, result.count, result.head_seq, result.head_hash) == (False, 2, 2, forged.hash)


def test_verify_findings_and_messages() -> None:
    records = chain(5)
    intact = verify_chain(r.link() for r in records)
    assert (intact.ok, intact.count, intact.head_seq, intact.head_hash, intact.problem) == (
        True,
        5,
        5,
        records[4].hash,
        None,
    )
    gap = verify_chain(r.link() for r in [*records[:2], *records[3:]])
    assert gap.problem == ChainProblem(3, "GAP", "seq 3 is missing (next is 4)")
    assert (gap.count, gap.head_seq, gap.head_hash) == (2, 2, records[1].hash)
    replaced = [records[0], replace(records[1], prev_hash="1" * 64), *records[2:]]
    broken = verify_chain(r.link() for r in replaced)
    assert broken.problem == ChainProblem(2, "BROKEN", "seq 2 does not follow seq 1 (reordered or replaced)")
    first_bad = verify_chain(r.link() for r in [replace(records[0], hash="2" * 64), *records[1:]])
    assert first_bad.problem == ChainProblem(1, "INVALID", "seq 1 was modified after it was written")
    assert (first_bad.count, first_bad.head_seq, first_bad.head_hash) == (0, 0, GENESIS)
    starts_late = verify_chain(r.link() for r in records[1:])
    assert starts_late.problem == ChainProblem(1, "GAP", "seq 1 is missing (next is 2)")


def test_expect_head_anywhere_in_the_chain_and_truncation() -> None:
    records = chain(4)
    for anchor in records:
        assert verify_chain((r.link() for r in records), expect_head=anchor.hash).ok
    truncated = verify_chain((r.link() for r in records[:2]), expect_head=records[3].hash)
    assert truncated.problem == ChainProblem(
        3, "TRUNCATED", f"the expected head {records[3].hash} is not in the chain, which ends at seq 2"
    )
    assert (truncated.count, truncated.head_seq, truncated.head_hash) == (2, 2, records[1].hash)
    empty = verify_chain(iter(()), expect_head="abc")
    assert empty.problem == ChainProblem(
        1, "TRUNCATED", "the expected head abc is not in the chain, which ends at seq 0"
    )
    assert verify_chain(iter(())).ok


def test_the_mac_is_hmac_sha256_of_the_hash_and_leaves_the_hash_alone() -> None:
    assert hmac.new(KEY, FIRST_HASH.encode("ascii"), hashlib.sha256).hexdigest() == FIRST_MAC
    assert record_mac(KEY, FIRST_HASH) == FIRST_MAC
    keyed = seal(1, "2026-01-02T03:04:05.000006Z", FIRST, GENESIS, KEY)
    assert (keyed.hash, keyed.mac) == (FIRST_HASH, FIRST_MAC)
    assert seal(1, "2026-01-02T03:04:05.000006Z", FIRST, GENESIS).mac is None
    assert keyed.as_json()["mac"] == FIRST_MAC
    assert keyed.link() == (
        1,
        GENESIS,
        FIRST_HASH,
        json.dumps(keyed.body(), sort_keys=True, separators=(",", ":"), ensure_ascii=False),
        FIRST_MAC,
    )
    assert key_bytes("é\udcff") == b"\xc3\xa9\xff"  # UTF-8, and a byte the environment could not decode kept


def keyed_chain(n: int, key: bytes | None = KEY, start: int = 1) -> list[AuditRecord]:
    """Seqs 1..n; from `start` on sealed with `key`."""
    records, prev = [], GENESIS
    for seq in range(1, n + 1):
        record = seal(
            seq, f"2026-01-01T00:00:0{seq}Z", replace(SECOND, message=f"m{seq}"), prev, key if seq >= start else None
        )
        records.append(record)
        prev = record.hash
    return records


KEY_ID = "65f8974b192f14cd"  # HMAC-SHA256(KEY, "backfillctl audit key id"), its first 16 hex digits


def test_a_keyed_chain_verifies_with_its_key_and_says_from_where() -> None:
    assert hmac.new(KEY, b"backfillctl audit key id", hashlib.sha256).hexdigest()[:16] == KEY_ID
    records = keyed_chain(3)
    result = verify_chain((r.link() for r in records), key=KEY)
    assert result == VerifyResult(3, 3, records[2].hash, None, keyed_from=1, key_checked=True, key_id=KEY_ID)
    assert verify_chain(r.link() for r in records) == VerifyResult(3, 3, records[2].hash, None, 1, False)


def test_keying_that_starts_after_seq_1_without_an_adoption_fails_with_or_without_the_key() -> None:
    late = keyed_chain(4, start=3)
    unadopted = ChainProblem(
        3,
        "UNADOPTED",
        "seq 3 is the first record with a MAC and no `audit adopt-key` record: seq 1 to 2 were written without a "
        "key, and a chain becomes keyed only by `backfillctl audit adopt-key` (a chain stripped of its MACs, edited, "
        "and then keyed looks like this)",
    )
    expected = VerifyResult(2, 2, late[1].hash, unadopted, 3, True)
    assert verify_chain((r.link() for r in late), key=KEY) == expected
    assert verify_chain(r.link() for r in late) == replace(expected, key_checked=False)


def test_a_chain_without_any_mac_fails_with_a_key_at_seq_1() -> None:
    plain = keyed_chain(2, key=None)
    stripped = ChainProblem(
        1,
        "UNKEYED",
        "seq 1 carries no MAC, nor does any record, but BACKFILLCTL_AUDIT_KEY is set: a chain written with the key "
        "carries MACs from seq 1 or from an `audit adopt-key` record (a chain stripped of its MACs looks like this); "
        "if this chain was never keyed, check it and run `backfillctl audit adopt-key`",
    )
    assert verify_chain((r.link() for r in plain), key=KEY) == VerifyResult(0, 0, GENESIS, stripped, None, True)
    assert verify_chain(r.link() for r in plain) == VerifyResult(2, 2, plain[1].hash, None, None, False)
    assert verify_chain((), key=KEY) == VerifyResult(0, 0, GENESIS, None, None, True)  # empty: nothing owed yet


def test_an_appended_record_with_a_recomputed_hash_fails_only_with_the_key() -> None:
    records = keyed_chain(3)
    forged = seal(4, "2026-01-01T00:00:09Z", replace(SECOND, message="forged"), records[2].hash)
    unkeyed = verify_chain((r.link() for r in [*records, forged]), expect_head=forged.hash, key=KEY)
    message = "seq 4 carries no MAC, but the chain is keyed from seq 1: added without the key"
    assert unkeyed == VerifyResult(3, 3, records[2].hash, ChainProblem(4, "UNKEYED", message), 1, True, key_id=KEY_ID)
    assert not verify_chain(r.link() for r in [*records, forged]).ok  # a missing MAC needs no key to be seen
    fake = replace(forged, mac="0" * 64)
    forged_mac = verify_chain((r.link() for r in [*records, fake]), expect_head=fake.hash, key=KEY)
    assert forged_mac.problem == ChainProblem(
        4,
        "FORGED",
        "seq 4 was not made with BACKFILLCTL_AUDIT_KEY: its MAC does not match (appended, rewritten or "
        "re-hashed without the key, or written with another key)",
    )
    assert (forged_mac.count, forged_mac.head_seq, forged_mac.keyed_from) == (3, 3, 1)
    assert verify_chain((r.link() for r in [*records, fake]), expect_head=fake.hash).ok  # no key: undetectable


def test_a_rewritten_and_re_hashed_record_fails_with_the_key() -> None:
    records = keyed_chain(3)
    other = seal(2, records[1].time, replace(records[1].entry, message="rewritten"), records[0].hash, b"x" * 32)
    rehashed = [records[0], other, seal(3, records[2].time, records[2].entry, other.hash, b"x" * 32)]
    assert verify_chain((r.link() for r in rehashed), key=KEY).problem == ChainProblem(
        2,
        "FORGED",
        "seq 2 was not made with BACKFILLCTL_AUDIT_KEY: its MAC does not match (appended, rewritten or "
        "re-hashed without the key, or written with another key)",
    )
    assert verify_chain((r.link() for r in rehashed), key=b"x" * 32).problem == ChainProblem(
        1,
        "FORGED",
        "seq 1 was not made with BACKFILLCTL_AUDIT_KEY: its MAC does not match (appended, rewritten or "
        "re-hashed without the key, or written with another key)",
    )


def test_rows_that_break_the_sequence_or_cannot_be_read_are_findings() -> None:
    records = chain(3)
    links = [r.link() for r in records]
    zero = (0, GENESIS, "a" * 64, "{}", None)
    assert verify_chain([zero, *links]).problem == ChainProblem(
        0, "INVALID", "seq 0 is outside the chain, which starts at seq 1: a row added by hand"
    )
    negative = verify_chain([(-5, GENESIS, "a" * 64, "{}", None), *links])
    assert negative.problem == ChainProblem(
        -5, "INVALID", "seq -5 is outside the chain, which starts at seq 1: a row added by hand"
    )
    assert (negative.count, negative.head_seq, negative.head_hash) == (0, 0, GENESIS)
    duplicate = verify_chain([links[0], links[1], links[1], links[2]])
    assert duplicate.problem == ChainProblem(2, "DUPLICATE", "seq 2 occurs more than once")
    assert (duplicate.count, duplicate.head_seq) == (2, 2)
    bad = (2, records[0].hash, records[1].hash, Unreadable(2, "message holds a BLOB, not text"), None)
    unreadable = verify_chain([links[0], bad, links[2]])
    assert unreadable.problem == ChainProblem(2, "INVALID", "seq 2 cannot be read: message holds a BLOB, not text")
    assert Unreadable(2, "x").describe() == "audit record seq 2 is unreadable: x"


def test_verify_text_says_what_the_key_proves() -> None:
    head = "OK: 3 events, chain intact; head seq 3 hash h\n  "
    cases = {
        (1, True): "keyed from seq 1: every record from it on carries a MAC made with BACKFILLCTL_AUDIT_KEY",
        (2, True): "keyed from seq 2: every record from it on carries a MAC made with BACKFILLCTL_AUDIT_KEY; "
        "seq 1 to 1 predate the key and are pinned by the MAC of seq 2",
        (None, True): "not keyed: no record carries a MAC yet (a reconcile with BACKFILLCTL_AUDIT_KEY set writes "
        "them), so a record appended with a recomputed hash by anyone with write access to the store cannot be "
        "detected",
        (None, False): "not keyed: BACKFILLCTL_AUDIT_KEY is not set, so a record appended with a recomputed hash "
        "by anyone with write access to the store cannot be detected",
        (2, False): "not keyed: BACKFILLCTL_AUDIT_KEY is not set, so a record appended with a recomputed hash "
        "by anyone with write access to the store cannot be detected; the MACs of seq 2 to 3 were not checked",
    }
    for (first, checked), line in cases.items():
        assert verify_text(VerifyResult(3, 3, "h", None, first, checked)) == head + line + "\n"
    failed = VerifyResult(2, 2, "h", ChainProblem(3, "UNKEYED", "m"), 1, True)
    assert verify_text(failed) == "UNKEYED at seq 3: m\n  verified 2 events before it; last good seq 2 hash h\n"
