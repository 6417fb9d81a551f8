"""Delivering the notification outbox, and `backfillctl notify status`.

`deliver` runs once after every reconcile pass with a time budget, so a dead receiver never stalls
reconciling: each delivery has a deadline of its own (the webhook client's), never past what is left of the
budget; a receiver that fails is skipped for the rest of the pass and its row is retried later with backoff
(capped at five minutes, never given up: the receiver gets its events when it is back, after a restart of the
reconciler too, since the outbox lives in the store). A delivery the budget cut short is left for the next pass
without counting as an attempt.
"""

from __future__ import annotations

import json
import logging
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from controller.adapters.store import Store
from controller.adapters.store.database import stamp
from controller.adapters.store.outbox import OutboxRow
from controller.adapters.webhook import WebhookClient, WebhookError
from controller.commands.reconcile.specfiles import validate_paths
from controller.commands.runtime.session import open_store
from controller.commands.runtime.settings import Settings
from controller.core.audit import notify
from controller.core.documents.escaping import plain_lines
from controller.core.model.policy import Policy
from controller.core.model.secret import url_problem
from controller.core.model.spec import BackfillSpec
from controller.core.rules.retrying import Backoff

log = logging.getLogger(__name__)
NOTIFY_BACKOFF = Backoff(base=5.0, cap=300.0, jitter=0.25, attempts=1_000_000)  # retried for as long as it takes
DEFAULT_BUDGET = 10.0  # seconds of delivering per pass at most


@dataclass(frozen=True, slots=True)
class DeliveryFailure:
    """A delivery that failed: to which receiver (the metric's label), and what it said (no URL, ever)."""

    receiver: str
    error: str  # "receiver NAME: what went wrong"


@dataclass
class DeliveryStats:
    delivered: list[str] = field(default_factory=list)  # idempotency keys
    failed: list[DeliveryFailure] = field(default_factory=list)
    deferred: int = 0  # due but left for the next pass (budget spent, or the receiver failed this pass)


def deliver(
    store: Store,
    policy: Policy,
    env: Mapping[str, str],
    settings: Settings,
    *,
    budget: float = DEFAULT_BUDGET,
    everything: bool = False,
    client: WebhookClient | None = None,
    clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    monotonic: Callable[[], float] = time.monotonic,
) -> DeliveryStats:
    """Post every due outbox row (oldest first) until the budget is spent; with `everything`, also rows still
    waiting for their backoff (a process's first pass: a restart is often the fix of what made them fail)."""
    stats = DeliveryStats()
    rows = store.due_notifications("9999" if everything else stamp(clock()))
    if not rows:
        return stats
    started, down = monotonic(), set[str]()
    reports = _Reports(store, settings, clock())
    with client or WebhookClient() as http:
        for row in rows:
            left = budget - (monotonic() - started)
            if row.receiver in down or left <= 0:
                stats.deferred += 1
                continue
            try:
                url = _url(policy, row, env)
                terminal = row.event in notify.TERMINAL_EVENTS
                facts = notify.enrich(row.facts, *reports.outcome(row)) if terminal else row.facts
                http.post(url, notify.payload(row, facts), row.key, receiver=row.receiver, within=left)
            except WebhookError as exc:
                down.add(row.receiver)
                if exc.timed_out and left < http.timeout:  # the pass's budget ran out, not the receiver's time
                    stats.deferred += 1
                    continue
                _failed(store, row, exc.message, clock())
                stats.failed.append(DeliveryFailure(row.receiver, exc.message))
                continue
            store.notification_delivered(row.id, stamp(clock()))
            stats.delivered.append(row.key)
    return stats


def _failed(store: Store, row: notify.Delivery, error: str, now: datetime) -> None:
    """The row waits for its next attempt (backoff); `error` is already free of the URL (the webhook adapter)."""
    retry_at = now + timedelta(seconds=NOTIFY_BACKOFF.delay(row.attempts + 1, random.random()))  # noqa: S311
    store.notification_failed(row.id, error, stamp(retry_at))
    log.warning("notification %s (%s) not delivered; will retry: %s", row.key, row.event, error)


