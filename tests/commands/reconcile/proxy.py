"""A loopback HTTP proxy in front of the real Airflow that can lose one answer (fault injection).

`LosingProxy` forwards every request to Airflow unchanged. For the first request that matches `lose`, it
forwards the request (so Airflow acts on it), then waits until `until()` is true and closes the connection
without answering: the client sees its request sent and no answer, exactly like a load balancer's idle
timeout or a dropped connection after the server committed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx


class LosingProxy:
    def __init__(self, upstream: str, lose: tuple[str, str], until: Callable[[dict[str, Any]], bool]) -> None:
        self.upstream, self.lose, self.until = upstream.rstrip("/"), lose, until
        self.lost: list[dict[str, Any]] = []  # the answers that never reached the client
        self.seen: list[tuple[str, str]] = []
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                path = self.path.split("?", 1)[0]
                proxy.seen.append((self.command, path))
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                with httpx.Client(timeout=120) as client:
                    answer = client.request(self.command, proxy.upstream + self.path, content=body, headers=headers)
                if (self.command, path) == proxy.lose and not proxy.lost:
                    proxy.lost.append(answer.json())
                    deadline = time.monotonic() + 180
                    while not proxy.until(answer.json()) and time.monotonic() < deadline:
                        time.sleep(1.0)
                    self.close_connection = True
                    return  # the answer is lost: the socket closes without a status line
                self.send_response(answer.status_code)
                for key in ("content-type",):
                    if key in answer.headers:
                        self.send_header(key, answer.headers[key])
                self.send_header("Content-Length", str(len(answer.content)))
                self.end_headers()
                self.wfile.write(answer.content)

            do_GET = do_POST = do_PUT = _forward

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> LosingProxy:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()
