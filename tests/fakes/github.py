"""A fake GitHub REST API on loopback (http.server in a thread), serving the shapes of the real endpoints the
evidence provider reads: a commit's pull requests, a pull request, its reviews and commits (pages joined by `Link`
headers, `per_page` honoured), a commit, a collaborator's permission (404 for a stranger), and a GitHub App's
installation and installation token (the App's JWT checked: RS256 over the App's public key, `iss`, `exp`).
`failures` queues answers for a path (a rate limit, a 502) before its real one; `requests` records what was asked."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from controller.core.rules import rs256

REPO = "/repos/acme/specs"  # the specs repository's paths


@dataclass
class Asked:
    method: str
    path: str
    authorization: str
    body: Any = None


@dataclass
class FakeGitHub:
    answers: dict[str, Any] = field(default_factory=dict)  # path → JSON (a list is paged)
    failures: dict[str, list[tuple[int, dict[str, str], Any]]] = field(default_factory=dict)
    requests: list[Asked] = field(default_factory=list)
    token: str = "github_pat_fake_0123456789"  # what a request must bear (a fine-grained token or the App's)
    app: tuple[str, tuple[int, int]] | None = None  # the App's id and public key (n, e)
    installation_token: str = "ghs_installation_fake_0123456789"
    page_size: int = 100  # at most this many items a page, whatever per_page asks (2: pages with few reviews)
    url: str = ""

    def handle(self, method: str, target: str, authorization: str, body: Any) -> tuple[int, dict[str, str], Any]:
        parts = urlsplit(target)
        path, query = parts.path, parse_qs(parts.query)
        self.requests.append(Asked(method, path, authorization, body))
        if self.failures.get(path):
            return self.failures[path].pop(0)
        if self.app is not None and (path.startswith("/app/") or path.endswith("/installation")):
            return self._app(method, path, authorization)
        if authorization != f"Bearer {self.token}":
            return 401, {}, {"message": "Bad credentials"}
        if path not in self.answers:
            return 404, {}, {"message": "Not Found"}
        answer = self.answers[path]
        if not isinstance(answer, list):
            return 200, {}, answer
        size = min(int(query.get("per_page", ["30"])[0]), self.page_size)
        page = int(query.get("page", ["1"])[0])
        headers = {}
        if page * size < len(answer):
            headers["Link"] = f'<{self.url}{path}?per_page={size}&page={page + 1}>; rel="next"'
        return 200, headers, answer[(page - 1) * size : page * size]

    def _app(self, method: str, path: str, authorization: str) -> tuple[int, dict[str, str], Any]:
        assert self.app is not None
        app_id, (n, e) = self.app
        jwt = authorization.removeprefix("Bearer ")
        header, payload, signature = [*jwt.split("."), "", ""][:3]
        claims = json.loads(_unb64(payload) or b"{}")
        signed = rs256.verify(n, e, f"{header}.{payload}".encode(), _unb64(signature))
        if not signed or claims.get("iss") != app_id or not claims.get("exp", 0) > time.time():
            return 401, {}, {"message": "A JSON web token could not be decoded"}
        if method == "GET" and path.endswith("/installation"):
            return 200, {}, {"id": 7, "app_id": int(app_id)}
        if method == "POST" and path == "/app/installations/7/access_tokens":
            self.token = self.installation_token
            return 201, {}, {"token": self.installation_token, "expires_at": "2099-01-01T00:00:00Z"}
        return 404, {}, {"message": "Not Found"}


def _unb64(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except ValueError:
        return b""


@contextmanager
def serving(fake: FakeGitHub) -> Iterator[FakeGitHub]:
    """The fake on 127.0.0.1 at a free port (`fake.url`), until the block ends."""

    class Handler(BaseHTTPRequestHandler):
        def _answer(self, method: str) -> None:
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            status, headers, data = fake.handle(method, self.path, self.headers.get("Authorization", ""), body)
            raw = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=utf-8")
            self.send_header("Content-Length", str(len(raw)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(raw)

        def do_GET(self) -> None:
            self._answer("GET")

        def do_POST(self) -> None:
            self._answer("POST")

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    fake.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        server.server_close()
