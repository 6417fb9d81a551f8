"""Loopback helpers for the end-to-end tests: a webhook receiver that records what it gets, and a forwarding
proxy in front of the real Airflow that can be switched off (Airflow unreachable)."""

from __future__ import annotations

import json
import socket
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class WebhookReceiver:
    """Records every POST (path, Idempotency-Key header, JSON body); answers 500 to the first `fail_first`
    requests *after* recording them (a receiver that processed a message but whose answer was lost)."""

    def __init__(self, port: int, fail_first: int = 0) -> None:
        self.port, self.fail_first = port, fail_first
        self.received: list[dict[str, Any]] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.received.append(
                    {
                        "path": self.path,
                        "key": self.headers.get("Idempotency-Key"),
                        "headers": dict(self.headers.items()),
                        "raw": body.decode(),
                        "body": json.loads(body),
                    }
                )
                failing = len(receiver.received) <= receiver.fail_first
                self.send_response(500 if failing else 200)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"no" if failing else b"ok")

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class SwitchableProxy:
    """Forwards to Airflow; while `down`, it closes every connection without answering. With a `transport` (the
    fake Airflow's), it serves that fake on a real port, for a `backfillctl` subprocess."""

    def __init__(self, upstream: str, transport: httpx.BaseTransport | None = None) -> None:
        self.upstream, self.down = upstream.rstrip("/"), False
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def _forward(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if proxy.down:
                    self.close_connection = True
                    return
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                with httpx.Client(timeout=120, transport=transport) as client:
                    answer = client.request(self.command, proxy.upstream + self.path, content=body, headers=headers)
                self.send_response(answer.status_code)
                if "content-type" in answer.headers:
                    self.send_header("Content-Type", answer.headers["content-type"])
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
