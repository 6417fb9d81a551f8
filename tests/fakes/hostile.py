"""A loopback HTTP server with hostile answers (streaming faults need a real socket: httpx.MockTransport hands over
a whole body at once).

`Hostile` answers each request from `routes[(method, path)]` when one matches, else from the fake Airflow it is
given (the request passed to `FakeAirflow.handle`, as a client would send it), else 404. A route is a function
that writes the raw answer to the socket: `trickle`, `gzip_bomb`, `deep_json`, `cut_off`, `raw`. Each request is
counted in `seen` (method, path).
"""

from __future__ import annotations

import contextlib
import threading
import time
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx

from tests.fakes.airflow import FakeAirflow

Route = Callable[[BaseHTTPRequestHandler], None]
GIB = 2**30


def _head(handler: BaseHTTPRequestHandler, status: int, length: int, **headers: str) -> None:
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(length))
    for name, value in headers.items():
        handler.send_header(name.replace("_", "-"), value)
    handler.end_headers()


def raw(status: int, body: bytes, **headers: str) -> Route:
    def write(handler: BaseHTTPRequestHandler) -> None:
        _head(handler, status, len(body), **headers)
        handler.wfile.write(body)

    return write


def trickle(body: bytes, every: float = 3.0, give_up: float = 30.0) -> Route:
    """The head at once, then the body one byte every `every` seconds; after `give_up` seconds the connection
    closes (so that a client without a deadline fails a test instead of hanging it)."""

    def write(handler: BaseHTTPRequestHandler) -> None:
        _head(handler, 200, len(body))
        handler.wfile.flush()
        ends = time.monotonic() + give_up
        for byte in body:
            if time.monotonic() > ends:
                return
            handler.wfile.write(bytes([byte]))
            handler.wfile.flush()
            time.sleep(every)

    return write


def gzip_bomb(inflated: int = 2 * GIB, block: int = 2**20) -> Route:
    """About 2 MB of gzip that inflates to `inflated` bytes of zeros, made as it is sent (never held whole): one
    block of zeros compressed after a full flush compresses to the same bytes every time."""
    squeeze = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    first = squeeze.compress(b"\0" * block) + squeeze.flush(zlib.Z_FULL_FLUSH)
    again = squeeze.compress(b"\0" * block) + squeeze.flush(zlib.Z_FULL_FLUSH)
    tail = squeeze.flush()  # the end of the stream (its checksum is of three blocks: no client gets that far)
    blocks = inflated // block

    def write(handler: BaseHTTPRequestHandler) -> None:
        _head(handler, 200, len(first) + (blocks - 1) * len(again) + len(tail), Content_Encoding="gzip")
        handler.wfile.write(first)
        batch = again * 64
        for _ in range((blocks - 1) // 64):
            handler.wfile.write(batch)
        handler.wfile.write(again * ((blocks - 1) % 64) + tail)

    return write


def bomb_size(inflated: int = 2 * GIB, block: int = 2**20) -> int:
    """The bytes `gzip_bomb` sends."""
    squeeze = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
    first = squeeze.compress(b"\0" * block) + squeeze.flush(zlib.Z_FULL_FLUSH)
    again = squeeze.compress(b"\0" * block) + squeeze.flush(zlib.Z_FULL_FLUSH)
    return len(first) + (inflated // block - 1) * len(again) + len(squeeze.flush())


def deep_json(levels: int = 200_000) -> Route:
    return raw(200, b"[" * levels + b"]" * levels)


def cut_off(status: int, body: bytes, sent: int) -> Route:
    """The head promises the whole body; `sent` bytes of it come, then the connection closes."""

    def write(handler: BaseHTTPRequestHandler) -> None:
        _head(handler, status, len(body))
        handler.wfile.write(body[:sent])
        handler.wfile.flush()
        handler.close_connection = True

    return write


class Hostile:
    def __init__(self, fake: FakeAirflow | None = None) -> None:
        self.fake, self.routes = fake, dict[tuple[str, str], Route]()
        self.seen: list[tuple[str, str]] = []
        self.once: dict[tuple[str, str], Route] = {}  # a route for the next such request only
        hostile = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def _answer(self) -> None:
                path = self.path.split("?", 1)[0]
                hostile.seen.append((self.command, path))
                with contextlib.suppress(
                    BrokenPipeError, ConnectionResetError
                ):  # the client gave up (a deadline, a cap)
                    hostile.route(self.command, path)(self)

            do_GET = do_POST = do_PUT = _answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def route(self, method: str, path: str) -> Route:
        once = self.once.pop((method, path), None)
        if once is not None:
            return once
        found = self.routes.get((method, path))
        return found if found is not None else self._fake

    def _fake(self, handler: BaseHTTPRequestHandler) -> None:
        status, body = self._processed(handler)
        raw(status, body)(handler)

    def processed(self, then: Callable[[int, bytes], Route]) -> Route:
        """A route on which the fake Airflow acts on the request (a create commits), answered `then(status, body)`."""

        def write(handler: BaseHTTPRequestHandler) -> None:
            then(*self._processed(handler))(handler)

        return write

    def _processed(self, handler: BaseHTTPRequestHandler) -> tuple[int, bytes]:
        if self.fake is None:
            return 404, b'{"detail": "Not Found"}'
        length = int(handler.headers.get("Content-Length") or 0)
        request = httpx.Request(
            handler.command,
            self.url + handler.path,
            headers={k: v for k, v in handler.headers.items() if k.lower() != "host"},
            content=handler.rfile.read(length) if length else b"",
        )
        answer = self.fake.handle(request)
        return answer.status_code, answer.content

    def __enter__(self) -> Hostile:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.server.shutdown()
        self.server.server_close()
