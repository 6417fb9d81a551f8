"""Prometheus metrics, /healthz and the status page, served from a daemon thread (prometheus-client, http.server).

The metrics live in their own `CollectorRegistry` (never the process-global one), so two reconcilers in one
test process, or a library user's own metrics, never collide.  The server binds to 127.0.0.1 unless told
otherwise; every page is read-only (GET and HEAD only).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

from controller.errors import ConfigError

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
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.specs = Gauge(f"{PREFIX}_specs", "Specs by phase.", ["phase"], registry=r)
        self.runs = Gauge(
            f"{PREFIX}_runs", "DAG runs of each spec's backfill, by state.", ["spec", "state"], registry=r
        )
        self.progress = Gauge(
            f"{PREFIX}_spec_progress_ratio", "Finished runs / runs of each spec.", ["spec"], registry=r
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
        self._replace("runs", self.runs, {k: float(v) for k, v in runs.items()})
        self._replace("progress", self.progress, {(k,): v for k, v in progress.items()})

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
        return generate_latest(self.registry)


class Health:
    """Healthy while passes succeed; unhealthy after `max_failed` failed passes in a row, or a lost lease."""

    def __init__(self, max_failed: int = 3) -> None:
        self.max_failed = max_failed
        self.failed_in_a_row = 0
        self.lease_lost = False
        self.last_error = ""
        self.passes = 0
        self._lock = threading.Lock()

    def record(self, ok: bool, error: str = "") -> None:
        with self._lock:
            self.passes += 1
            self.failed_in_a_row = 0 if ok else self.failed_in_a_row + 1
            self.last_error = "" if ok else error

    def state(self) -> tuple[bool, str]:
        with self._lock:
            if self.lease_lost:
                return False, "unhealthy: the store's lease was lost"
            if self.failed_in_a_row >= self.max_failed:
                return False, f"unhealthy: {self.failed_in_a_row} failed passes in a row ({self.last_error})"
            if self.failed_in_a_row:
                return True, f"ok ({self.failed_in_a_row} failed pass(es) in a row, unhealthy at {self.max_failed})"
            return True, "ok" if self.passes else "ok (starting)"


class MonitorServer:
    """Serves GET /metrics, /healthz and / (the status page, set with `set_page`) from a daemon thread."""

    def __init__(self, metrics: Metrics, health: Health, host: str = "127.0.0.1", port: int = 9108) -> None:
        self.metrics, self.health = metrics, health
        self._page = b"<!DOCTYPE html><title>backfillctl</title><p>starting: no pass finished yet</p>"
        self._guard = threading.Lock()
        monitor = self

        class Handler(BaseHTTPRequestHandler):
            server_version = "backfillctl"
            sys_version = ""

            def log_message(self, *_: Any) -> None:  # access logs would go to stderr unstructured
                pass

            def do_HEAD(self) -> None:
                self._answer(head=True)

            def do_GET(self) -> None:
                self._answer(head=False)

            def _answer(self, *, head: bool) -> None:
                status, ctype, body = monitor.route(self.path)
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.send_header("X-Content-Type-Options", "nosniff")
                self.send_header("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
                self.end_headers()
                if not head:
                    self.wfile.write(body)

        try:
            self._server = ThreadingHTTPServer((host, port), Handler)
        except OSError as exc:
            raise ConfigError(
                f"cannot serve metrics on {host}:{port}: {exc.strerror}",
                hint="choose a free port with --metrics-port (or stop what listens there)",
            ) from None
        self._server.daemon_threads = True
        self.address = f"http://{host}:{self._server.server_address[1]}"
        self._thread = threading.Thread(target=self._server.serve_forever, name="backfillctl-monitor", daemon=True)
        self._thread.start()

    def set_page(self, html: str) -> None:
        with self._guard:
            self._page = html.encode()

    def route(self, path: str) -> tuple[int, str, bytes]:
        route = path.split("?", 1)[0]
        if route == "/metrics":
            return 200, CONTENT_TYPE_LATEST, self.metrics.exposition()
        if route == "/healthz":
            ok, text = self.health.state()
            return (200 if ok else 503), "text/plain; charset=utf-8", (text + "\n").encode()
        if route in ("/", "/index.html"):
            with self._guard:
                return 200, "text/html; charset=utf-8", self._page
        return 404, "text/plain; charset=utf-8", b"not found: /, /metrics and /healthz are served\n"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def phase_counts(phases: Sequence[str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for phase in phases:
        counts[phase] = counts.get(phase, 0) + 1
    return counts
