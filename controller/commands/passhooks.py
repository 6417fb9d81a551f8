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
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime

from controller.adapters.logsetup import PASS_ID
from controller.adapters.monitor import Health, Metrics, MonitorServer, phase_counts
from controller.adapters.store.outbox import PENDING
from controller.commands import notify as notify_cmd
from controller.commands.concurrency import POOL
from controller.commands.reconcile import PassResult, Reconciler
from controller.commands.settings import Settings
from controller.core.audit.vocabulary import Outcome
from controller.core.model.binding import Phase
from controller.core.model.guards import SchedulerHealth
from controller.core.plan import stuck
from controller.core.plan.values import Item
from controller.core.render import status, status_page
from controller.core.render.plan import findings
from controller.errors import ControllerError

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class MonitorOptions:
    port: int | None = None  # None: no HTTP server (metrics are still kept for the pass log)
    host: str = "127.0.0.1"
    unhealthy_after: int = 3  # failed passes in a row
    refresh_seconds: int = 15
    deliver_budget: float = notify_cmd.DEFAULT_BUDGET


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
        self.metrics, self.health = Metrics(), Health(options.unhealthy_after)
        self._first_delivery = True
        self.server = (
            MonitorServer(self.metrics, self.health, options.host, options.port) if options.port is not None else None
        )
        if self.server is not None:
            log.info("serving /metrics, /healthz and the status page on %s", self.server.address)

    def close(self) -> None:
        if self.server is not None:
            self.server.close()

    def __enter__(self) -> PassHooks:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def attach(self, reconciler: Reconciler) -> None:
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
        self.metrics.passes.labels("failed").inc()
        self.metrics.failed_streak.set(self.health.failed_in_a_row)
        log.info("pass failed: %s", why)  # the CLI reports the error itself; this line is for --log-format json

    def _after(self, reconciler: Reconciler, result: PassResult, seconds: float) -> None:
        plan = result.current
        ok = plan.complete
        self.metrics.pass_seconds.observe(seconds)
        self.health.record(ok, "; ".join(result.errors)[:200] or "observation of Airflow incomplete")
        self.metrics.passes.labels("ok" if ok else "failed").inc()
        self.metrics.failed_streak.set(self.health.failed_in_a_row)
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
        if self.deliver:  # not in --dry-run: both write to the store
            self._record_stuck(reconciler, result)
            self._deliver(reconciler)
        self._refresh(reconciler, result)

    def _record_stuck(self, reconciler: Reconciler, result: PassResult) -> None:
        """Audit (and so notify) a `stuck` finding once per backfill and cause; never stops the loop.

        One call per candidate (its queued runs, read concurrently); a backfill created in this pass cannot be
        stuck yet, and the scheduler's health is read only when something is stuck (it names the cause)."""
        threshold = reconciler.policy.notify.stuck_after_minutes
        created = {item.spec for item, outcome in result.applied if outcome == Outcome.CREATED}
        health: SchedulerHealth | None = None
        try:
            items = [i for i in stuck.candidates(result.current) if i.spec not in created]
            recorded = reconciler.store.recorded_findings() if items else {}
            with ThreadPoolExecutor(max_workers=max(1, min(POOL, len(items))), thread_name_prefix="stuck") as pool:
                reads = [pool.submit(self._queued, reconciler, item) for item in items]
                for item, read in zip(items, reads, strict=True):
                    queued, oldest = read.result()  # a failed read stops here, after the candidates before it
                    if not stuck.overdue(queued, oldest, self.clock(), threshold):
                        continue
                    health = health or reconciler.client.scheduler_health()
                    found = stuck.find_stuck(
                        item,
                        queued,
                        oldest,
                        result.current,
                        health=health,
                        now=self.clock(),
                        threshold_minutes=threshold,
                    )
                    if found is not None:
                        self._audit_stuck(reconciler, found, found.message(threshold), recorded)
        except ControllerError as exc:
            log.warning("stuck check skipped this pass: %s", exc.message)

    @staticmethod
    def _queued(reconciler: Reconciler, item: Item) -> tuple[int, datetime | None]:
        source = item.source
        if source is not None:  # a spec's backfill covers the spec's range
            return reconciler.client.queued_runs(item.dag_id, source.from_date, source.to_date)
        backfill = reconciler.client.get_backfill(item.backfill_id or 0)
        return reconciler.client.queued_runs(backfill.dag_id, backfill.from_date, backfill.to_date)

    @staticmethod
    def _audit_stuck(
        reconciler: Reconciler, found: stuck.Stuck, message: str, recorded: Mapping[tuple[str, str, int | None], str]
    ) -> None:
        """Through the pass's recorder, as every finding is (the spec as this pass loaded it: its receivers)."""
        recorder, loaded = reconciler.recorder, reconciler.loaded.get(found.spec)
        if recorder is None:  # no pass ran: nothing was found stuck
            return
        written = recorder.finding(
            Outcome.STUCK,
            found.dag_id,
            message,
            spec_name=found.spec,
            backfill_id=found.backfill_id,
            spec=loaded.spec if loaded is not None else None,
            recorded=recorded,
        )
        if written:
            log.warning("stuck: %s: %s", found.spec, message, extra={"spec": found.spec, "dag": found.dag_id})

    def _deliver(self, reconciler: Reconciler) -> None:
        try:
            stats = notify_cmd.deliver(
                reconciler.store,
                reconciler.policy,
                self.env,
                self.settings,
                budget=self.options.deliver_budget,
                everything=self._first_delivery,
            )
            self._first_delivery = False
        except ControllerError as exc:  # the store had a hiccup: the rows stay, the next pass tries again
            log.warning("notification delivery skipped this pass: %s", exc.message)
            return
        for line in stats.failed:
            self.metrics.failed_deliveries.labels(line.split(":", 1)[0].removeprefix("receiver ")).inc()
        if stats.delivered:
            log.info("delivered %d notification(s)", len(stats.delivered))

    def _refresh(self, reconciler: Reconciler, result: PassResult) -> None:
        if self.server is None:  # nothing serves the gauges: 1,000 specs' gauges cost 0.2 s a pass for nobody
            return
        store = reconciler.store
        try:
            bindings = store.bindings()
            rows = status.status_rows(result.current, bindings, result.analysis)
            self.metrics.audit_head.set(store.audit_head_seq())
            self.metrics.undelivered.set(store.notification_counts().get(PENDING, 0))
        except ControllerError as exc:
            log.warning("metrics not refreshed this pass: %s", exc.message)
            return
        self.metrics.set_specs({p.value: 0 for p in Phase} | phase_counts([r.phase for r in rows]))
        runs = {(r.spec, s): n for r in rows for s, n in _states(r).items()}
        self.metrics.set_runs(runs, {r.spec: (r.progress / 100.0) for r in rows})
        lease = store.held_lease()
        self.health.lease_lost = not store.lease_ok()
        self.metrics.set_lease(lease.holder if lease is not None and store.lease_ok() else None)
        if self.server is not None:
            _ok, health = self.health.state()
            page = status_page.status_page(
                rows,
                list(findings(result.current)),
                self.clock(),
                refresh_seconds=self.options.refresh_seconds,
                health=health,
            )
            self.server.set_page(page)


def _states(row: status.StatusRow) -> dict[str, int]:
    return {"success": row.success, "failed": row.failed, "running": row.running, "queued": row.queued}
