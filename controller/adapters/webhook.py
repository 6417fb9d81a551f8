"""Posting one notification to a webhook (httpx); httpx's exceptions become `WebhookError`.

The URL is a secret (Slack's incoming-webhook URLs carry their token in the path): it is never logged, never
put into an error message, and never stored; errors name the receiver and the environment variable instead.
A receiver is outside the controller and may be broken or hostile, so each delivery is bounded:

- in time: one deadline for the whole exchange (connect, send, every read), kept by a watchdog that shuts the
  connection down when it passes (httpx's timeouts are per read: a receiver answering a byte a second would
  hold a delivery as long as it liked);
- in size: a 2xx answer's body is never read; an error answer is read raw, at most `BODY_LIMIT` bytes, and never
  decoded (`Accept-Encoding: identity` is asked; an encoded answer is named, not unpacked: a gzip bomb stays
  on the wire);
- in what it says: its text, and any exception's, is scrubbed of the URL's path, query and user information
  (`scrub`: also percent-encoded, lower-cased or partly echoed) before it is part of an error, which the log,
  `notify status` and the store's `notifications.last_error` show. No redirect is followed.
"""

from __future__ import annotations

import contextlib
import re
import socket
import threading
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import quote, unquote, unquote_plus

import httpx

from controller.core.audit.notify import IDEMPOTENCY_HEADER
from controller.core.documents.escaping import plain
from controller.errors import ControllerError, truncate

BODY_LIMIT = 2048  # bytes of an error answer read (raw), at most
DETAIL_LIMIT = 120  # characters of it shown
REDACTED = "[redacted]"
_WINDOW = 8  # any run of this many characters of the URL's secret part is scrubbed, wherever it is echoed
_SHORTEST = 5  # a shorter path segment (`api`, `v1`, `hook`) is structure, scrubbed only within a longer run
_SEPARATORS = re.compile(r"[/?#&=;:,@+]|\\/")
_CODINGS = frozenset({"gzip", "x-gzip", "deflate", "br", "zstd", "compress"})


