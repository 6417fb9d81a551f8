"""Render audit records and verification results (pure)."""

from __future__ import annotations

import json

from controller.core.audit import AuditRecord, VerifyResult
from controller.core.escaping import plain
from controller.core.spec import canonical_json


def record_line(record: AuditRecord) -> str:
    e = record.entry
    parts = [f"#{record.seq}", record.time, e.actor, f"{e.action}/{e.phase}"]
    parts += [
        f"{k}={v}"
        for k, v in (
            ("outcome", e.outcome),
            ("spec", e.spec_name),
            ("dag", e.dag_id),
            ("backfill", e.backfill_id),
            ("commit", (e.git_commit or "")[:12] or None),
        )
        if v is not None
    ]
    if e.message:
        parts.append(f"— {e.message}")
    return plain(" ".join(parts))  # one line per record: a message cannot forge the next record's line


def record_jsonl(record: AuditRecord) -> str:
    return canonical_json(record.as_json())


def record_json(record: AuditRecord) -> str:
    return json.dumps(record.as_json(), sort_keys=True)


def verify_text(result: VerifyResult) -> str:
    if result.finding is None:
        return f"OK: {result.count} events, chain intact; head seq {result.head_seq} hash {result.head_hash}\n"
    f = result.finding
    return (
        f"{f.kind} at seq {f.seq}: {f.message}\n"
        f"  verified {result.count} events before it; last good seq {result.head_seq} hash {result.head_hash}\n"
    )