def _url(policy: Policy, row: notify.Delivery, env: Mapping[str, str]) -> str:
    receiver = policy.notify.receiver(row.receiver)
    if receiver is None:
        raise WebhookError(f"receiver {row.receiver}: no longer declared in the policy's notify.receivers")
    url = env.get(receiver.webhook_env, "").strip()
    if not url:
        raise WebhookError(f"receiver {row.receiver}: the environment variable {receiver.webhook_env} is not set")
    problem = url_problem(url, ("http", "https"))
    if problem is not None:  # said without the URL: all of it is the secret
        raise WebhookError(f"receiver {row.receiver}: the environment variable {receiver.webhook_env} {problem}")
    return url


class _Reports:
    """The outcome of a spec for its terminal notifications: runs and the report text (read once per pass)."""

    def __init__(self, store: Store, settings: Settings, now: datetime) -> None:
        self.store, self.settings, self.now = store, settings, now
        self._specs: dict[str, BackfillSpec] | None = None

    def outcome(self, row: notify.Delivery) -> tuple[Mapping[str, object] | None, str | None, str | None]:
        """The runs, the report (down to its audit trail) and the version coverage line, as the store keeps them."""
        name = row.facts.get("spec")
        binding = self.store.binding(str(name)) if name else None
        if binding is None:
            return None, None, None
        if self._specs is None:
            self._specs = {s.name: s for s in validate_paths([], self.settings.specs_dir, self.now).specs}
        spec = self._specs.get(str(name))
        runs = None if binding.runs is None else binding.runs.as_json()
        covered = None if binding.coverage is None else binding.coverage.text()
        if spec is None:
            return runs, None, covered
        # drawn only for a terminal notification: a pass with nothing to deliver never loads the report's renderers
        from controller.core.render.change_record import change_record  # noqa: PLC0415
        from controller.core.render.report_markdown import report_markdown  # noqa: PLC0415

        text = report_markdown(change_record(spec, binding, ()))
        return runs, text.split("\n## Audit trail")[0].rstrip() + "\n", covered


@dataclass(frozen=True, slots=True)
class NotifyStatus:
    rows: list[OutboxRow]
    counts: dict[str, int]


def notify_status(settings: Settings) -> NotifyStatus:
    """Undelivered notifications (read-only: never creates, migrates or writes the store)."""
    with open_store(settings, read_only=True) as store:
        return NotifyStatus(store.undelivered_notifications(), store.notification_counts())


def status_render(view: NotifyStatus, *, json_format: bool = False) -> str:
    failed = sum(1 for r in view.rows if r.state == "failed")
    if json_format:
        rows = [
            {
                "key": r.key,
                "receiver": r.receiver,
                "event": r.event,
                "spec": r.spec,
                "audit_seq": r.audit_seq,
                "state": r.state,
                "attempts": r.attempts,
                "next_attempt_at": r.next_attempt_at,
                "last_error": r.last_error,
                "created_at": r.created_at,
            }
            for r in view.rows
        ]
        data = {"format_version": 1, "delivered": view.counts.get("delivered", 0), "undelivered": rows}
        return json.dumps(data, indent=2) + "\n"
    lines = [
        f"{len(view.rows)} undelivered notification(s): {len(view.rows) - failed} pending, {failed} failed "
        f"(retried with backoff); {view.counts.get('delivered', 0)} delivered"
    ]
    for r in view.rows:
        lines.append(
            f"  {r.state:<7} {r.receiver:<20} {r.event:<24} {r.spec or '-':<28} seq {r.audit_seq:<6} "
            f"attempts {r.attempts:<3} next {r.next_attempt_at}" + (f"  {r.last_error}" if r.last_error else "")
        )
    return plain_lines(lines)
