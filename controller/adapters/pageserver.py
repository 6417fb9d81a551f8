"""A small read-only HTTP server for the status port: bounded, with deadlines and the same safe headers on every
answer (standard library only: selectors, sockets, threads).

One thread accepts connections and reads each request's head with a selector, so an idle or slow client costs a
file descriptor and a few bytes, never a thread, and is cut `head_timeout` seconds after it connected (in all,
not per read). A few worker threads answer complete requests, one per connection (HTTP/1.0: the connection
closes after the answer). At most `max_connections` are open at once; one more evicts the oldest that has
been sending its head for over a second, else it is closed at once. An accept() that fails for want of file
descriptors is logged once and retried after a short pause: the port never spins, and never takes the
process down. A request whose Host this port does not answer to (`hostcheck`) is refused with 421 before it is routed.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import queue
import re
import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http import HTTPStatus

from controller.adapters.hostcheck import HostPolicy, names_of

log = logging.getLogger(__name__)

CSP = "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"
SAFE_HEADERS = (  # on every answer, error pages included
    ("Content-Security-Policy", CSP),
    ("X-Frame-Options", "DENY"),
    ("X-Content-Type-Options", "nosniff"),
    ("Referrer-Policy", "no-referrer"),
    ("Cache-Control", "no-store"),
)
METHODS = ("GET", "HEAD")
MAX_HEAD = 16 * 1024  # request line and headers; a GET needs a few hundred bytes
_HEAD_END = re.compile(rb"\r?\n\r?\n")
_OUT_OF_FILES = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
TEXT = "text/plain; charset=utf-8"


@dataclass(frozen=True, slots=True)
class Limits:
    max_connections: int = 64  # open at once (reading or being answered): far below a 1,024 open-files limit
    workers: int = 4  # threads answering complete requests
    head_timeout: float = 10.0  # seconds from connect to the end of the request's head
    write_timeout: float = 10.0  # seconds a client may leave an answer unread
    evict_after: float = 1.0  # at the bound, a connection still sending its head after this long gives way
    accept_pause: float = 0.5  # seconds between accept() attempts while out of file descriptors


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    content_type: str
    body: bytes
    headers: tuple[tuple[str, str], ...] = ()

    def encode(self, *, head: bool = False) -> bytes:
        lines = [
            f"HTTP/1.0 {self.status} {HTTPStatus(self.status).phrase}",
            f"Content-Type: {self.content_type}",
            f"Content-Length: {len(self.body)}",
            "Connection: close",
            *(f"{name}: {value}" for name, value in (*SAFE_HEADERS, *self.headers)),
        ]
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + (b"" if head else self.body)


def refusal(status: int, text: str, *headers: tuple[str, str]) -> Answer:
    return Answer(status, TEXT, (text + "\n").encode(), headers)


@dataclass(frozen=True, slots=True)
class Request:
    method: str
    target: str
    host: str


def parse_head(head: bytes) -> Request | Answer:
    """The request line and the one Host header of a request's head, without its blank line (an Answer refusing
    it when malformed)."""
    line, *fields = head.decode("latin-1").replace("\r\n", "\n").split("\n")
    parts = line.split(" ")
    if len(parts) != 3 or not parts[0].isalpha() or not parts[2].startswith("HTTP/1."):
        return refusal(400, "bad request: expected a request line like `GET /metrics HTTP/1.1`")
    if not parts[1].startswith("/"):
        return refusal(400, "bad request: the target must be a path (`/`, `/metrics`, `/healthz`)")
    hosts = []
    for text in filter(None, fields):
        name, colon, value = text.partition(":")
        if not colon or not name or name != name.strip():
            return refusal(400, "bad request: a header line is not `Name: value`")
        if name.lower() == "host":
            hosts.append(value.strip())
    if len(hosts) != 1:
        return refusal(400, "bad request: exactly one Host header is needed")
    return Request(parts[0], parts[1], hosts[0])


@dataclass(slots=True)
class _Head:
    peer: str
    since: float
    data: bytearray = field(default_factory=bytearray)


class PageServer:
    """Listens on host:port and answers GET and HEAD with `route(path)`; see the module's docstring."""

    def __init__(
        self,
        route: Callable[[str], Answer],
        host: str,
        port: int,
        *,
        names: Iterable[str] = (),
        limits: Limits | None = None,
    ) -> None:
        limits = limits or Limits()
        self.route, self.limits = route, limits
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self._listener = socket.create_server((host, port), family=family, backlog=128)
        self._listener.setblocking(False)
        bound = self._listener.getsockname()
        self.port: int = bound[1]
        self.policy = HostPolicy(bound[0], names_of(host, names))
        self._selector = selectors.DefaultSelector()
        self._wake, self._waker = socket.socketpair()
        self._selector.register(self._listener, selectors.EVENT_READ)
        self._selector.register(self._wake, selectors.EVENT_READ)
        self._heads: dict[socket.socket, _Head] = {}  # oldest first
        self._answering = 0  # handed to the workers, not closed yet
        self._count_lock = threading.Lock()
        self._jobs: queue.SimpleQueue[tuple[socket.socket, _Head] | None] = queue.SimpleQueue()
        self._paused_until: float | None = None  # out of file descriptors: accept again at this time
        self._said: set[str] = set()  # conditions logged once (until they pass)
        self._stopping = False
        self._threads = [threading.Thread(target=self._serve, name="backfillctl-monitor", daemon=True)]
        self._threads += [
            threading.Thread(target=self._work, name=f"backfillctl-monitor-{n}", daemon=True)
            for n in range(limits.workers)
        ]
        for thread in self._threads:
            thread.start()

    def close(self) -> None:
        if self._stopping:
            return
        self._stopping = True
        self._waker.send(b"x")
        for _ in range(self.limits.workers):
            self._jobs.put(None)
        for thread in self._threads:
            thread.join(timeout=self.limits.write_timeout + 1)
        self._wake.close()
        self._waker.close()

    def open_connections(self) -> int:
        with self._count_lock:
            return len(self._heads) + self._answering

    # the accepting thread

    def _serve(self) -> None:
        try:
            while not self._stopping:
                try:
                    self._step()
                except Exception:  # a bug here must not silence the port for good; it is logged, then the loop goes on
                    log.exception("status port: unexpected error")
                    time.sleep(0.1)
        finally:
            for conn in list(self._heads):
                self._drop(conn)
            self._selector.close()
            self._listener.close()

    def _step(self) -> None:
        for key, _events in self._selector.select(self._next_timeout()):
            if key.fileobj is self._listener:
                self._accept()
            elif key.fileobj is self._wake:
                self._wake.recv(64)
            else:
                self._read(key.fileobj)  # type: ignore[arg-type]
        self._expire()
        if self._paused_until is not None and time.monotonic() >= self._paused_until:
            self._paused_until = None
            self._selector.register(self._listener, selectors.EVENT_READ)

    def _next_timeout(self) -> float:
        oldest = next(iter(self._heads.values()), None)
        moments = [oldest.since + self.limits.head_timeout] if oldest is not None else []
        moments += [self._paused_until] if self._paused_until is not None else []
        return min([1.0, *(max(0.0, m - time.monotonic()) for m in moments)])

    def _accept(self) -> None:
        for _ in range(self.limits.max_connections):  # a batch, then the reads get their turn
            try:
                conn, peer = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in _OUT_OF_FILES:
                    self._out_of_files(exc)
                    return
                continue  # that client gave up before it was accepted (ECONNABORTED)
            self._passed("files", "status port: accepting connections again")
            self._admit(conn, str(peer[0]))

    def _out_of_files(self, exc: OSError) -> None:
        self._say(
            "files",
            f"status port: cannot accept connections ({exc.strerror}); retrying every {self.limits.accept_pause:g}s",
        )
        self._selector.unregister(self._listener)
        self._paused_until = time.monotonic() + self.limits.accept_pause

    def _admit(self, conn: socket.socket, peer: str) -> None:
        if self.open_connections() >= self.limits.max_connections and not self._evict():
            self._say("full", f"status port: {self.limits.max_connections} connections open; closing new ones")
            conn.close()
            return
        if self.open_connections() < self.limits.max_connections // 2:
            self._said.discard("full")
        conn.setblocking(False)
        with self._count_lock:
            self._heads[conn] = _Head(peer, time.monotonic())
        self._selector.register(conn, selectors.EVENT_READ)

    def _evict(self) -> bool:
        """Make room by closing the oldest connection still sending its head, if it has had a second."""
        oldest = next(iter(self._heads.items()), None)
        if oldest is None or time.monotonic() - oldest[1].since < self.limits.evict_after:
            return False
        self._drop(oldest[0])
        return True

    def _read(self, conn: socket.socket) -> None:
        head = self._heads.get(conn)
        if head is None:  # evicted by an accept earlier in the same round of events
            return
        try:
            chunk = conn.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self._drop(conn)
            _lost(head.peer, "before its request was complete", exc)
            return
        if not chunk:  # closed before sending a request: nothing to answer
            self._drop(conn)
            return
        head.data += chunk
        if _HEAD_END.search(head.data) or len(head.data) > MAX_HEAD:
            self._selector.unregister(conn)
            with self._count_lock:
                del self._heads[conn]
                self._answering += 1
            self._jobs.put((conn, head))

    def _expire(self) -> None:
        limit = time.monotonic() - self.limits.head_timeout
        late = [conn for conn, head in self._heads.items() if head.since <= limit]
        for conn in late:
            answer = refusal(408, f"request timeout: send the request within {self.limits.head_timeout:g}s")
            with contextlib.suppress(OSError):  # non-blocking, best effort: the connection closes either way
                conn.send(answer.encode())
            self._drop(conn)

    def _drop(self, conn: socket.socket) -> None:
        with self._count_lock:
            self._heads.pop(conn, None)
        with contextlib.suppress(KeyError, ValueError):  # not registered (any more)
            self._selector.unregister(conn)
        conn.close()

    def _say(self, key: str, message: str) -> None:
        if key not in self._said:
            self._said.add(key)
            log.warning(message)

    def _passed(self, key: str, message: str) -> None:
        if key in self._said:
            self._said.discard(key)
            log.warning(message)

    # the workers

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            conn, head = job
            try:
                self._answer(conn, head)
            except Exception:  # a bug answering one request must not shrink the pool
                log.exception("status port: unexpected error answering a request")
            finally:
                conn.close()
                with self._count_lock:
                    self._answering -= 1

    def _answer(self, conn: socket.socket, head: _Head) -> None:
        end = _HEAD_END.search(head.data)
        request = parse_head(bytes(head.data[: end.start()])) if end and end.start() <= MAX_HEAD else None
        answer = self._decide(request)
        conn.settimeout(self.limits.write_timeout)
        what = f"while answering {request.method} {request.target[:80]}" if isinstance(request, Request) else ""
        try:
            conn.sendall(answer.encode(head=isinstance(request, Request) and request.method == "HEAD"))
            conn.shutdown(socket.SHUT_WR)
        except TimeoutError:
            log.info("status port: %s left the answer unread for %gs", head.peer, self.limits.write_timeout)
        except OSError as exc:
            _lost(head.peer, what or "while refusing its request", exc)

    def _decide(self, request: Request | Answer | None) -> Answer:
        if request is None:
            return refusal(431, "request header fields too large")
        if isinstance(request, Answer):
            return request
        if not self.policy.allows(request.host):
            return refusal(
                421,
                f"misdirected request: this port answers to {self.policy.described()}; "
                "another name needs --metrics-host-name",
            )
        if request.method not in METHODS:
            return refusal(405, "method not allowed: only GET and HEAD", ("Allow", ", ".join(METHODS)))
        try:
            return self.route(request.target.split("?", 1)[0])
        except Exception:
            log.exception("status port: unexpected error answering %s", request.target[:80])
            return refusal(500, "internal error: see the reconciler's log")


def _lost(peer: str, when: str, exc: OSError) -> None:
    """A client that reset or dropped its connection: one line, no traceback (it is the client's doing)."""
    log.info("status port: connection from %s lost %s (%s)", peer, when, exc.strerror or type(exc).__name__)
