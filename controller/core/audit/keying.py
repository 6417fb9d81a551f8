"""The audit chain's walk and the rules of its keys (pure): `verify_chain`, key ids, adoption and rotation records.

A chain is keyed from seq 1 (a store begun with BACKFILLCTL_AUDIT_KEY) or from an adoption record (`audit adopt-key`),
which is then its first record with a MAC: the records before it were written without a key and are pinned by its
MAC. Nothing else turns an unkeyed chain into a keyed one, and an adoption or rotation record without a MAC is a
removed MAC, seen without any key.

`audit rotate-key` writes a rotation record: its `mac` is the new key's over its hash, like every record's, and its
body carries the old key's MAC over the hash before it and the new key's id (`rotation_mac`), so the old key vouches
for the chain so far and for its successor, and the new key for the record itself. A chain verified with only the
new key passes: the records before the rotation are pinned by the rotation's MAC, as records before an adoption are
(their own MACs are then not checked, and verify says so). The chain's newest records must carry the current key's
MAC: a tail under a previous key has lost its rotation. A key id (`key_id`) names a key without revealing it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from controller import __version__
from controller.core.audit.chain import (
    GENESIS,
    AuditEntry,
    ChainLink,
    ChainProblem,
    KeyEvent,
    Unreadable,
    VerifyResult,
    chain_hash,
    mac_of,
)
from controller.core.audit.vocabulary import Action, AuditPhase, Outcome

_KEY_ID_MESSAGE = b"backfillctl audit key id"
# a record's canonical body starts with its action ("action" sorts first): only these bodies are ever decoded
_KEY_RECORD = f'{{"action":"{Action.AUDIT_KEY}",'
UNKNOWN = -1  # the key of the newest MACs is none of the keys given
FORGED_TEXT = "its MAC does not match (appended, rewritten or re-hashed without the key, or written with another key)"


def key_id(key: bytes) -> str:
    """16 hex digits that name a key (HMAC-SHA256 of a fixed text): printable, and no way back to the key."""
    return hmac.new(key, _KEY_ID_MESSAGE, hashlib.sha256).hexdigest()[:16]


def rotation_mac(old: bytes, prev_hash: str, new_id: str) -> str:
    """The old key's MAC in a rotation record: over the hash of the record before it and the new key's id."""
    message = f"backfillctl audit key rotation:{prev_hash}:{new_id}".encode()
    return hmac.new(old, message, hashlib.sha256).hexdigest()


def adoption_entry(actor: str, key: bytes, seq: int) -> AuditEntry:
    """The record of `audit adopt-key` at `seq`: the chain's first record with a MAC."""
    kid = key_id(key)
    pinned = f"; seq 1 to {seq - 1}, written without a key, are pinned by its MAC" if seq > 1 else ""
    message = f"adopted the audit key {kid}: every record from seq {seq} on carries its MAC{pinned}"
    return _key_entry(actor, Outcome.ADOPTED, {"key_id": kid}, message)


def rotation_entry(actor: str, old: bytes, new: bytes, prev_hash: str, seq: int) -> AuditEntry:
    """The record of `audit rotate-key` at `seq`, after the record whose hash is `prev_hash`."""
    old_id, new_id = key_id(old), key_id(new)
    facts = {"key_id": new_id, "previous_key_id": old_id, "previous_key_mac": rotation_mac(old, prev_hash, new_id)}
    message = (
        f"rotated the audit key from {old_id} to {new_id}: every record from seq {seq} on carries the new key's MAC, "
        "and this one the old key's too"
    )
    return _key_entry(actor, Outcome.ROTATED, facts, message)


def _key_entry(actor: str, outcome: Outcome, facts: dict[str, str], message: str) -> AuditEntry:
    return AuditEntry(
        action=Action.AUDIT_KEY,
        phase=AuditPhase.OUTCOME,
        actor=actor,
        controller_version=__version__,
        outcome=outcome,
        request={"audit_key": facts},
        message=message,
    )


@dataclass(frozen=True, slots=True)
class _KeyRecord:
    """An adoption or rotation record's facts, as its body holds them."""

    event: KeyEvent
    previous_key_mac: str | None


def key_record(seq: int, body: str) -> _KeyRecord | ChainProblem | None:
    """The facts of an adoption or rotation record (None: another record); a malformed one is a problem."""
    if not body.startswith(_KEY_RECORD):
        return None
    invalid = ChainProblem(seq, "INVALID", f"seq {seq} is an audit-key record without its key facts")
    try:
        facts = _facts(json.loads(body))
    except ValueError:
        return invalid
    if facts is None:
        return invalid
    outcome, actor, time, kid, previous, previous_mac = facts
    event = KeyEvent(seq, outcome, actor, time, kid, previous)
    return _KeyRecord(event, previous_mac)


