"""Render audit records and verification results (pure)."""

from __future__ import annotations

import json

from controller.core.audit.chain import AuditRecord, VerifyResult
from controller.core.documents.escaping import plain
from controller.core.model.spec import canonical_json


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
    if result.problem is None:
        head = f"OK: {result.count} events, chain intact; head seq {result.head_seq} hash {result.head_hash}\n"
        return head + f"  {keyed_text(result)}\n"
    f = result.problem
    return (
        f"{f.kind} at seq {f.seq}: {f.message}\n"
        f"  verified {result.count} events before it; last good seq {result.head_seq} hash {result.head_hash}\n"
    )


def keyed_text(result: VerifyResult) -> str:
    """What the keyed chain proves (or cannot) about a chain that verified."""
    first = result.keyed_from
    if not result.key_checked:
        unchecked = "" if first is None else f"; the MACs of seq {first} to {result.head_seq} were not checked"
        return (
            "not keyed: BACKFILLCTL_AUDIT_KEY is not set, so a record appended with a recomputed hash by anyone "
            f"with write access to the store cannot be detected{unchecked}"
        )
    if first is None:
        return (
            "not keyed: no record carries a MAC yet (a reconcile with BACKFILLCTL_AUDIT_KEY set writes them), "
            "so a record appended with a recomputed hash by anyone with write access to the store cannot be detected"
        )
    before = "" if first == 1 else f"; seq 1 to {first - 1} predate the key and are pinned by the MAC of seq {first}"
    return f"keyed from seq {first}: every record from it on carries a MAC made with BACKFILLCTL_AUDIT_KEY{before}"
