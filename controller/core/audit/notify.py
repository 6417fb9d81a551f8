"""Notifications (pure): which audited events notify whom, and what the webhook bodies look like.

The reconciler appends every audit record; `outbox_rows` decides, from the record's entry, the policy and
the spec, which receivers get which event.  The store writes those rows in the same transaction as the
record (the outbox), and a delivery step later posts `slack_payload` / `json_payload` bodies with an
idempotency key (`idempotency_key`: the record's hash and the receiver) in a header and in the body, so a
receiver can drop the duplicates an at-least-once delivery may send.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.core.audit import vocabulary
from controller.core.audit.chain import AuditEntry
from controller.core.documents.escaping import slack_pre, slack_text
from controller.core.model.notify_policy import Event, NotifyPolicy
from controller.core.model.spec import BackfillSpec, format_utc, parse_date

NOTIFY_FORMAT_VERSION = 1
TERMINAL_EVENTS = frozenset(
    {Event.SUCCEEDED, Event.COMPLETED_WITH_FAILURES, Event.CANCELLED, Event.VERIFICATION_FAILED}
)
FORMATS = ("slack", "json")
IDEMPOTENCY_HEADER = "Idempotency-Key"
SLACK_TEXT_LIMIT = 2900  # Slack refuses section texts over 3000 characters
SLACK_FIELD_LIMIT = 2000  # … a section field over 2000
SLACK_HEADER_LIMIT = 150  # … and a header over 150


def event_of(entry: AuditEntry) -> Event | None:
    """The notification event an audit entry is, if any (intents and plain observations are not)."""
    return vocabulary.event_of(entry.action, entry.phase, entry.outcome)


@dataclass(frozen=True, slots=True)
class Notification:
    """One outbox row before the store numbers it: the store adds the audit seq, hash and idempotency key."""

    receiver: str
    event: str
    format: str
    facts: Mapping[str, Any]


def outbox_rows(entry: AuditEntry, policy: NotifyPolicy, spec: BackfillSpec | None) -> tuple[Notification, ...]:
    """The notifications one audit entry causes: its event, if the policy wants it, to each receiver once."""
    event = event_of(entry)
    if event is None or event not in policy.events or not policy.receivers:
        return ()
    names = list(policy.default_receivers) + list(spec.notify if spec is not None else ())
    chosen = [r for r in (policy.receiver(n) for n in dict.fromkeys(names)) if r is not None]
    facts = event_facts(event, entry, spec)
    return tuple(Notification(r.name, event, r.format, facts) for r in chosen)


def event_facts(event: str, entry: AuditEntry, spec: BackfillSpec | None) -> dict[str, Any]:
    """What a downstream owner needs, known when the event is recorded (no secret is ever among it)."""
    facts: dict[str, Any] = {
        "event": event,
        "spec": entry.spec_name,
        "dag_id": entry.dag_id,
        "backfill_id": entry.backfill_id,
        "message": entry.message,
    }
    if spec is not None:
        facts |= {
            "ticket": spec.ticket,
            "reason": spec.reason,
            "requested_by": spec.requested_by,
            "approvers": list(spec.approvers),
            "from_date": format_utc(spec.from_date),
            "to_date": format_utc(spec.to_date),
            "downstream": list(spec.downstream),
        } | ({"drain_dag": True} if spec.drain_dag else {})  # the message says the DAG is left paused
    return facts


def idempotency_key(record_hash: str, receiver: str) -> str:
    """Stable per (audit record, receiver): a retry, a restart or a second reconciler sends the same key."""
    return f"{record_hash[:32]}.{receiver}"


@dataclass(frozen=True, slots=True)
class Delivery:
    """A stored outbox row, as the delivery step reads it."""

    id: int
    key: str
    receiver: str
    event: str
    format: str
    audit_seq: int
    time: str
    facts: Mapping[str, Any]
    attempts: int = 0
    last_error: str | None = None


def enrich(
    facts: Mapping[str, Any], runs: Mapping[str, Any] | None, report_text: str | None, coverage: str | None = None
) -> dict[str, Any]:
    """Terminal events also carry the outcome: runs by state, failed dates/partitions, the report, and the version
    coverage measured when the spec ended (its one line; only when measured)."""
    if facts.get("event") not in TERMINAL_EVENTS:
        return dict(facts)
    runs = runs or {}
    return {
        **facts,
        "runs": dict(runs.get("counts", {})),
        "failed_dates": [format_utc(parse_date(d)) for d in runs.get("failed_dates", [])],
        "failed_partitions": list(runs.get("failed_partitions", [])),
        "report": report_text,
    } | ({"coverage": coverage} if coverage is not None else {})


def json_payload(delivery: Delivery, facts: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "format_version": NOTIFY_FORMAT_VERSION,
        "idempotency_key": delivery.key,
        "event": delivery.event,
        "time": delivery.time,
        "audit_seq": delivery.audit_seq,
        **{k: v for k, v in sorted(facts.items()) if k != "event"},
    }


_TITLES: dict[str, str] = {
    Event.CREATED: "Backfill created",
    Event.PROMOTED: "Backfill promoted after its canary",
    Event.PAUSED: "Backfill paused",
    Event.HALTED: "Backfill halted (too many failures)",
    Event.STUCK: "Backfill stuck",
    Event.SUCCEEDED: "Backfill succeeded",
    Event.COMPLETED_WITH_FAILURES: "Backfill completed with failures",
    Event.CANCELLED: "Backfill cancelled",
    Event.REFUSED: "Backfill refused",
    Event.ORPHANED: "Backfill orphaned (its spec was deleted)",
    Event.REHEARSED: "Backfill rehearsed",
    Event.VERIFIED: "Backfill verified",
    Event.VERIFICATION_FAILED: "Backfill verification failed",
    Event.PUBLISHED: "Backfill published",
}


def summary_line(event: str, facts: Mapping[str, Any]) -> str:
    spec = facts.get("spec") or "backfillctl"
    where = f" on {facts['dag_id']}" if facts.get("dag_id") else ""
    ticket = f" [{facts['ticket']}]" if facts.get("ticket") else ""
    return f"{_TITLES.get(event, event)}: {spec}{where}{ticket}"


def slack_payload(delivery: Delivery, facts: Mapping[str, Any]) -> dict[str, Any]:
    """Slack's incoming-webhook JSON: `text` is the fallback (notifications), `blocks` the message. Every text
    from outside is `slack_text` (entities, no mention) in every text object, the plain header too; mrkdwn
    objects are `verbatim` (Slack links no bare URL, channel or name in them) and nothing is unfurled."""
    text = summary_line(delivery.event, facts)
    fields = [
        _mrkdwn(f"*{label}*\n{_fit(value, SLACK_FIELD_LIMIT - len(label) - 3)}")
        for label, value in (
            ("Spec", facts.get("spec")),
            ("DAG", facts.get("dag_id")),
            ("Ticket", facts.get("ticket")),
            ("Backfill", facts.get("backfill_id")),
            ("Range", _range(facts)),
            ("Runs", _runs(facts.get("runs"))),
        )
        if value not in (None, "", {})
    ]
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _fit(text, SLACK_HEADER_LIMIT)}},
        *([{"type": "section", "fields": fields[:10]}] if fields else []),
    ]
    details = _details(facts)
    if details:
        blocks.append({"type": "section", "text": _mrkdwn(details[:SLACK_TEXT_LIMIT])})
    key = f"idempotency key `{slack_text(delivery.key)}` · audit seq {delivery.audit_seq}"
    blocks.append({"type": "context", "elements": [_mrkdwn(key)]})
    return {"text": slack_text(text), "blocks": blocks, "unfurl_links": False, "unfurl_media": False}


def _mrkdwn(text: str) -> dict[str, Any]:
    return {"type": "mrkdwn", "text": text, "verbatim": True}


def _fit(value: object, limit: int) -> str:
    """`slack_text` of the longest head of `value` that fits `limit` characters with its `…` (no entity cut)."""
    raw = str(value)
    if len(slack_text(raw)) <= limit:
        return slack_text(raw)
    low, high = 0, len(raw)
    while low < high:  # an escaped head never gets shorter as it gets longer
        mid = (low + high + 1) // 2
        low, high = (mid, high) if len(slack_text(raw[:mid])) < limit else (low, mid - 1)
    return slack_text(raw[:low]) + "…"


def _range(facts: Mapping[str, Any]) -> str | None:
    if not facts.get("from_date"):
        return None
    return f"{facts['from_date']} → {facts['to_date']}"


def _runs(runs: Any) -> str | None:
    if not runs:
        return None
    return ", ".join(f"{count} {state}" for state, count in sorted(runs.items()))


def _details(facts: Mapping[str, Any]) -> str:
    """mrkdwn: the message, the failed dates and the report, each escaped (Slack parses `<…>` anywhere)."""
    lines = [slack_text(facts["message"])] if facts.get("message") else []
    failed: Sequence[str] = facts.get("failed_partitions") or [_when(d) for d in facts.get("failed_dates") or []]
    if failed:
        shown = ", ".join(failed[:30]) + (f" … and {len(failed) - 30} more" if len(failed) > 30 else "")
        lines.append(f"*Failed ({len(failed)})*: {slack_text(shown)}")
    if facts.get("coverage"):
        lines.append(f"*Version coverage*: {slack_text(str(facts['coverage']))}")
    if facts.get("report"):
        lines.append(slack_pre(str(facts["report"])[: SLACK_TEXT_LIMIT - 200]))
    return "\n".join(lines)


def _when(moment: str) -> str:
    """A daily run's date; any other run's whole time (an hourly DAG's failures of one day stay apart)."""
    return moment[:10] if moment.endswith("T00:00:00Z") else moment


def payload(delivery: Delivery, facts: Mapping[str, Any]) -> dict[str, Any]:
    return slack_payload(delivery, facts) if delivery.format == "slack" else json_payload(delivery, facts)
