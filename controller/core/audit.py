"""Audit records and their hash chain (pure): hash = sha256(prev_hash + canonical JSON of the record)."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields
from typing import Any

from controller.core.spec import canonical_json

GENESIS = "0" * 64


@dataclass(frozen=True, slots=True)
class AuditEntry:
    """What a caller records; the store adds seq, time, prev_hash and hash."""

    action: str
    phase: str  # intent | outcome | observation
    actor: str
    controller_version: str
    outcome: str | None = None
    git_commit: str | None = None
    spec_name: str | None = None
    spec_path: str | None = None
    spec_digest: str | None = None
    dag_id: str | None = None
    backfill_id: int | None = None
    request: Mapping[str, Any] | None = None
    response: Mapping[str, Any] | None = None
    message: str | None = None


ENTRY_FIELDS = tuple(f.name for f in fields(AuditEntry))


@dataclass(frozen=True, slots=True)
class AuditRecord:
    seq: int
    time: str  # RFC 3339 UTC, microseconds
    entry: AuditEntry
    prev_hash: str
    hash: str = field(default="")

    def body(self) -> dict[str, Any]:
        """The hashed content: everything but the hashes themselves."""
        entry = self.entry
        return {"seq": self.seq, "time": self.time, **{name: getattr(entry, name) for name in ENTRY_FIELDS}}

    def as_json(self) -> dict[str, Any]:
        return {**self.body(), "prev_hash": self.prev_hash, "hash": self.hash}


def chain_hash(prev_hash: str, body: Mapping[str, Any]) -> str:
    return hashlib.sha256((prev_hash + canonical_json(body)).encode()).hexdigest()


def seal(seq: int, time: str, entry: AuditEntry, prev_hash: str) -> AuditRecord:
    record = AuditRecord(seq, time, entry, prev_hash)
    return AuditRecord(seq, time, entry, prev_hash, chain_hash(prev_hash, record.body()))


@dataclass(frozen=True, slots=True)
class Finding:
    seq: int
    kind: str  # GAP | INVALID | BROKEN | TRUNCATED
    message: str


@dataclass(frozen=True, slots=True)
class VerifyResult:
    count: int
    head_seq: int
    head_hash: str
    finding: Finding | None

    @property
    def ok(self) -> bool:
        return self.finding is None


def verify_chain(records: Iterable[AuditRecord], expect_head: str | None = None) -> VerifyResult:
    """Recompute the chain in seq order; stop at the first problem. Streams: O(1) memory."""
    prev, expected_seq, count, anchor_seen = GENESIS, 1, 0, expect_head is None
    for record in records:
        finding = _check(record, prev, expected_seq)
        if finding is not None:
            return VerifyResult(count, expected_seq - 1, prev, finding)
        anchor_seen = anchor_seen or record.hash == expect_head
        prev, expected_seq, count = record.hash, record.seq + 1, count + 1
    if not anchor_seen:
        message = f"the expected head {expect_head} is not in the chain, which ends at seq {expected_seq - 1}"
        return VerifyResult(count, expected_seq - 1, prev, Finding(expected_seq, "TRUNCATED", message))
    return VerifyResult(count, expected_seq - 1, prev, None)


def _check(record: AuditRecord, prev: str, expected_seq: int) -> Finding | None:
    if record.seq != expected_seq:
        return Finding(expected_seq, "GAP", f"seq {expected_seq} is missing (next is {record.seq})")
    if record.prev_hash != prev:
        return Finding(
            record.seq, "BROKEN", f"seq {record.seq} does not follow seq {record.seq - 1} (reordered or replaced)"
        )
    if chain_hash(prev, record.body()) != record.hash:
        return Finding(record.seq, "INVALID", f"seq {record.seq} was modified after it was written")
    return None
