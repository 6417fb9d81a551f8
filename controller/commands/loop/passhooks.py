"""What happens around each reconcile pass besides reconciling: deliver the notification outbox,
update metrics and health, refresh the status page, log the pass.

`PassHooks` is opened once by `reconcile_loop`; `around(reconciler)` wraps one pass. Nothing here may stop
reconciling: delivery has a time budget, and a failure of these extras is logged, not raised.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from controller.adapters.logsetup import PASS_ID
from controller.adapters.monitor import Health, Metrics, MonitorServer, phase_counts
from controller.adapters.ping import ping
from controller.adapters.store.outbox import PENDING
from controller.commands.loop import notify as notify_cmd
from controller.commands.reconcile.reconciler import PassResult, Reconciler
from controller.commands.runtime.settings import Settings
from controller.core.model.binding import Phase
from controller.core.model.policy import Policy
from controller.core.render.plan import findings
from controller.errors import ControllerError

if TYPE_CHECKING:  # the status rows and page are drawn only for a port that serves them (never by `--once`)
    from controller.core.render.status import StatusRow

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MonitorOptions:
    port: int | None = None  # None: no HTTP server, and no metrics to keep (nothing would read them)
    host: str = "127.0.0.1"
    unhealthy_after: int = 3  # failed passes in a row
    refresh_seconds: int = 15
    deliver_budget: float = notify_cmd.DEFAULT_BUDGET
    host_names: tuple[str, ...] = ()  # Host names the port answers to besides its address (--metrics-host-name)
    expect_every: timedelta | None = None  # the dead-man's interval (--expect-every; else the policy's, else none)


class PassHooks:
    def __init__(
        self,
        settings: Settings,
        options: MonitorOptions,
        *,
        deliver: bool = True,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.settings, self.options, self.deliver, self.clock = settings, options, deliver, clock
        self.env = os.environ if env is None else env
        self.health = Health(options.unhealthy_after, expect_every=options.expect_every, clock=clock)
        self._first_delivery = True
        # metrics only where a port serves them: a pass under cron or `--once` neither keeps nor imports them
        self.metrics: Metrics | None = None
        self.server: MonitorServer | None = None
        if options.port is not None:
            self.metrics = Metrics()
            self.server = MonitorServer(
                self.metrics, self.health, options.host, options.port, host_names=options.host_names
            )
            log.info("serving /metrics, /healthz and the status page on %s", self.server.address)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()

    def __enter__(self) -> PassHooks:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def attach(self, reconciler: Reconciler) -> None:
        if self.metrics is not None:
            reconciler.client.observer = self.metrics.observe_request

    @contextlib.contextmanager
    def around(self, reconciler: Reconciler) -> Iterator[Callable[[PassResult], None]]:
        """Wrap one pass; call the yielded function with its result. An exception counts as a failed pass."""
        token = PASS_ID.set(uuid.uuid4().hex[:12])
        started = time.monotonic()
        try:
            yield lambda result: self._after(reconciler, result, time.monotonic() - started)
        except Exception as exc:
            self._failed(str(getattr(exc, "message", type(exc).__name__)))
            raise
        finally:
            PASS_ID.reset(token)

    def _failed(self, why: str) -> None:
        self.health.record(False, why)
        self._count(ok=False)
        log.info("pass failed: %s", why)  # the CLI reports the error itself; this line is for --log-format json

    def _after(self, reconciler: Reconciler, result: PassResult, seconds: float) -> None:
        plan = result.current
        ok = plan.complete
        if self.metrics is not None:
            self.metrics.pass_seconds.observe(seconds)
        self.health.expect_every = self.options.expect_every or result.policy.expect_every
        self.health.record(ok, "; ".join(result.errors)[:200] or "observation of Airflow incomplete")
        if ok and self.deliver:  # not for --dry-run, which reconciles nothing
            self._ping(result.policy.ping_url_env)
        self._count(ok=ok)
        for item, outcome in result.applied:
            log.info(
                "%s %s: %s",
                item.kind.value,
                item.spec,
                outcome,
                extra={"spec": item.spec, "dag": item.dag_id, "backfill": item.backfill_id},
            )
        for line in result.errors:
            log.info("pass error: %s", line)
        log.info("pass finished in %.1fs: %d change(s), plan complete: %s", seconds, len(result.applied), ok)
        if self.deliver:  # not in --dry-run: it writes to the store
            self._deliver(reconciler, result.policy)
        self._refresh(reconciler, result)

    def _count(self, *, ok: bool) -> None:
        if self.metrics is not None:
            self.metrics.passes.labels("ok" if ok else "failed").inc()
            self.metrics.failed_streak.set(self.health.failed_in_a_row)

    def _ping(self, variable: str | None) -> None:
        """Tell the external monitor this pass was good (the policy's `liveness.ping_url_env`); never stops a pass."""
        url = self.env.get(variable or "") if variable else None
        if variable and not url:
            log.warning("liveness.ping_url_env names %s, which is not set: no ping sent", variable)
        elif url:
            failed = ping(url)
            if failed is not None:
                log.warning("dead-man's ping (%s): %s", variable, failed)

    def _deliver(self, reconciler: Reconciler, policy: Policy) -> None:
        try:
            stats = notify_cmd.deliver(
                reconciler.store,
                policy,
                self.env,
                self.settings,
                budget=self.options.deliver_budget,
                everything=self._first_delivery,
            )
            self._first_delivery = False
        except ControllerError as exc:  # the store had a hiccup: the rows stay, the next pass tries again
            log.warning("notification delivery skipped this pass: %s", exc.message)
            return
        for failure in stats.failed:
            if self.metrics is not None:
                self.metrics.failed_deliveries.labels(failure.receiver).inc()
        if stats.delivered:
            log.info("delivered %d notification(s)", len(stats.delivered))

    def _refresh(self, reconciler: Reconciler, result: PassResult) -> None:
        if self.server is None:  # nothing serves the gauges: 1,000 specs' gauges cost 0.2 s a pass for nobody
            return
        from controller.core.render import status, status_page  # noqa: PLC0415 - only with a port (see above)
        from controller.core.render.links import ui_base  # noqa: PLC0415

        store, metrics = reconciler.store, self.server.metrics
        try:
            bindings = store.bindings()
            rows = status.status_rows(result.current, bindings, result.analysis)
            rows = status.with_links(rows, ui_base(self.settings.airflow_url), reconciler.client.capabilities)
            metrics.audit_head.set(store.audit_head_seq())
            metrics.undelivered.set(store.notification_counts().get(PENDING, 0))
        except ControllerError as exc:
            log.warning("metrics not refreshed this pass: %s", exc.message)
            return
        publish_rows(metrics, rows)
        lease = store.held_lease()
        self.health.lease_lost = not store.lease_ok()
        metrics.set_lease(lease.holder if lease is not None and store.lease_ok() else None)
        if self.server is not None:
            _ok, health = self.health.state()
            page = status_page.status_page(
                rows,
                list(findings(result.current)),
                self.clock(),
                refresh_seconds=self.options.refresh_seconds,
                health=health,
                finished_at={name: b.updated_at or "" for name, b in bindings.items()},
            )
            self.server.set_page(page)


def publish_rows(metrics: Metrics, rows: Sequence[StatusRow]) -> None:
    """Specs by phase; runs and progress per live spec only (a finished spec leaves them: 10,000 finished specs
    made 50,000 series), the finished specs' runs summed by state."""
    metrics.set_specs({p.value: 0 for p in Phase} | phase_counts([r.phase for r in rows]))
    live, finished = [], dict.fromkeys(STATES, 0)
    for row in rows:
        if not Phase(row.phase).terminal:
            live.append(row)
            continue
        for state, n in _states(row).items():
            finished[state] += n
    runs = {(r.spec, state): n for r in live for state, n in _states(r).items()}
    metrics.set_runs(runs, {r.spec: r.progress / 100.0 for r in live})
    metrics.set_finished_runs(finished)


STATES = ("success", "failed", "running", "queued")


def _states(row: StatusRow) -> dict[str, int]:
    return dict(zip(STATES, (row.success, row.failed, row.running, row.queued), strict=True))
