"""Slack bodies, exactly: every text from outside has `&`, `<` and `>` as entities and no bare `@here`,
`@channel` or `@everyone` (a zero-width space after the `@`), the plain header too; mrkdwn objects are
`verbatim` and nothing is unfurled.

Before the fix, a ticket's bare `@here` reached `text`, the header and a mrkdwn field as it was (Slack parses
bare mentions in non-verbatim mrkdwn), and links in a message were unfurled.
"""

from __future__ import annotations

from controller.core.audit.notify import SLACK_HEADER_LIMIT, Delivery, payload

DELIVERY = Delivery(1, "k1.team-orders", "team-orders", "created", "slack", 3, "T", {})
ZW = "\u200b"


def mrkdwn(text: str) -> dict[str, object]:
    return {"type": "mrkdwn", "text": text, "verbatim": True}


def test_hostile_ticket_and_message_exact_body() -> None:
    facts = {
        "event": "created",
        "spec": "orders-fix",
        "dag_id": "orders_daily",
        "ticket": "@here <!channel> CHG-1 & <script>alert(1)</script>",
        "backfill_id": 7,
        "message": "by <@U024BE7LH> for @Everyone: <https://evil.example|docs> & @channel",
        "from_date": "2025-01-01T00:00:00Z",
        "to_date": "2025-01-07T00:00:00Z",
    }
    ticket = f"@{ZW}here &lt;!channel&gt; CHG-1 &amp; &lt;script&gt;alert(1)&lt;/script&gt;"
    summary = f"Backfill created: orders-fix on orders_daily [{ticket}]"
    assert payload(DELIVERY, facts) == {
        "text": summary,
        "blocks": [
            {"type": "header", "text": {"type": "plain_text", "text": summary}},
            {
                "type": "section",
                "fields": [
                    mrkdwn("*Spec*\norders-fix"),
                    mrkdwn("*DAG*\norders_daily"),
                    mrkdwn(f"*Ticket*\n{ticket}"),
                    mrkdwn("*Backfill*\n7"),
                    mrkdwn("*Range*\n2025-01-01T00:00:00Z → 2025-01-07T00:00:00Z"),
                ],
            },
            {
                "type": "section",
                "text": mrkdwn(
                    f"by &lt;@U024BE7LH&gt; for @{ZW}Everyone: &lt;https://evil.example|docs&gt; &amp; @{ZW}channel"
                ),
            },
            {"type": "context", "elements": [mrkdwn("idempotency key `k1.team-orders` · audit seq 3")]},
        ],
        "unfurl_links": False,
        "unfurl_media": False,
    }


def test_mentions_are_broken_only_where_they_are_mentions() -> None:
    facts = {"event": "created", "spec": "s", "ticket": "@heretic @channels me@here.example @EVERYONE! <!here>"}
    (field,) = payload(DELIVERY, facts)["blocks"][1]["fields"][1:]
    assert field == mrkdwn(f"*Ticket*\n@heretic @channels me@here.example @{ZW}EVERYONE! &lt;!here&gt;")


def test_a_long_header_is_cut_before_an_entity_never_inside_it() -> None:
    facts = {"event": "created", "spec": "s", "ticket": "x" * 118 + "&&&&&&&&"}
    header = payload(DELIVERY, facts)["blocks"][0]["text"]["text"]
    # "Backfill created: s [" is 21 characters; 118 x's leave 11 for "&amp;" (5 each) and "…"
    assert header == "Backfill created: s [" + "x" * 118 + "&amp;&amp;…"
    assert len(header) <= SLACK_HEADER_LIMIT
