"""Audit records and their hash chain (pure): hash = sha256(prev_hash + canonical JSON of the record).

A keyed chain adds mac = HMAC-SHA256(key, hash) per record: the hash already commits to the record and to
every record before it, so a MAC over it authenticates both, and only a holder of the key can make one.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from controller import __version__
from controller.core.audit.vocabulary import Action, AuditPhase, Outcome
from controller.core.model.spec import canonical_json

GENESIS = "0" * 64


TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"  # fixed width, UTC: text order is time order (the store writes it)


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """What a caller records; the store adds seq, time, prev_hash and hash."""

    action: str  # an `Action` (read back from the store as the text it is)
    phase: str  # an `AuditPhase`
    actor: str
    controller_version: str
    outcome: str | None = None  # an `Outcome`, an observed `Phase`, or a finding's kind
    git_commit: str | None = None
    spec_commit: str | None = None
    spec_name: str | None = None
    spec_path: str | None = None
    spec_digest: str | None = None
    dag_id: str | None = None
    backfill_id: int | None = None
    request: Mapping[str, Any] | None = None
    response: Mapping[str, Any] | None = None
    message: str | None = None


ENTRY_FIELDS = tuple(f.name for f in fields(AuditEntry))


def controller_event(
    action: Action, actor: str, outcome: Outcome, message: str, phase: AuditPhase = AuditPhase.OBSERVATION
) -> AuditEntry:
    """An event about the controller itself (lease, unlock, pass), not about one spec."""
    return AuditEntry(
        action=action, phase=phase, actor=actor, controller_version=__version__, outcome=outcome, message=message
    )


@dataclass(frozen=True, slots=True)
class AuditRecord:
    seq: int
    time: str  # RFC 3339 UTC, microseconds
    entry: AuditEntry
    prev_hash: str
    hash: str = field(default="")
    mac: str | None = None  # HMAC-SHA256(key, hash) in a keyed chain; not part of the hashed body

    def body(self) -> dict[str, Any]:
        """The hashed content: everything but the hashes themselves."""
        entry = self.entry
        return {"seq": self.seq, "time": self.time, **{name: getattr(entry, name) for name in ENTRY_FIELDS}}

    def as_json(self) -> dict[str, Any]:
        return {**self.body(), "prev_hash": self.prev_hash, "hash": self.hash, "mac": self.mac}

    @property
    def moment(self) -> datetime:
        """`time` as an aware datetime (the store writes TIME_FORMAT)."""
        return datetime.strptime(self.time, TIME_FORMAT).replace(tzinfo=UTC)

    def link(self) -> ChainLink:
        return self.seq, self.prev_hash, self.hash, canonical_json(self.body()), self.mac


@dataclass(frozen=True, slots=True)
class Unreadable:
    """A stored row that no backfillctl wrote: seq ≤ 0, a BLOB where text belongs, a `request` that is not JSON."""

    seq: int
    reason: str

    def describe(self) -> str:
        return f"audit record seq {self.seq} is unreadable: {self.reason}"


ChainLink = tuple[int, str, str, str | Unreadable, str | None]  # seq, prev_hash, hash, body JSON, mac
# everything in the body except request/response, in canonical (sorted) order; derived, so it cannot drift
SCALARS = tuple(sorted({"seq", "time", *ENTRY_FIELDS} - {"request", "response"}))


# canonical_json's settings in one prebuilt encoder: json.dumps builds a new one per call (5% of a verify)
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode


def body_text(scalars: Mapping[str, Any], request_json: str, response_json: str) -> str:
    """canonical_json(body) assembled around the already-canonical JSON of request and response.

    Keys sort as … < phase < request < response < seq < …, and inside JSON strings every quote is
    escaped, so `,"seq":` occurs once: where request and response belong.  Verifying 100k events then
    needs no JSON decoding; a property test pins the equality with canonical_json(body).
    """
    text = _CANONICAL(scalars)
    cut = text.index(',"seq":')
    return f'{text[:cut]},"request":{request_json},"response":{response_json}{text[cut:]}'


def chain_hash(prev_hash: str, body_json: str) -> str:
    return hashlib.sha256((prev_hash + body_json).encode()).hexdigest()


def key_bytes(key: str) -> bytes:
    """The key's bytes as the environment held them (UTF-8; undecodable bytes kept as they were)."""
    return key.encode(errors="surrogateescape")


