"""Which audited events notify whom, and the webhook bodies (pure core)."""

from __future__ import annotations

import json

import pytest

from controller.core.audit.chain import AuditEntry
from controller.core.audit.notify import Delivery, enrich, event_of, outbox_rows, payload
from controller.core.model.notify_policy import EVENTS, NotifyPolicy, Receiver, parse_notify
from tests.core.specs import loaded, text

SPEC = loaded(text(name="orders-fix") + "notify: [team-orders, team-finance]\n", name="orders-fix").spec
POLICY = parse_notify(
    {
        "receivers": {
            "team-orders": {"webhook_env": "HOOK_ORDERS", "format": "slack"},
            "team-finance": {"webhook_env": "HOOK_FINANCE", "format": "json"},
            "oncall": {"webhook_env": "HOOK_ONCALL"},
        },
        "default_receivers": ["oncall", "team-orders"],
    }
)


def entry(action: str, phase: str, outcome: str | None, **more: object) -> AuditEntry:
    return AuditEntry(action=action, phase=phase, actor="a", controller_version="0", outcome=outcome, **more)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("action", "phase", "outcome", "event"),
    [
        ("create", "outcome", "created", "created"),
        ("create", "outcome", "recovered-after-ambiguous", "created"),
        ("create", "outcome", "rejected", None),
        ("create", "intent", None, None),
        ("pause", "outcome", "done", "paused"),
        ("pause", "intent", None, None),
        ("unpause", "outcome", "done", None),
        ("observe", "observation", "Succeeded", "succeeded"),
        ("observe", "observation", "CompletedWithFailures", "completed_with_failures"),
        ("observe", "observation", "Cancelled", "cancelled"),
        ("observe", "observation", "Orphaned", "orphaned"),
        ("observe", "observation", "Blocked", "refused"),
        ("observe", "observation", "Running", None),
        ("finding", "observation", "stuck", "stuck"),
        ("finding", "observation", "dag-paused", None),
        ("reconcile", "observation", "refused", "refused"),
        ("reconcile", "observation", "applied", None),
    ],
)
def test_event_of(action: str, phase: str, outcome: str | None, event: str | None) -> None:
    assert event_of(entry(action, phase, outcome)) == event


def test_defaults_and_the_specs_own_receivers_each_get_the_event_once() -> None:
    rows = outbox_rows(entry("observe", "observation", "Succeeded", spec_name="orders-fix"), POLICY, SPEC)
    assert [(r.receiver, r.format, r.event) for r in rows] == [
        ("oncall", "slack", "succeeded"),
        ("team-orders", "slack", "succeeded"),
        ("team-finance", "json", "succeeded"),
    ]
    assert rows[0].facts["ticket"] == "CHG-1"
    assert rows[0].facts["from_date"] == "2025-01-01T00:00:00Z"


def test_events_outside_the_policy_list_and_policies_without_receivers_notify_nobody() -> None:
    only_done = NotifyPolicy(POLICY.receivers, events=("succeeded",), default_receivers=("oncall",))
    assert outbox_rows(entry("create", "outcome", "created"), only_done, SPEC) == ()
    assert outbox_rows(entry("observe", "observation", "Succeeded"), NotifyPolicy(), SPEC) == ()
    assert parse_notify(None).events == EVENTS


def test_json_payload_is_versioned_and_carries_the_key_and_the_outcome() -> None:
    delivery = Delivery(7, "abc.team-finance", "team-finance", "completed_with_failures", "json", 12, "T", {})
    facts = enrich(
        {"event": "completed_with_failures", "spec": "orders-fix", "dag_id": "d"},
        {"counts": {"success": 5, "failed": 2}, "failed_dates": ["2025-01-02T00:00:00Z"]},
        "# report",
    )
    body = payload(delivery, facts)
    assert body == {
        "format_version": 1,
        "idempotency_key": "abc.team-finance",
        "event": "completed_with_failures",
        "time": "T",
        "audit_seq": 12,
        "spec": "orders-fix",
        "dag_id": "d",
        "runs": {"success": 5, "failed": 2},
        "failed_dates": ["2025-01-02T00:00:00Z"],
        "failed_partitions": [],
        "report": "# report",
    }


def test_slack_payload_has_a_fallback_text_blocks_and_the_key() -> None:
    delivery = Delivery(1, "k1.team-orders", "team-orders", "succeeded", "slack", 3, "T", {})
    facts = {"event": "succeeded", "spec": "orders-fix", "dag_id": "orders_daily", "ticket": "CHG-1"}
    body = payload(delivery, enrich(facts, {"counts": {"success": 7}}, "done"))
    assert body["text"] == "Backfill succeeded: orders-fix on orders_daily [CHG-1]"
    assert [b["type"] for b in body["blocks"]] == ["header", "section", "section", "context"]
    assert "idempotency key `k1.team-orders`" in json.dumps(body)
    assert body["blocks"][1]["fields"][-1] == {"type": "mrkdwn", "text": "*Runs*\n7 success", "verbatim": True}
    assert (body["unfurl_links"], body["unfurl_media"]) == (False, False)


def test_slack_details_list_daily_failures_by_date_and_hourly_ones_by_time() -> None:
    delivery = Delivery(1, "k1.team-orders", "team-orders", "completed_with_failures", "slack", 3, "T", {})
    facts = {"event": "completed_with_failures", "spec": "s"}
    daily = enrich(facts, {"failed_dates": ["2025-01-02T00:00:00Z", "2025-01-04T00:00:00Z"]}, None)
    hourly = enrich(facts, {"failed_dates": ["2025-01-02T00:00:00Z", "2025-01-02T03:00:00Z"]}, None)
    assert "*Failed (2)*: 2025-01-02, 2025-01-04" in json.dumps(payload(delivery, daily))
    assert "*Failed (2)*: 2025-01-02, 2025-01-02T03:00:00Z" in json.dumps(payload(delivery, hourly))


def test_receiver_lookup() -> None:
    assert POLICY.receiver("oncall") == Receiver("oncall", "HOOK_ONCALL", "slack")
    assert POLICY.receiver("nobody") is None
