"""The outbox through the reconciler and the delivery step (fake Airflow for the reconciler, a MockTransport
receiver): rows in the audit record's transaction, delivery, backoff, and `notify status`."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import httpx
import pytest

from controller.adapters.webhook import WebhookClient
from controller.cli import main
from controller.commands.loop.notify import DeliveryFailure, deliver, notify_status, status_render
from controller.commands.loop.passhooks import MonitorOptions, PassHooks
from tests.commands.reconcile.harness import Bench
from tests.fakes.airflow import FakeAirflow

POLICY = """\
version: 1
notify:
  receivers:
    ops: {webhook_env: HOOK_OPS, format: json}
  default_receivers: [ops]
"""
NOW = datetime(2030, 1, 1, tzinfo=UTC)
URL = "http://receiver.invalid/hook/s3cr3t"


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[Bench]:
    b = Bench(tmp_path, fake=FakeAirflow())
    b.policy(POLICY)
    yield b
    b.close()


def receiver(answers: list[int], seen: list[httpx.Request]) -> WebhookClient:
    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(answers.pop(0) if answers else 200, text="fine")

    return WebhookClient(transport=httpx.MockTransport(handle))


def test_created_event_is_queued_delivered_once_and_retried_after_a_failure(bench: Bench) -> None:
    bench.spec("s1")
    bench.run()
    (row,) = bench.store.due_notifications("9999")
    created = next(e for e in bench.events("s1") if e.entry.action == "create" and e.entry.phase == "outcome")
    assert (row.event, row.receiver, row.audit_seq, row.key) == (
        "created",
        "ops",
        created.seq,
        f"{created.hash[:32]}.ops",
    )

    seen: list[httpx.Request] = []
    failed = deliver(
        bench.store,
        bench.reconciler().load().policy,
        {"HOOK_OPS": URL},
        bench.settings(),
        client=receiver([503], seen),
        clock=lambda: NOW,
    )
    assert failed.failed == [DeliveryFailure("ops", "receiver ops: HTTP 503 fine")]
    assert bench.store.due_notifications("2030-01-01T00:00:04.000000Z") == []  # backoff: 5 s (+ up to 25 % jitter)
    view = status_render(notify_status(bench.settings()))
    assert (
        view.splitlines()[0] == "1 undelivered notification(s): 0 pending, 1 failed (retried with backoff); 0 delivered"
    )
    assert "s3cr3t" not in view

    later = deliver(
        bench.store,
        bench.reconciler().load().policy,
        {"HOOK_OPS": URL},
        bench.settings(),
        client=receiver([], seen),
        clock=lambda: NOW.replace(minute=1),
    )
    assert later.delivered == [row.key]
    assert [r.headers["Idempotency-Key"] for r in seen] == [row.key, row.key]
    body = json.loads(seen[-1].content)
    assert (body["format_version"], body["event"], body["spec"], body["idempotency_key"]) == (
        1,
        "created",
        "s1",
        row.key,
    )
    nothing = deliver(
        bench.store,
        bench.reconciler().load().policy,
        {"HOOK_OPS": URL},
        bench.settings(),
        client=receiver([], seen),
        clock=lambda: NOW.replace(minute=2),
        everything=True,
    )
    assert (nothing.delivered, len(seen)) == ([], 2)


def test_a_missing_environment_variable_is_a_failed_delivery_that_names_it(bench: Bench) -> None:
    bench.spec("s2")
    bench.run()
    stats = deliver(bench.store, bench.reconciler().load().policy, {}, bench.settings(), clock=lambda: NOW)
    assert stats.failed == [DeliveryFailure("ops", "receiver ops: the environment variable HOOK_OPS is not set")]


def test_markdown_report_has_a_text_calendar_offline(
    bench: Bench, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bench.spec("s3")
    bench.run()
    monkeypatch.setenv("BACKFILLCTL_STORE_URL", bench.store_url)
    monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", str(bench.specs))
    assert main(["report", "s3"]) == 0
    out = capsys.readouterr().out
    calendar = out.split("## Calendar\n\n```\n")[1].split("```")[0]
    assert calendar.splitlines()[2:] == [
        "0 cells: none",
        "Only the failed dates the store recorded are placed: the controller does not know the DAG's schedule. "
        "Set BACKFILLCTL_AIRFLOW_URL to read every run of the range from Airflow for the full map.",
    ]
    assert out.index("## Calendar") < out.index("## Audit trail")


def test_a_failed_delivery_counts_against_its_receiver_in_the_metrics(bench: Bench) -> None:
    """The counter's label is the receiver the failure belongs to, as a value (not read back out of its message)."""
    bench.spec("s2")
    reconciler = bench.reconciler()
    with PassHooks(bench.settings(), MonitorOptions(port=0), env={}, clock=lambda: NOW) as hooks:
        with hooks.around(reconciler) as done:
            done(reconciler.run_once())
        assert hooks.metrics is not None
        failures = hooks.metrics.registry.get_sample_value(
            "backfillctl_notification_delivery_failures_total", {"receiver": "ops"}
        )
    assert failures == 1.0
    (row,) = bench.store.due_notifications("9999")
    assert (row.receiver, row.attempts, row.last_error) == (
        "ops",
        1,
        "receiver ops: the environment variable HOOK_OPS is not set",
    )
