"""Render audit records and verification results (pure)."""

from __future__ import annotations

import json

from controller.core.audit.chain import AuditRecord, KeyEvent, VerifyResult
from controller.core.audit.vocabulary import Outcome
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
        events = [*([result.adoption] if result.adoption else []), *result.rotations]
        return head + f"  {keyed_text(result)}\n" + "".join(f"  {key_event_text(e)}\n" for e in events)
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
    if not result.rotations:
        return f"keyed from seq {first}: every record from it on carries a MAC made with BACKFILLCTL_AUDIT_KEY{before}"
    last = result.rotations[-1].seq
    earlier = (
        "those before it a previous key's, checked with BACKFILLCTL_AUDIT_KEYS_PREVIOUS"
        if result.pinned_by is None
        else f"those before seq {result.pinned_by} a key not given, so their MACs were not checked: they are pinned "
        f"by the MAC of seq {result.pinned_by}"
    )
    return (
        f"keyed from seq {first}: every record from it on carries a MAC, from seq {last} (the last rotation) on made "
        f"with BACKFILLCTL_AUDIT_KEY, {earlier}{before}"
    )


def key_event_text(event: KeyEvent) -> str:
    """Who adopted or rotated the key, when, at which seq (the actor is outside text: escaped)."""
    who = plain(f"by {event.actor} at {event.time}")
    if event.kind == Outcome.ADOPTED:
        return f"key {event.key_id} adopted at seq {event.seq} {who}"
    checked = (
        "the old key's MAC in it checked"
        if event.previous_checked
        else "the old key's MAC in it not checked (that key was not given)"
    )
    return f"key rotated at seq {event.seq} {who}: {event.previous_key_id} → {event.key_id}, {checked}"


def key_record_text(record: AuditRecord) -> str:
    """What `audit adopt-key` and `audit rotate-key` say they wrote, and what follows for the operator."""
    seq, facts = record.seq, dict((record.entry.request or {}).get("audit_key") or {})
    if record.entry.outcome == Outcome.ADOPTED:
        pinned = f": seq 1 to {seq - 1}, written without a key, are pinned by its MAC" if seq > 1 else ""
        return (
            f"adopted the audit key {facts.get('key_id')} at seq {seq}{pinned}\n"
            "  from now on every writer (reconcile, stop, store unlock) needs BACKFILLCTL_AUDIT_KEY, and "
            "`backfillctl audit verify` with it checks every record from this one on\n"
        )
    return (
        f"rotated the audit key at seq {seq}: {facts.get('previous_key_id')} → {facts.get('key_id')}; this record "
        "carries the MACs of both\n"
        "  set BACKFILLCTL_AUDIT_KEY to the new key for every writer now: one with the old key refuses to append; "
        f"keep the old key in BACKFILLCTL_AUDIT_KEYS_PREVIOUS to check the records before seq {seq} too (without "
        "it they are pinned by this record's MAC)\n"
    )
