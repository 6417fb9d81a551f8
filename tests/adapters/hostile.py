"""Hostile webhook receivers on loopback (a real HTTP server in a thread): one that echoes the secret path of its
URL in a short error body, one that answers a byte a second and never finishes, one that serves a gzip bomb."""

from __future__ import annotations

import ssl
import subprocess
import threading
import zlib
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

Answer = Callable[[BaseHTTPRequestHandler, threading.Event], None]


class HostileReceiver:
    """Serves `answer(handler, stopped)` for every POST, after reading the request; `close` ends every handler."""

    def __init__(self, answer: Answer) -> None:
        self.stopped = threading.Event()
        self.requests = 0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *_: Any) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                receiver.requests += 1
                try:
                    answer(self, receiver.stopped)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up: what the tests want
                    self.close_connection = True

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def over_tls(self, folder: Path) -> Path:
        """Serve HTTPS from now on, with a fresh self-signed certificate for 127.0.0.1 (returned: trust it)."""
        cert, key = folder / "cert.pem", folder / "key.pem"
        request = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"]
        subprocess.run(
            [*request, "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
            check=True,
            capture_output=True,
        )
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.base = self.base.replace("http://", "https://")
        return cert

    def close(self) -> None:
        self.stopped.set()
        self.server.shutdown()
        self.server.server_close()


def echo(form: Callable[[str, str], str], status: int = 404) -> Answer:
    """A short error body made by `form(path, host)` from the request's own path (and Host header)."""

    def answer(handler: BaseHTTPRequestHandler, _: threading.Event) -> None:
        body = form(handler.path, handler.headers.get("Host", "")).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "text/plain; charset=utf-8")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return answer


def trickle(*, headers_first: bool, seconds: int = 20) -> Answer:
    """One byte a second of the status line, or (`headers_first`) of a body after a whole 500 head, for longer
    than any test waits (`seconds`, then the connection is dropped: a client without a deadline fails late)."""

    def answer(handler: BaseHTTPRequestHandler, stopped: threading.Event) -> None:
        out = handler.wfile
        if headers_first:
            out.write(b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 1000000\r\n\r\n")
            out.flush()
        stream = b"x" * 1_000_000 if headers_first else b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"y" * 1_000_000
        for byte in stream[:seconds]:
            if stopped.wait(1.0):
                return
            out.write(bytes([byte]))
            out.flush()

    return answer


def gzip_bomb(decoded: int = 512 * 2**20) -> bytes:
    """`decoded` bytes of zeros, gzip-encoded (512 MiB make ~0.5 MB), built a mebibyte at a time."""
    packer = zlib.compressobj(9, zlib.DEFLATED, 31)
    zeros = bytes(2**20)
    parts = [packer.compress(zeros) for _ in range(decoded // len(zeros))]
    return b"".join(parts) + packer.flush()


def bomb(body: bytes, status: int) -> Answer:
    def answer(handler: BaseHTTPRequestHandler, _: threading.Event) -> None:
        handler.send_response(status)
        handler.send_header("Content-Type", "text/plain")
        handler.send_header("Content-Encoding", "gzip")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return answer
