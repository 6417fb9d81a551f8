"""A real Prometheus (Debian's `prometheus`; scripts/test installs it when missing) scraping exporters the tests
control: each exporter is an http.server in a thread serving `/metrics` from a table of series the test sets."""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TypeVar

import httpx
import pytest

SCRAPE_S = 1  # scrape and evaluation interval: a value set by a test is seen within about a second
T = TypeVar("T")


def prometheus_binary() -> str:
    found = shutil.which("prometheus") or ("/usr/bin/prometheus" if Path("/usr/bin/prometheus").exists() else None)
    if found is None:
        pytest.fail(
            "the Prometheus tests need Debian's prometheus: apt-get install -y prometheus (scripts/test does it)"
        )
    return found


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class Exporter:
    """`/metrics` in Prometheus' text format: `series` maps a sample line's name{labels} to its value text."""

    name: str
    series: dict[str, str] = field(default_factory=dict)
    down: bool = False  # answers 503: Prometheus marks the target down and its series stale at once
    server: ThreadingHTTPServer | None = None

    @property
    def address(self) -> str:
        assert self.server is not None
        return f"127.0.0.1:{self.server.server_address[1]}"

    def set(self, series: str, value: float | str) -> None:
        self.series[series] = str(value)

    def remove(self, series: str) -> None:
        self.series.pop(series, None)

    def exposition(self) -> bytes:
        return "".join(f"{name} {value}\n" for name, value in sorted(self.series.items())).encode()

    def start(self) -> None:
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                if exporter.down or self.path != "/metrics":
                    self.send_error(503 if exporter.down else 404)
                    return
                body = exporter.exposition()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, name=f"exporter-{self.name}", daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


@dataclass
class PrometheusServer:
    url: str
    main: Exporter  # stays up for the whole session
    flaky: Exporter  # a test may take it down (and must bring it back)
    process: subprocess.Popen[bytes]


def start_prometheus(home: Path) -> PrometheusServer:
    main, flaky = Exporter("main"), Exporter("flaky")
    main.start()
    flaky.start()
    port = free_port()
    config = home / "prometheus.yml"
    config.write_text(
        f"global: {{scrape_interval: {SCRAPE_S}s, evaluation_interval: {SCRAPE_S}s, scrape_timeout: {SCRAPE_S}s}}\n"
        "scrape_configs:\n"
        f"  - {{job_name: main, static_configs: [{{targets: ['{main.address}']}}]}}\n"
        f"  - {{job_name: flaky, static_configs: [{{targets: ['{flaky.address}']}}]}}\n"
    )
    with (home / "prometheus.log").open("wb") as log:  # the child keeps its own descriptor
        process = subprocess.Popen(
            [
                prometheus_binary(),
                f"--config.file={config}",
                f"--storage.tsdb.path={home / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    server = PrometheusServer(f"http://127.0.0.1:{port}", main, flaky, process)
    try:
        wait(lambda: _targets_up(server), "Prometheus ready with both targets up", timeout=60)
    except BaseException:
        stop_prometheus(server)
        raise
    return server


def _targets_up(server: PrometheusServer) -> bool | None:
    if server.process.poll() is not None:
        raise RuntimeError(f"prometheus exited with {server.process.returncode}")
    try:
        targets = httpx.get(f"{server.url}/api/v1/targets", timeout=2).json()["data"]["activeTargets"]
    except (httpx.HTTPError, ValueError, KeyError):
        return None
    return (len(targets) == 2 and all(t["health"] == "up" for t in targets)) or None


def stop_prometheus(server: PrometheusServer) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait(timeout=20)
    server.main.stop()
    server.flaky.stop()


def wait(probe: Callable[[], T | None], what: str, timeout: float = 20.0) -> T:
    """Poll `probe` until it gives something other than None/False (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found is not None and found is not False:
            return found
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(0.2)
