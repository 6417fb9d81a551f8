"""Prometheus metrics, /healthz and the status page, served from a daemon thread (prometheus-client, http.server).

The metrics live in their own `CollectorRegistry` (never the process-global one), so two reconcilers in one
test process, or a library user's own metrics, never collide.  The server binds to 127.0.0.1 unless told
otherwise; every page is read-only (GET and HEAD only).  Per-spec series exist only for live specs: a finished
spec leaves them, and its runs count in `backfillctl_finished_runs` (10,000 finished specs no longer make
50,000 series).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from controller.core.rules.liveness import Liveness
from controller.errors import ConfigError

if TYPE_CHECKING:  # prometheus-client and the page server load with a port to serve: a pass without one (cron,
    # `--once`) has no metrics to keep
    from prometheus_client import Gauge

    from controller.adapters.pageserver import Answer, Limits

PREFIX = "backfillctl"
PASS_BUCKETS = (0.5, 1, 2, 5, 10, 20, 30, 60, 120, 300, 600)
_ID_SEGMENT = re.compile(r"^(?:\d+|[0-9a-f]{8,})$")
# Airflow paths whose segments after these words are names (DAG ids, run ids): replaced by a template
_NAMED_AFTER = {"dags": "{dag_id}", "dagRuns": "{run_id}", "backfills": "{backfill_id}"}


def endpoint_template(path: str) -> str:
    """`/api/v2/dags/orders_daily/dagRuns` → `/api/v2/dags/{dag_id}/dagRuns`: bounded label values."""
    parts = path.split("?", 1)[0].strip("/").split("/")
    out: list[str] = []
    for index, part in enumerate(parts):
        before = parts[index - 1] if index else ""
        if before in _NAMED_AFTER and part not in ("dry_run",):
            out.append(_NAMED_AFTER[before])
        elif _ID_SEGMENT.match(part):
            out.append("{id}")
        else:
            out.append(part)
    return "/" + "/".join(out)


def status_class(status: int | None) -> str:
    return "error" if status is None else f"{status // 100}xx"


class Metrics:
    """The reconciler's metrics; names are in the README (section Metrics)."""

    def __init__(self) -> None:
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram  # noqa: PLC0415 - see above

        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.specs = Gauge(f"{PREFIX}_specs", "Specs by phase.", ["phase"], registry=r)
        self.runs = Gauge(
            f"{PREFIX}_runs", "DAG runs of each live spec's backfills, by state.", ["spec", "state"], registry=r
        )
        self.progress = Gauge(
            f"{PREFIX}_spec_progress_ratio", "Finished runs / runs of each live spec.", ["spec"], registry=r
        )
        self.finished_runs = Gauge(
            f"{PREFIX}_finished_runs", "DAG runs of all finished specs together, by state.", ["state"], registry=r
        )
        self.pass_seconds = Histogram(
            f"{PREFIX}_pass_duration_seconds", "Duration of reconcile passes.", buckets=PASS_BUCKETS, registry=r
        )
        self.passes = Counter(f"{PREFIX}_passes", "Reconcile passes by result (ok, failed).", ["result"], registry=r)
        self.failed_streak = Gauge(f"{PREFIX}_consecutive_failed_passes", "Failed passes in a row.", registry=r)
        self.requests = Counter(
            f"{PREFIX}_airflow_requests",
            "Airflow API requests by endpoint template, method and status class (error: no answer).",
            ["endpoint", "method", "status_class"],
            registry=r,
        )
        self.lease = Gauge(
            f"{PREFIX}_lease_held", "1 while this reconciler holds the store's lease.", ["holder"], registry=r
        )
        self.audit_head = Gauge(f"{PREFIX}_audit_head_seq", "Sequence number of the newest audit record.", registry=r)
        self.undelivered = Gauge(
            f"{PREFIX}_notifications_undelivered", "Notifications in the outbox not delivered yet.", registry=r
        )
        self.failed_deliveries = Counter(
            f"{PREFIX}_notification_delivery_failures",
            "Failed webhook deliveries, by receiver.",
            ["receiver"],
            registry=r,
        )
        self._known: dict[str, set[tuple[str, ...]]] = {"specs": set(), "runs": set(), "progress": set()}

    def observe_request(self, method: str, path: str, status: int | None) -> None:
        self.requests.labels(endpoint_template(path), method, status_class(status)).inc()

    def set_specs(self, phases: Mapping[str, int]) -> None:
        self._replace("specs", self.specs, {(phase,): n for phase, n in phases.items()})

    def set_runs(self, runs: Mapping[tuple[str, str], int], progress: Mapping[str, float]) -> None:
        """The live specs' runs and progress; a spec not given (finished, deleted) leaves both gauges."""
        self._replace("runs", self.runs, {k: float(v) for k, v in runs.items()})
        self._replace("progress", self.progress, {(k,): v for k, v in progress.items()})

    def set_finished_runs(self, runs: Mapping[str, int]) -> None:
        for state, n in runs.items():
            self.finished_runs.labels(state).set(n)

    def set_lease(self, holder: str | None) -> None:
        self.lease.clear()
        if holder is not None:
            self.lease.labels(holder).set(1)

    def _replace(self, name: str, gauge: Gauge, values: Mapping[tuple[str, ...], float]) -> None:
        """Set every labelled value, and drop label sets that disappeared (a deleted spec leaves no ghost)."""
        for labels in self._known[name] - set(values):
            gauge.remove(*labels)
        for labels, value in values.items():
            gauge.labels(*labels).set(value)
        self._known[name] = set(values)

    def exposition(self) -> bytes:
        from prometheus_client import generate_latest  # noqa: PLC0415 - loaded by __init__

        return generate_latest(self.registry)


