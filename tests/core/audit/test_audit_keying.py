"""The keyed chain's rules (core/audit/keying.py), pure: key ids, adoption and rotation records, and the walk.

The key ids and the rotation MAC are pinned by vectors computed here with the standard library from the rule in
the module's docstring, not by the code agreeing with itself.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
from dataclasses import replace

import pytest

from controller import __version__
from controller.core.audit.chain import GENESIS, AuditEntry, AuditRecord, ChainProblem, KeyEvent, VerifyResult, seal
from controller.core.audit.keying import (
    adoption_entry,
    key_id,
    key_record,
    rotation_entry,
    rotation_mac,
    verify_chain,
)
from controller.core.model.spec import canonical_json

OLD, NEW, THIRD = b"o" * 32, b"n" * 32, b"t" * 32
OLD_ID, NEW_ID, THIRD_ID = (
    hmac.new(k, b"backfillctl audit key id", hashlib.sha256).hexdigest()[:16] for k in (OLD, NEW, THIRD)
)
TIME = "2026-01-01T00:00:00.000000Z"
FORGED = "its MAC does not match (appended, rewritten or re-hashed without the key, or written with another key)"
Step = Callable[[int, str], tuple[AuditEntry, bytes | None]]  # (seq, prev_hash) → the entry and the key to seal with


def plain(key: bytes | None) -> Step:
    return lambda seq, _prev: (AuditEntry("observe", "observation", "bot", "0.1.0", message=f"m{seq}"), key)


def adopt(key: bytes, actor: str = "carol") -> Step:
    return lambda seq, _prev: (adoption_entry(actor, key, seq), key)


def rotate(old: bytes, new: bytes, actor: str = "dave") -> Step:
    return lambda seq, prev: (rotation_entry(actor, old, new, prev, seq), new)


def chain(*steps: Step) -> list[AuditRecord]:
    records, prev = [], GENESIS
    for seq, step in enumerate(steps, 1):
        entry, key = step(seq, prev)
        records.append(seal(seq, TIME, entry, prev, key))
        prev = records[-1].hash
    return records


def walk(
    records: list[AuditRecord],
    key: bytes | None = None,
    *previous: bytes,
    expect_head: str | None = None,
    require_current: bool = True,
) -> VerifyResult:
    links = (r.link() for r in records)
    return verify_chain(links, expect_head, key, previous=previous, require_current=require_current)


def body(record: AuditRecord) -> str:
    return canonical_json(record.body())


def test_key_ids_and_the_rotation_mac_follow_their_rule() -> None:
    assert (key_id(OLD), key_id(NEW), key_id(THIRD)) == (OLD_ID, NEW_ID, THIRD_ID)
    assert len(OLD_ID) == 16
    assert OLD_ID != NEW_ID
    expected = hmac.new(OLD, f"backfillctl audit key rotation:{'a' * 64}:{NEW_ID}".encode(), hashlib.sha256)
    assert rotation_mac(OLD, "a" * 64, NEW_ID) == expected.hexdigest()
    assert rotation_mac(OLD, "b" * 64, NEW_ID) != expected.hexdigest()


def test_the_adoption_and_rotation_records_say_who_which_key_and_what_follows() -> None:
    assert adoption_entry("carol", NEW, 5) == AuditEntry(
        action="audit-key",
        phase="outcome",
        actor="carol",
        controller_version=__version__,
        outcome="adopted",
        request={"audit_key": {"key_id": NEW_ID}},
        message=f"adopted the audit key {NEW_ID}: every record from seq 5 on carries its MAC; seq 1 to 4, written "
        "without a key, are pinned by its MAC",
    )
    assert adoption_entry("carol", NEW, 2).message.endswith(
        "seq 2 on carries its MAC; seq 1 to 1, written without a key, are pinned by its MAC"
    )
    assert (
        adoption_entry("carol", NEW, 1).message
        == f"adopted the audit key {NEW_ID}: every record from seq 1 on carries its MAC"
    )
    rotation = rotation_entry("dave", OLD, NEW, "c" * 64, 7)
    assert (rotation.action, rotation.phase, rotation.actor, rotation.outcome) == (
        "audit-key",
        "outcome",
        "dave",
        "rotated",
    )
    assert rotation.request == {
        "audit_key": {
            "key_id": NEW_ID,
            "previous_key_id": OLD_ID,
            "previous_key_mac": rotation_mac(OLD, "c" * 64, NEW_ID),
        }
    }
    assert rotation.message == (
        f"rotated the audit key from {OLD_ID} to {NEW_ID}: every record from seq 7 on carries the new key's MAC, and "
        "this one the old key's too"
    )


@pytest.mark.parametrize(
    "body",
    [
        '{"action":"audit-key",',
        '{"action":"audit-key","request":null}',
        '{"action":"audit-key","request":{"audit_key":"x"}}',
        '{"action":"audit-key","actor":"a","outcome":"adopted","request":{"audit_key":{"key_id":1}},"time":"t"}',
        '{"action":"audit-key","actor":"a","outcome":"other","request":{"audit_key":{"key_id":"k"}},"time":"t"}',
        '{"action":"audit-key","actor":null,"outcome":"adopted","request":{"audit_key":{"key_id":"k"}},"time":"t"}',
        '{"action":"audit-key","actor":"a","outcome":"adopted","request":{"audit_key":{"key_id":"k"}},"time":5}',
        '{"action":"audit-key","actor":"a","outcome":"rotated","request":{"audit_key":{"key_id":"k","previous_key_id":'
        '"p"}},"time":"t"}',
        '{"action":"audit-key","actor":"a","outcome":"rotated","request":{"audit_key":{"key_id":"k",'
        '"previous_key_mac":"m"}},"time":"t"}',
        '["action"]',
    ],
)
def test_a_malformed_key_record_is_invalid(body: str) -> None:
    if not body.startswith('{"action":"audit-key",'):
        assert key_record(3, body) is None
        return
    assert key_record(3, body) == ChainProblem(3, "INVALID", "seq 3 is an audit-key record without its key facts")


def test_key_records_are_read_from_their_canonical_body() -> None:
    adopted, rotated, other = chain(adopt(OLD), rotate(OLD, NEW), plain(NEW))
    assert key_record(1, body(adopted)).event == KeyEvent(1, "adopted", "carol", TIME, OLD_ID)  # type: ignore[union-attr]
    found = key_record(2, body(rotated))
    assert found.event == KeyEvent(2, "rotated", "dave", TIME, NEW_ID, OLD_ID)  # type: ignore[union-attr]
    assert found.previous_key_mac == rotation_mac(OLD, adopted.hash, NEW_ID)  # type: ignore[union-attr]
    assert key_record(3, body(other)) is None
    # an actor of another action that merely says audit-key is no key record
    assert key_record(4, '{"action":"audit-keys","actor":"a"}') is None


def test_a_chain_keyed_from_seq_1_or_by_an_adoption_verifies_and_names_the_adoption() -> None:
    fresh = chain(plain(NEW), plain(NEW))
    assert walk(fresh, NEW).key_id == NEW_ID
    assert walk(fresh, NEW).keyed_from == 1
    assert walk(fresh, NEW).adoption is None
    adopted = chain(plain(None), plain(None), adopt(NEW, "carol"), plain(NEW))
    for key in (NEW, None):
        result = walk(adopted, key)
        assert result.ok
        assert (result.count, result.keyed_from, result.key_checked) == (4, 3, key is not None)
        assert result.adoption == KeyEvent(3, "adopted", "carol", TIME, NEW_ID)
        assert result.key_id == (NEW_ID if key else None)
    assert walk(chain(adopt(NEW)), NEW).adoption == KeyEvent(1, "adopted", "carol", TIME, NEW_ID)


def test_an_adoption_is_the_first_keyed_record_and_never_without_its_mac() -> None:
    stripped = chain(plain(None), lambda seq, prev: (adoption_entry("carol", NEW, seq), None), plain(None))
    problem = ChainProblem(
        2,
        "UNKEYED",
        "seq 2 adopted the audit key but carries no MAC: its MAC was removed (a keyed chain stripped of its MACs)",
    )
    for key in (None, NEW):
        result = walk(stripped, key)
        assert (result.problem, result.count, result.head_seq, result.head_hash) == (problem, 1, 1, stripped[0].hash)
    twice = chain(plain(NEW), adopt(NEW))
    message = "seq 2 adopts an audit key, but the chain is keyed from seq 1 already"
    assert walk(twice, NEW).problem == ChainProblem(2, "UNADOPTED", message)
    assert walk(twice).problem == ChainProblem(2, "UNADOPTED", message)
    first_rotation = chain(plain(None), rotate(OLD, NEW))
    message = "seq 2 rotates the audit key, but no record before it carries a MAC"
    assert walk(first_rotation, NEW, OLD).problem == ChainProblem(2, "UNADOPTED", message)
    assert walk(chain(rotate(OLD, NEW)), NEW, OLD).problem == ChainProblem(
        1, "UNADOPTED", "seq 1 rotates the audit key, but no record before it carries a MAC"
    )


def test_a_rotation_verified_with_both_keys_the_new_alone_or_the_old_alone() -> None:
    records = chain(plain(OLD), plain(OLD), rotate(OLD, NEW, "dave"), plain(NEW))
    both = walk(records, NEW, OLD)
    assert both.ok
    assert both.rotations == (KeyEvent(3, "rotated", "dave", TIME, NEW_ID, OLD_ID, previous_checked=True),)
    assert (both.key_id, both.pinned_by, both.keyed_from, both.count) == (NEW_ID, None, 1, 4)
    alone = walk(records, NEW)
    assert alone.ok
    assert alone.rotations == (KeyEvent(3, "rotated", "dave", TIME, NEW_ID, OLD_ID, previous_checked=False),)
    assert (alone.key_id, alone.pinned_by) == (NEW_ID, 3)
    old = walk(records, OLD)
    assert old.problem == ChainProblem(
        3,
        "UNKNOWN_KEY",
        f"seq 3 rotated the audit key to key {NEW_ID}, which is none of the keys given: set BACKFILLCTL_AUDIT_KEY "
        "to the current key (and the earlier ones in BACKFILLCTL_AUDIT_KEYS_PREVIOUS)",
    )
    assert (old.count, old.head_seq, old.head_hash) == (2, 2, records[1].hash)
    unkeyed = walk(records)
    assert unkeyed.ok
    assert unkeyed.rotations == (KeyEvent(3, "rotated", "dave", TIME, NEW_ID, OLD_ID),)
    assert (unkeyed.key_id, unkeyed.key_checked) == (None, False)
    swapped = walk(records, OLD, NEW)
    assert swapped.problem == ChainProblem(
        3,
        "OLD_KEY",
        f"the records from seq 3 on carry the MACs of key {NEW_ID} from BACKFILLCTL_AUDIT_KEYS_PREVIOUS, not of "
        "BACKFILLCTL_AUDIT_KEY: no record rotates the chain to the current key (records cut off after a rotation and "
        "replaced, or the two variables swapped)",
    )
    assert (swapped.count, swapped.head_seq) == (4, 4)
    before = walk(records[:2], NEW, OLD, require_current=False)  # what rotate-key checks first
    assert (before.ok, before.key_id) == (True, OLD_ID)
    assert walk(records[:2], NEW, OLD).problem.kind == "OLD_KEY"  # type: ignore[union-attr]
    assert walk(records[:2], NEW, OLD).problem.seq == 1  # type: ignore[union-attr]


def test_two_rotations_and_a_middle_key_not_given() -> None:
    records = chain(plain(OLD), rotate(OLD, NEW), plain(NEW), rotate(NEW, THIRD), plain(THIRD))
    assert [r.previous_checked for r in walk(records, THIRD, NEW, OLD).rotations] == [True, True]
    newest = walk(records, THIRD)
    assert newest.ok
    assert [r.previous_checked for r in newest.rotations] == [False, False]
    assert newest.pinned_by == 4
    middle = walk(records, THIRD, OLD)  # NEW not given: seq 2 rotates to a key not given, seq 4 pins it
    assert middle.ok
    assert [(r.seq, r.previous_checked) for r in middle.rotations] == [(2, True), (4, False)]
    assert (middle.pinned_by, middle.key_id) == (4, THIRD_ID)
    first = walk(records[:3], THIRD, OLD)  # cut before the second rotation: the chain ends under a key not given
    assert first.problem == ChainProblem(
        2,
        "UNKNOWN_KEY",
        f"seq 2 rotated the audit key to key {NEW_ID}, which is none of the keys given: set BACKFILLCTL_AUDIT_KEY "
        "to the current key (and the earlier ones in BACKFILLCTL_AUDIT_KEYS_PREVIOUS)",
    )
    assert (first.count, first.head_seq, first.head_hash) == (1, 1, records[0].hash)


def test_a_forged_rotation_is_found() -> None:
    good = chain(plain(OLD), plain(OLD), rotate(OLD, NEW))
    # a rotation that says NEW but carries THIRD's MAC (THIRD given)
    lying = seal(3, TIME, good[2].entry, good[1].hash, THIRD)
    result = walk([*good[:2], lying], NEW, OLD, THIRD)
    assert result.problem == ChainProblem(
        3, "FORGED", f"seq 3 rotates the audit key to key {NEW_ID}, but its MAC is of key {THIRD_ID}"
    )
    # NEW is given but did not make the MAC
    nobody = replace(good[2], mac="0" * 64)
    message = f"seq 3 was not made with BACKFILLCTL_AUDIT_KEY or a key in BACKFILLCTL_AUDIT_KEYS_PREVIOUS: {FORGED}"
    assert walk([*good[:2], nobody], NEW, OLD).problem == ChainProblem(3, "FORGED", message)
    # the old key's MAC in it is wrong, or names another key
    for facts in ({"previous_key_mac": "0" * 64}, {"previous_key_id": THIRD_ID}):
        request = {"audit_key": {**good[2].entry.request["audit_key"], **facts}}  # type: ignore[index]
        bad = seal(3, TIME, replace(good[2].entry, request=request), good[1].hash, NEW)
        assert walk([*good[:2], bad], NEW, OLD).problem == ChainProblem(
            3,
            "FORGED",
            f"seq 3 rotates the audit key, but key {OLD_ID}, which made the records before it, did not sign the "
            "rotation: its previous-key MAC does not match",
        )
    # the records before a rotation claim a given old key, yet it did not make them
    claimed = chain(plain(THIRD), plain(THIRD), rotate(OLD, NEW))
    held = walk(claimed, NEW, OLD)
    assert held.problem == ChainProblem(1, "FORGED", message.replace("seq 3", "seq 1"))
    assert (held.count, held.head_seq, held.head_hash) == (0, 0, GENESIS)


def test_keys_change_only_by_rotation() -> None:
    switched = chain(plain(OLD), plain(NEW))
    assert walk(switched, NEW, OLD).problem == ChainProblem(
        2,
        "FORGED",
        f"seq 2 carries a MAC of key {NEW_ID} and seq 1 one of key {OLD_ID}: a key changes only by a rotation record "
        "(`backfillctl audit rotate-key`)",
    )
    lost = chain(plain(NEW), plain(THIRD))  # a known key, then one not given
    result = walk(lost, NEW)
    assert result.problem == ChainProblem(2, "FORGED", f"seq 2 was not made with BACKFILLCTL_AUDIT_KEY: {FORGED}")
    assert (result.count, result.head_seq, result.key_id) == (1, 1, NEW_ID)
    found_later = chain(plain(THIRD), plain(THIRD), plain(NEW))  # a key not given, then the key, no rotation
    held = walk(found_later, NEW)
    assert held.problem == ChainProblem(1, "FORGED", f"seq 1 was not made with BACKFILLCTL_AUDIT_KEY: {FORGED}")
    assert (held.count, held.head_seq, held.head_hash) == (0, 0, GENESIS)
    unresolved = walk(chain(plain(None), adopt(THIRD), plain(THIRD)), NEW)
    assert unresolved.problem == ChainProblem(2, "FORGED", f"seq 2 was not made with BACKFILLCTL_AUDIT_KEY: {FORGED}")
    assert (unresolved.count, unresolved.head_seq, unresolved.head_hash) == (1, 1, unresolved.head_hash)


def test_a_definite_problem_after_records_of_a_key_not_given_is_the_one_reported() -> None:
    records = chain(plain(OLD), plain(OLD), plain(OLD), rotate(OLD, NEW))
    edited = replace(records[2], entry=replace(records[2].entry, message="edited"))
    result = walk([*records[:2], edited, records[3]], NEW)
    assert result.problem == ChainProblem(3, "INVALID", "seq 3 was modified after it was written")
    assert (result.count, result.head_seq, result.head_hash) == (2, 2, records[1].hash)


def test_a_chain_without_macs_under_a_key_and_the_expected_head() -> None:
    records = chain(plain(None), plain(None))
    assert walk([], NEW).ok
    unkeyed = walk(records, NEW, expect_head="f" * 64)
    assert (unkeyed.problem.kind, unkeyed.problem.seq, unkeyed.count, unkeyed.head_hash) == ("UNKEYED", 1, 0, GENESIS)  # type: ignore[union-attr]
    assert walk(records, expect_head="f" * 64).problem.kind == "TRUNCATED"  # type: ignore[union-attr]
    keyed = chain(plain(NEW), plain(NEW))
    assert walk(keyed, NEW, expect_head=keyed[0].hash).ok
    truncated = walk(keyed, NEW, expect_head="f" * 64)
    assert truncated.problem == ChainProblem(
        3, "TRUNCATED", f"the expected head {'f' * 64} is not in the chain, which ends at seq 2"
    )
    assert (truncated.count, truncated.key_id) == (2, NEW_ID)


def test_keying_at_seq_2_needs_an_adoption_and_verify_wants_the_current_key_by_default() -> None:
    late = chain(plain(None), plain(NEW))
    assert walk(late, NEW).problem.kind == "UNADOPTED"  # type: ignore[union-attr]
    assert walk(late, NEW).problem.seq == 2  # type: ignore[union-attr]
    assert walk(chain(plain(None), adopt(NEW)), NEW).ok
    old = chain(plain(OLD))
    assert verify_chain((r.link() for r in old), None, NEW, previous=[OLD]).problem.kind == "OLD_KEY"  # type: ignore[union-attr]


def test_a_second_seq_1_is_a_duplicate() -> None:
    records = chain(plain(None), plain(None))
    links = [records[0].link(), records[0].link(), records[1].link()]
    assert verify_chain(links).problem == ChainProblem(1, "DUPLICATE", "seq 1 occurs more than once")