def mac_of(key: bytes) -> Callable[[str], str]:
    """HMAC-SHA256 keyed with the key's bytes over the ASCII of a record's 64 hex digit hash, as hex.

    The key schedule is computed once and copied per record (the stdlib's HMAC.copy): 30% faster a verify."""
    keyed = hmac.new(key, digestmod=hashlib.sha256)

    def mac(hash_: str) -> str:
        one = keyed.copy()
        one.update(hash_.encode())
        return one.hexdigest()

    return mac


def record_mac(key: bytes, hash_: str) -> str:
    return mac_of(key)(hash_)


def seal(seq: int, time: str, entry: AuditEntry, prev_hash: str, key: bytes | None = None) -> AuditRecord:
    hash_ = chain_hash(prev_hash, canonical_json(AuditRecord(seq, time, entry, prev_hash).body()))
    return AuditRecord(seq, time, entry, prev_hash, hash_, None if key is None else record_mac(key, hash_))


@dataclass(frozen=True, slots=True)
class ChainProblem:
    seq: int
    kind: str  # GAP | DUPLICATE | INVALID | BROKEN | UNKEYED | FORGED | TRUNCATED
    message: str


@dataclass(frozen=True, slots=True)
class VerifyResult:
    count: int
    head_seq: int
    head_hash: str
    problem: ChainProblem | None
    keyed_from: int | None = None  # the first seq that carries a MAC (every later one must carry one too)
    key_checked: bool = False  # the MACs were checked against a key

    @property
    def ok(self) -> bool:
        return self.problem is None


def verify_chain(links: Iterable[ChainLink], expect_head: str | None = None, key: bytes | None = None) -> VerifyResult:
    """Recompute the chain in seq order; stop at the first problem. Streams: O(1) memory.

    With `key`, every MAC must be HMAC-SHA256(key, hash); with or without it, a record without a MAC after
    one with a MAC is an error (the chain is keyed from its first MAC on)."""
    prev, expected_seq, count, anchor_seen, keyed_from = GENESIS, 1, 0, expect_head is None, None
    mac = None if key is None else mac_of(key)
    for link in links:
        problem = _check(link, prev, expected_seq) or _check_mac(link, keyed_from, mac)
        if problem is not None:
            return VerifyResult(count, expected_seq - 1, prev, problem, keyed_from, key is not None)
        if keyed_from is None and link[4] is not None:
            keyed_from = link[0]
        anchor_seen = anchor_seen or link[2] == expect_head
        prev, expected_seq, count = link[2], link[0] + 1, count + 1
    problem = None
    if not anchor_seen:
        message = f"the expected head {expect_head} is not in the chain, which ends at seq {expected_seq - 1}"
        problem = ChainProblem(expected_seq, "TRUNCATED", message)
    return VerifyResult(count, expected_seq - 1, prev, problem, keyed_from, key is not None)


def _check(link: ChainLink, prev: str, expected_seq: int) -> ChainProblem | None:
    seq, prev_hash, hash_, body, _ = link
    if seq != expected_seq:
        return _out_of_sequence(seq, expected_seq)
    if isinstance(body, Unreadable):
        return ChainProblem(seq, "INVALID", f"seq {seq} cannot be read: {body.reason}")
    if prev_hash != prev:
        return ChainProblem(seq, "BROKEN", f"seq {seq} does not follow seq {seq - 1} (reordered or replaced)")
    if chain_hash(prev, body) != hash_:
        return ChainProblem(seq, "INVALID", f"seq {seq} was modified after it was written")
    return None


def _out_of_sequence(seq: int, expected_seq: int) -> ChainProblem:
    if seq < 1:
        return ChainProblem(
            seq, "INVALID", f"seq {seq} is outside the chain, which starts at seq 1: a row added by hand"
        )
    if seq < expected_seq:
        return ChainProblem(seq, "DUPLICATE", f"seq {seq} occurs more than once")
    return ChainProblem(expected_seq, "GAP", f"seq {expected_seq} is missing (next is {seq})")


def _check_mac(link: ChainLink, keyed_from: int | None, mac_of_key: Callable[[str], str] | None) -> ChainProblem | None:
    seq, _, hash_, _, mac = link
    if mac is None:
        if keyed_from is None:
            return None
        message = f"seq {seq} carries no MAC, but the chain is keyed from seq {keyed_from}: added without the key"
        return ChainProblem(seq, "UNKEYED", message)
    if mac_of_key is not None and mac != mac_of_key(hash_):  # an offline check of stored data: no timing oracle
        message = (
            f"seq {seq} was not made with BACKFILLCTL_AUDIT_KEY: its MAC does not match (appended, rewritten "
            "or re-hashed without the key, or written with another key)"
        )
        return ChainProblem(seq, "FORGED", message)
    return None