class Health:
    """Healthy while passes succeed; unhealthy after `max_failed` failed passes in a row, a lost lease, or (the
    dead-man's check, asked at every request) no good pass for two of the intervals one is expected at."""

    def __init__(
        self,
        max_failed: int = 3,
        *,
        expect_every: timedelta | None = None,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.max_failed = max_failed
        self.failed_in_a_row = 0
        self.lease_lost = False
        self.last_error = ""
        self.passes = 0
        self.expect_every = expect_every  # the policy's `liveness.expect_every`, --expect-every, or the interval
        self.started, self._clock = clock(), clock
        self.last_good: datetime | None = None
        self._lock = threading.Lock()

    def record(self, ok: bool, error: str = "") -> None:
        with self._lock:
            self.passes += 1
            self.failed_in_a_row = 0 if ok else self.failed_in_a_row + 1
            self.last_error = "" if ok else error
            self.last_good = self._clock() if ok else self.last_good

    def state(self) -> tuple[bool, str]:
        with self._lock:
            if self.lease_lost:
                return False, "unhealthy: the store's lease was lost"
            overdue = Liveness(self.last_good or self.started, self.expect_every, self._clock()).warning()
            if overdue is not None:
                return False, f"unhealthy: {overdue}"
            if self.failed_in_a_row >= self.max_failed:
                return False, f"unhealthy: {self.failed_in_a_row} failed passes in a row ({self.last_error})"
            if self.failed_in_a_row:
                return True, f"ok ({self.failed_in_a_row} failed pass(es) in a row, unhealthy at {self.max_failed})"
            return True, "ok" if self.passes else "ok (starting)"


class MonitorServer:
    """Serves GET /metrics, /healthz and / (the status page, set with `set_page`) from its own threads, through a
    bounded `PageServer` (timeouts, a connection limit, the Host check, safe headers on every answer)."""

    def __init__(
        self,
        metrics: Metrics,
        health: Health,
        host: str = "127.0.0.1",
        port: int = 9108,
        *,
        host_names: Sequence[str] = (),
        limits: Limits | None = None,
    ) -> None:
        from controller.adapters.pageserver import PageServer  # noqa: PLC0415 - only with a port (see above)

        self.metrics, self.health = metrics, health
        self._page = b"<!DOCTYPE html><title>backfillctl</title><p>starting: no pass finished yet</p>"
        self._guard = threading.Lock()
        try:
            self._server = PageServer(self.route, host, port, names=host_names, limits=limits)
        except OSError as exc:
            raise ConfigError(
                f"cannot serve metrics on {host}:{port}: {exc.strerror}",
                hint="choose a free port with --metrics-port (or stop what listens there)",
            ) from None
        shown = f"[{host}]" if ":" in host else host
        self.address = f"http://{shown}:{self._server.port}"

    def set_page(self, html: str) -> None:
        with self._guard:
            self._page = html.encode()

    def route(self, path: str) -> Answer:
        from prometheus_client.exposition import CONTENT_TYPE_LATEST  # noqa: PLC0415 - loaded by Metrics

        from controller.adapters.pageserver import TEXT, Answer, refusal  # noqa: PLC0415 - loaded by __init__

        if path == "/metrics":
            return Answer(200, CONTENT_TYPE_LATEST, self.metrics.exposition())
        if path == "/healthz":
            ok, text = self.health.state()
            return Answer(200 if ok else 503, TEXT, (text + "\n").encode())
        if path in ("/", "/index.html"):
            with self._guard:
                return Answer(200, "text/html; charset=utf-8", self._page)
        return refusal(404, "not found: /, /metrics and /healthz are served")

    def open_connections(self) -> int:
        return self._server.open_connections()

    def close(self) -> None:
        self._server.close()


def phase_counts(phases: Sequence[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for phase in phases:
        counts[phase] = counts.get(phase, 0) + 1
    return counts
