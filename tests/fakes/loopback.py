"""A real HTTP server on 127.0.0.1 whose GET answers come from a function of the path: for a whole `backfillctl`
process (or a client) that must reach a port, without an Airflow."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.fakes.http import write_json

Answer = Callable[[str], tuple[int, Any]]  # the request's path (query and all) → status and JSON body

PREFLIGHT = {  # what the preflight of a pass over no specs asks, answered as Airflow 3.3.2 does
    "/api/v2/version": (200, {"version": "3.3.2", "git_version": None}),
    "/api/v2/dags": (200, {"dags": [], "total_entries": 0}),
    "/api/v2/connections": (403, {"detail": "Forbidden"}),
}


def preflight(path: str) -> tuple[int, Any]:
    return PREFLIGHT.get(path.split("?", maxsplit=1)[0], (404, {"detail": "Not Found"}))


@contextmanager
def serving(answer: Answer = preflight) -> Iterator[str]:
    """The server's base URL while it runs (each request in a thread of its own)."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            write_json(self, *answer(self.path))

        def log_message(self, *_args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