def _facts(data: Any) -> tuple[str, str, str, str, str | None, str | None] | None:
    """(outcome, actor, time, key id, previous key id, previous key's MAC) when well formed."""
    request = data.get("request") if isinstance(data, dict) else None
    facts = request.get("audit_key") if isinstance(request, dict) else None
    if not isinstance(facts, dict):
        return None
    outcome = data.get("outcome")
    texts = (outcome, data.get("actor"), data.get("time"), facts.get("key_id"))
    rotation = (facts.get("previous_key_id"), facts.get("previous_key_mac"))
    if not all(isinstance(text, str) for text in texts) or outcome not in (Outcome.ADOPTED, Outcome.ROTATED):
        return None
    if outcome == Outcome.ROTATED and not all(isinstance(text, str) for text in rotation):
        return None
    return outcome, data["actor"], data["time"], facts["key_id"], rotation[0], rotation[1]


@dataclass(frozen=True, slots=True)
class _Held:
    """A problem that a later record may still resolve (MACs of a key not given, until a rotation pins them),
    with where the chain stood before it."""

    problem: ChainProblem
    count: int
    head_seq: int
    head_hash: str


@dataclass(slots=True)
class _Keys:
    """The keys given (the current one first) and what the walk learnt of the chain's keying so far."""

    keys: tuple[bytes, ...]
    macs: tuple[Callable[[str], str], ...]
    ids: tuple[str, ...]
    keyed_from: int | None = None
    active: int | None = None  # the index of the key of the newest MACs, UNKNOWN when none of the given keys
    active_from: int = 0  # the seq from which that key holds
    held: _Held | None = None
    adoption: KeyEvent | None = None
    rotations: list[KeyEvent] = field(default_factory=list)
    pinned_by: int | None = None

    @classmethod
    def of(cls, keys: Sequence[bytes]) -> _Keys:
        return cls(tuple(keys), tuple(mac_of(k) for k in keys), tuple(key_id(k) for k in keys))

    def step(self, link: ChainLink, body: str, count: int, prev: str) -> ChainProblem | _Held | None:
        """The key rules for one record that hashed correctly (`body`: its text, read); the common record costs
        one HMAC at most."""
        seq, _, hash_, _, mac = link
        if not body.startswith(_KEY_RECORD):
            if mac is None:
                return None if self.keyed_from is None else self._unkeyed(seq, None)
            if self.keyed_from is not None:
                active = self.active
                if not self.keys or (active is not None and active != UNKNOWN and self.macs[active](hash_) == mac):
                    return None
                return self._mac(seq, hash_, mac, count, prev)
        return self._slow(link, body, count, prev)

    def _slow(self, link: ChainLink, body: str, count: int, prev: str) -> ChainProblem | _Held | None:
        """A key record, or the first record with a MAC."""
        seq, _, hash_, _, mac = link
        found = key_record(seq, body)
        if isinstance(found, ChainProblem):
            return found
        if mac is None:
            return self._unkeyed(seq, found)
        problem = self._keying(seq, found)
        rotation = found is not None and found.event.kind == Outcome.ROTATED
        if problem is not None or not self.keys:
            if problem is None and found is not None and rotation:
                self.rotations.append(found.event)  # who and when, though without the keys nothing is checked
            return problem
        if found is not None and rotation:
            return self._rotation(link, mac, found, count, prev)
        return self._mac(seq, hash_, mac, count, prev)

    def _unkeyed(self, seq: int, found: _KeyRecord | None) -> ChainProblem | None:
        if found is not None:
            return ChainProblem(
                seq,
                "UNKEYED",
                f"seq {seq} {found.event.kind} the audit key but carries no MAC: its MAC was removed (a keyed chain "
                "stripped of its MACs)",
            )
        if self.keyed_from is None:
            return None
        message = f"seq {seq} carries no MAC, but the chain is keyed from seq {self.keyed_from}: added without the key"
        return ChainProblem(seq, "UNKEYED", message)

    def _keying(self, seq: int, found: _KeyRecord | None) -> ChainProblem | None:
        """Where keying may start (seq 1, or an adoption record) and where an adoption may stand (there only)."""
        kind = None if found is None else found.event.kind
        if self.keyed_from is not None:
            if kind == Outcome.ADOPTED:
                message = f"seq {seq} adopts an audit key, but the chain is keyed from seq {self.keyed_from} already"
                return ChainProblem(seq, "UNADOPTED", message)
            return None
        self.keyed_from = seq
        if kind == Outcome.ROTATED:
            message = f"seq {seq} rotates the audit key, but no record before it carries a MAC"
            return ChainProblem(seq, "UNADOPTED", message)
        if seq > 1 and kind is None:
            return ChainProblem(
                seq,
                "UNADOPTED",
                f"seq {seq} is the first record with a MAC and no `audit adopt-key` record: seq 1 to {seq - 1} were "
                "written without a key, and a chain becomes keyed only by `backfillctl audit adopt-key` (a chain "
                "stripped of its MACs, edited, and then keyed looks like this)",
            )
        if found is not None:
            self.adoption = found.event
        return None

    def _maker(self, hash_: str, mac: str) -> int | None:
        """Which given key made this MAC (the active key is tried first: one HMAC a record)."""
        active = self.active
        if active is not None and active != UNKNOWN and self.macs[active](hash_) == mac:
            return active
        return next((i for i, made in enumerate(self.macs) if i != active and made(hash_) == mac), None)

    def _forged(self, seq: int) -> ChainProblem:
        keys = "BACKFILLCTL_AUDIT_KEY" + (" or a key in BACKFILLCTL_AUDIT_KEYS_PREVIOUS" if len(self.keys) > 1 else "")
        return ChainProblem(seq, "FORGED", f"seq {seq} was not made with {keys}: {FORGED_TEXT}")

    def _mac(self, seq: int, hash_: str, mac: str, count: int, prev: str) -> ChainProblem | _Held | None:
        maker = self._maker(hash_, mac)
        if maker is None:
            if self.active not in (None, UNKNOWN):
                return self._forged(seq)
            if self.held is None:  # a key not given: a rotation further on may pin these records
                self.held = _Held(self._forged(seq), count, seq - 1, prev)
            self.active = UNKNOWN
            return None
        if self.active == UNKNOWN:
            return self.held  # a given key after records of a key not given, without a rotation between them
        if self.active is not None and maker != self.active:
            return ChainProblem(
                seq,
                "FORGED",
                f"seq {seq} carries a MAC of key {self.ids[maker]} and seq {seq - 1} one of key "
                f"{self.ids[self.active]}: a key changes only by a rotation record (`backfillctl audit rotate-key`)",
            )
        if self.active is None:
            self.active, self.active_from = maker, seq
        return None

    def _rotation(
        self, link: ChainLink, mac: str, found: _KeyRecord, count: int, prev: str
    ) -> ChainProblem | _Held | None:
        seq, prev_hash, hash_, _, _ = link
        event = found.event
        maker = self._maker(hash_, mac)
        if maker is None and event.key_id in self.ids:
            return self._forged(seq)
        if maker is not None and self.ids[maker] != event.key_id:
            message = f"seq {seq} rotates the audit key to key {event.key_id}, but its MAC is of key {self.ids[maker]}"
            return ChainProblem(seq, "FORGED", message)
        problem = self._previous(seq, prev_hash, found)
        if problem is not None:
            return problem
        self.rotations.append(replace(event, previous_checked=self.active != UNKNOWN))
        if maker is None:  # to a key not given: a later rotation to a given key may pin it
            if self.held is None:
                self.held = _Held(self._unknown_key(seq, event.key_id), count, seq - 1, prev)
            self.active = UNKNOWN
            return None
        if self.active == UNKNOWN:
            self.held, self.pinned_by = None, seq  # the records before are pinned by this record's MAC
        self.active, self.active_from = maker, seq
        return None

    @staticmethod
    def _unknown_key(seq: int, kid: str) -> ChainProblem:
        return ChainProblem(
            seq,
            "UNKNOWN_KEY",
            f"seq {seq} rotated the audit key to key {kid}, which is none of the keys given: set "
            "BACKFILLCTL_AUDIT_KEY to the current key (and the earlier ones in BACKFILLCTL_AUDIT_KEYS_PREVIOUS)",
        )

    def _previous(self, seq: int, prev_hash: str, found: _KeyRecord) -> ChainProblem | _Held | None:
        """The old key's MAC in a rotation record, when the old key was given."""
        event, old = found.event, self.active
        if old == UNKNOWN:
            # the old key is given, yet the records before were not made with it
            return self.held if event.previous_key_id in self.ids else None
        assert old is not None  # a rotation is never the first keyed record (`_keying`)
        if self.ids[old] == event.previous_key_id and found.previous_key_mac == rotation_mac(
            self.keys[old], prev_hash, event.key_id
        ):
            return None
        return ChainProblem(
            seq,
            "FORGED",
            f"seq {seq} rotates the audit key, but key {self.ids[old]}, which made the records before it, did not "
            "sign the rotation: its previous-key MAC does not match",
        )

    def finish(self, count: int, require_current: bool) -> ChainProblem | _Held | None:
        """What the whole chain owes the keys given, once every record passed."""
        if self.held is not None:
            return self.held
        if not self.keys or count == 0:
            return None
        if self.keyed_from is None:
            problem = ChainProblem(
                1,
                "UNKEYED",
                "seq 1 carries no MAC, nor does any record, but BACKFILLCTL_AUDIT_KEY is set: a chain written with "
                "the key carries MACs from seq 1 or from an `audit adopt-key` record (a chain stripped of its MACs "
                "looks like this); if this chain was never keyed, check it and run `backfillctl audit adopt-key`",
            )
            return _Held(problem, 0, 0, GENESIS)
        active = self.active
        if require_current and active is not None and active != 0:
            return ChainProblem(
                self.active_from,
                "OLD_KEY",
                f"the records from seq {self.active_from} on carry the MACs of key {self.ids[active]} from "
                "BACKFILLCTL_AUDIT_KEYS_PREVIOUS, not of BACKFILLCTL_AUDIT_KEY: no record rotates the chain to the "
                "current key (records cut off after a rotation and replaced, or the two variables swapped)",
            )
        return None

    def result(self, count: int, head_seq: int, head_hash: str, problem: ChainProblem | None) -> VerifyResult:
        active = self.active
        return VerifyResult(
            count,
            head_seq,
            head_hash,
            problem,
            self.keyed_from,
            bool(self.keys),
            self.adoption,
            tuple(self.rotations),
            None if active is None or active == UNKNOWN else self.ids[active],
            self.pinned_by,
        )


