"""Audit records and their hash chain (pure): hash = sha256(prev_hash + canonical JSON of the record).

A keyed chain adds mac = HMAC-SHA256(key, hash) per record: the hash already commits to the record and to
every record before it, so a MAC over it authenticates both, and only a holder of the key can make one.
The walk that checks a chain, and the rules of its keys (adoption, rotation), are in `keying`.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields, replace
from datetime import UTC, datetime
from typing import Any

from controller import __version__
from controller.core.audit.vocabulary import Action, AuditPhase, Outcome
from controller.core.documents.storable import SURROGATE, storable
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
    """The record and its hash; an entry holding text UTF-8 cannot write (a lone surrogate from outside) is
    recorded, and hashed, with each such character as its `\\uXXXX` escape (any other entry: as it is)."""
    try:
        hash_ = chain_hash(prev_hash, canonical_json(AuditRecord(seq, time, entry, prev_hash).body()))
    except UnicodeEncodeError:
        entry = encodable(entry)
        hash_ = chain_hash(prev_hash, canonical_json(AuditRecord(seq, time, entry, prev_hash).body()))
    return AuditRecord(seq, time, entry, prev_hash, hash_, None if key is None else record_mac(key, hash_))


def encodable(entry: AuditEntry) -> AuditEntry:
    """The entry with every lone surrogate in its texts, `request` and `response` (keys too) escaped."""
    return replace(entry, **{name: storable(getattr(entry, name), SURROGATE) for name in ENTRY_FIELDS})


@dataclass(frozen=True, slots=True)
class ChainProblem:
    seq: int
    # GAP | DUPLICATE | INVALID | BROKEN | TRUNCATED (the hashes); UNKEYED | FORGED | UNADOPTED | UNKNOWN_KEY |
    # OLD_KEY (the keys: core/audit/keying.py)
    kind: str
    message: str


@dataclass(frozen=True, slots=True)
class KeyEvent:
    """An `audit adopt-key` or `audit rotate-key` record, as verify reports it (who, when, which key)."""

    seq: int
    kind: str  # adopted | rotated
    actor: str
    time: str
    key_id: str  # the key it adopted or rotated to
    previous_key_id: str | None = None  # rotated: the key it replaced
    previous_checked: bool = False  # rotated: the old key's MAC in it was checked (that key was given)


@dataclass(frozen=True, slots=True)
class VerifyResult:
    count: int
    head_seq: int
    head_hash: str
    problem: ChainProblem | None
    keyed_from: int | None = None  # the first seq that carries a MAC (every later one must carry one too)
    key_checked: bool = False  # the MACs were checked against a key
    adoption: KeyEvent | None = None  # the record that keyed an unkeyed chain
    rotations: tuple[KeyEvent, ...] = ()
    key_id: str | None = None  # the given key that made the newest MACs (None: no key given, or none made them)
    pinned_by: int | None = None  # the rotation whose MAC pins earlier records made with a key not given

    @property
    def ok(self) -> bool:
        return self.problem is None