class WebhookError(ControllerError):
    """A delivery failed (always tried again, with backoff); `timed_out`: its deadline passed first."""

    def __init__(self, message: str, *, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class WebhookClient:
    def __init__(self, *, timeout: float = 5.0, transport: httpx.BaseTransport | None = None) -> None:
        self.timeout = timeout  # seconds for a whole delivery
        self._http = httpx.Client(
            timeout=httpx.Timeout(timeout, connect=min(timeout, 3.0)),
            transport=transport,
            follow_redirects=False,
            limits=httpx.Limits(max_keepalive_connections=0),  # each delivery its own connection, for its watchdog
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> WebhookClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def post(self, url: str, body: Mapping[str, Any], key: str, *, receiver: str, within: float | None = None) -> int:
        """POST the JSON body with the idempotency key header; a 2xx answer is a delivery. The delivery has
        `timeout` seconds in all, or `within` if that is less (what is left of a pass's budget)."""
        seconds = self.timeout if within is None else max(0.0, min(self.timeout, within))
        with _Deadline(seconds) as deadline:
            try:
                return self._exchange(url, body, key, receiver, deadline)
            except httpx.HTTPError as exc:
                raise _failure(exc, url, receiver, deadline) from None  # no cause: it may hold the URL
            except (ValueError, httpx.InvalidURL):  # an invalid URL in the environment variable
                raise WebhookError(f"receiver {receiver}: the webhook URL is not a valid http(s) address") from None

    def _exchange(self, url: str, body: Mapping[str, Any], key: str, receiver: str, deadline: _Deadline) -> int:
        headers = {IDEMPOTENCY_HEADER: key, "User-Agent": "backfillctl", "Accept-Encoding": "identity"}
        extensions = {"trace": deadline.trace}
        with self._http.stream("POST", url, json=dict(body), headers=headers, extensions=extensions) as response:
            if 200 <= response.status_code < 300:
                return response.status_code  # its body is not read: closing drops the connection
            detail = _detail(response, url)
        raise WebhookError(f"receiver {receiver}: HTTP {response.status_code} {detail}".rstrip())


def _failure(exc: httpx.HTTPError, url: str, receiver: str, deadline: _Deadline) -> WebhookError:
    if deadline.expired:
        return WebhookError(
            f"receiver {receiver}: timed out (no whole answer within {deadline.seconds:g} s)", timed_out=True
        )
    if isinstance(exc, httpx.TimeoutException):  # one step's own limit (connecting: 3 s), before the deadline
        return WebhookError(f"receiver {receiver}: timed out ({type(exc).__name__})")
    said = truncate(plain(scrub(str(exc), url)).strip(), DETAIL_LIMIT)
    return WebhookError(f"receiver {receiver}: {type(exc).__name__}" + (f": {said}" if said else " (no answer)"))


def _detail(response: httpx.Response, url: str) -> str:
    """What an error answer says: the head of its raw body, scrubbed and made one plain line (an answer already
    read whole is one an in-memory transport made)."""
    coding = response.headers.get("Content-Encoding", "").strip().lower()
    if coding not in ("", "identity"):
        return f"({coding}-encoded answer, not read)" if coding in _CODINGS else "(an encoded answer, not read)"
    head = response.content[:BODY_LIMIT] if response.is_stream_consumed else _head(response)
    text = head.decode("utf-8", errors="replace")  # not its charset: `idna` or `rot13` would raise
    return truncate(plain(scrub(text, url)).strip(), DETAIL_LIMIT)


def _head(response: httpx.Response) -> bytes:
    """The first `BODY_LIMIT` bytes as they came (one read of the connection at most past them)."""
    head = bytearray()
    for chunk in response.iter_raw():
        head += chunk[: BODY_LIMIT - len(head)]
        if len(head) >= BODY_LIMIT:
            break
    return bytes(head)


class _Deadline:
    """Shuts the delivery's connections down when its time is up, from a timer thread; the blocked read then
    fails and the delivery is reported as timed out. It watches a copy (`dup`) of each socket the delivery
    connects (httpx's `trace` extension), so TLS and the connection pool are left alone."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.expired = seconds, False
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        self._timer.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._timer.cancel()
        with self._lock:
            for sock in self._sockets:
                sock.close()
            self._sockets.clear()

    def trace(self, event: str, info: Mapping[str, Any]) -> None:
        if not event.endswith((".connect_tcp.complete", ".connect_unix_socket.complete")):
            return
        sock = getattr(info.get("return_value"), "get_extra_info", lambda _: None)("socket")
        if not isinstance(sock, socket.socket):
            return
        copy = sock.dup()
        with self._lock:
            self._sockets.append(copy)
            if self.expired:
                _shut(copy)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):  # the connection is gone already
        sock.shutdown(socket.SHUT_RDWR)


# --- the URL's secret parts out of outside text --------------------------------------------------------------


def scrub(text: str, url: str) -> str:
    """`text` (a receiver's answer, an exception's message) without the secret parts of `url`: its path, query,
    fragment and user information (scheme and host may stay), as they are, percent-decoded or -encoded, with
    escaped slashes, in any case, and any `_WINDOW` characters in a row of them (a partial echo)."""
    needles = _needles(url)
    folded = _fold(text)
    hidden = bytearray(len(text))
    for needle in needles:
        at = folded.find(needle)
        while at >= 0:
            hidden[at : at + len(needle)] = b"\x01" * len(needle)
            at = folded.find(needle, at + 1)
    return "".join(_runs(text, hidden))


def _needles(url: str) -> set[str]:
    rest = url.partition("://")[2] if "://" in url else url
    cut = min((i for i in (rest.find(c) for c in "/?#") if i >= 0), default=len(rest))
    secret, userinfo = rest[cut:], rest[:cut].rpartition("@")[0]
    forms = {secret, unquote(secret), unquote_plus(secret), quote(unquote(secret), safe=""), userinfo}
    forms |= {form.replace("/", "\\/") for form in forms} | {unquote(userinfo)}
    needles: set[str] = set()
    for form in (_fold(f) for f in forms):
        needles |= {form[i : i + _WINDOW] for i in range(len(form) - _WINDOW + 1)}
        pieces = [form, *_SEPARATORS.split(form)]
        needles |= {piece for piece in pieces if _SHORTEST <= len(piece) < _WINDOW}
    return needles


def _fold(text: str) -> str:
    """Lower case, one character for one (so positions in the folded text are positions in the text)."""
    return "".join(low if len(low := ch.lower()) == 1 else ch for ch in text)


def _runs(text: str, hidden: bytearray) -> Iterator[str]:
    start = 0
    while start < len(text):
        end = start
        while end < len(text) and hidden[end] == hidden[start]:
            end += 1
        yield REDACTED if hidden[start] else text[start:end]
        start = end
