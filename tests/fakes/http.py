"""A tiny real HTTP server's answers, for CLI tests that need a socket (a hostile or a version-only server)."""

from __future__ import annotations

import json
from http.server import BaseHTTPRequestHandler
from typing import Any


def write_json(handler: BaseHTTPRequestHandler, status: int, payload: Any) -> None:
    """Answer the request with `payload` as JSON."""
    body = json.dumps(payload).encode()
    handler.send_response(status)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)