def verify_chain(
    links: Iterable[ChainLink],
    expect_head: str | None = None,
    key: bytes | None = None,
    *,
    previous: Sequence[bytes] = (),
    require_current: bool = True,
) -> VerifyResult:
    """Recompute the chain in seq order; stop at the first problem. Streams: O(1) memory.

    With `key` (and the `previous` keys), every MAC must be one of theirs, keys change only by rotation records,
    keying starts at seq 1 or with an adoption record, and the newest records carry `key`'s MACs (unless not
    `require_current`: `audit rotate-key` checks a chain still under the old key). With or without a key, a record
    without a MAC after one with a MAC is an error, and so is keying that starts after seq 1 without an adoption."""
    keys = _Keys.of(() if key is None else (key, *previous))
    prev, expected_seq, count, anchor_seen = GENESIS, 1, 0, expect_head is None
    for link in links:
        checked = _check(link, prev, expected_seq)
        problem = checked if isinstance(checked, ChainProblem) else keys.step(link, checked, count, prev)
        if isinstance(problem, _Held):
            return keys.result(problem.count, problem.head_seq, problem.head_hash, problem.problem)
        if problem is not None:
            return keys.result(count, expected_seq - 1, prev, problem)
        anchor_seen = anchor_seen or link[2] == expect_head
        prev, expected_seq, count = link[2], link[0] + 1, count + 1
    last = keys.finish(count, require_current)
    if isinstance(last, _Held):
        return keys.result(last.count, last.head_seq, last.head_hash, last.problem)
    if last is None and not anchor_seen:
        message = f"the expected head {expect_head} is not in the chain, which ends at seq {expected_seq - 1}"
        last = ChainProblem(expected_seq, "TRUNCATED", message)
    return keys.result(count, expected_seq - 1, prev, last)


def _check(link: ChainLink, prev: str, expected_seq: int) -> ChainProblem | str:
    """What is wrong with the record's place or hash, else its body (read and hashed correctly)."""
    seq, prev_hash, hash_, body, _ = link
    if seq != expected_seq:
        return _out_of_sequence(seq, expected_seq)
    if isinstance(body, Unreadable):
        return ChainProblem(seq, "INVALID", f"seq {seq} cannot be read: {body.reason}")
    if prev_hash != prev:
        return ChainProblem(seq, "BROKEN", f"seq {seq} does not follow seq {seq - 1} (reordered or replaced)")
    if chain_hash(prev, body) != hash_:
        return ChainProblem(seq, "INVALID", f"seq {seq} was modified after it was written")
    return body


def _out_of_sequence(seq: int, expected_seq: int) -> ChainProblem:
    if seq < 1:
        return ChainProblem(
            seq, "INVALID", f"seq {seq} is outside the chain, which starts at seq 1: a row added by hand"
        )
    if seq < expected_seq:
        return ChainProblem(seq, "DUPLICATE", f"seq {seq} occurs more than once")
    return ChainProblem(expected_seq, "GAP", f"seq {expected_seq} is missing (next is {seq})")
