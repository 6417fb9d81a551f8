"""Answers from outside (Airflow, Prometheus) read within bounds, and decoded into values safe to hash and show.

httpx's timeout is per read: a server that sends a byte every few seconds holds a request as long as it likes,
and httpx inflates a gzip body whole (2 MB can inflate to 2 GiB). So a request has a total `deadline` (a
`time.monotonic()` value): each phase's timeout is what remains of it (`timeout_until`), and `read_body` streams
the raw body, checking the deadline between reads and inflating it itself (zlib's `max_length`), never more than
`cap` bytes. `decode_json` reads JSON as RFC 8259 has it (UTF-8, no NaN or Infinity, no number it cannot hold),
no deeper than `MAX_DEPTH`, with every lone surrogate and NUL in its strings escaped (`storable`).

Each refusal is an `AnswerRefused` whose text says why, never a byte of the answer; the adapters make it their
own error.
"""

from __future__ import annotations

import json
import math
import re
import time
import zlib
from collections.abc import Callable
from typing import Any

import httpx

from controller.core.documents.storable import storable

MAX_DEPTH = 128  # nested arrays and objects: Airflow's deepest answer is a page of confs (a spec's: 64 at most)
ACCEPT_ENCODING = "gzip, deflate"  # what read_body inflates (httpx would offer br or zstd when installed)
_MIB = 2**20
# a JSON escape that decodes to text no UTF-8 encoder or PostgreSQL takes: NUL, or one half of a surrogate pair
_UNSTORABLE_ESCAPE = re.compile(r"\\u(?:0000|[dD][89abcdefABCDEF])")


class AnswerRefused(Exception):
    """An answer not read: its text says why (never a byte of the answer)."""


class AnswerLate(AnswerRefused):
    """The whole answer did not arrive before the request's deadline."""


class AnswerTooLarge(AnswerRefused):
    """The body, inflated, is larger than the cap."""


class AnswerUnreadable(AnswerRefused):
    """The body cannot be inflated or decoded (an encoding not offered, corrupt gzip, not JSON, too deep)."""


class AnswerTooDeep(AnswerUnreadable):
    """JSON nested deeper than the limit."""


def size_text(size: int) -> str:
    """A cap as people say it: 1 MiB, 32 MiB, 512 KiB."""
    return f"{size // _MIB} MiB" if size % _MIB == 0 else f"{size // 1024} KiB"


def timeout_until(deadline: float, connect: float) -> httpx.Timeout:
    """httpx's per-phase timeouts, none longer than what remains until `deadline` (monotonic seconds)."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise AnswerLate("the deadline passed before the request was sent")
    return httpx.Timeout(left, connect=min(connect, left))


def read_body(response: httpx.Response, *, deadline: float, cap: int) -> bytes:
    """The body of a response sent with `stream=True`, inflated, read before `deadline` and at most `cap` bytes.

    Raises `AnswerRefused`; httpx's own errors (a read that times out, a connection cut mid-body) pass through."""
    try:
        made = response.content  # a response made in memory (httpx.MockTransport's) comes read and inflated
    except httpx.ResponseNotRead:
        return _streamed(response, deadline, cap)
    if len(made) > cap:
        raise AnswerTooLarge(f"the answer is larger than {size_text(cap)}")
    return made


def _streamed(response: httpx.Response, deadline: float, cap: int) -> bytes:
    inflate = _inflater(response.headers.get("content-encoding", ""))
    _wait_at_most(deadline, response.request)
    parts: list[bytes] = []
    size = 0
    try:
        for chunk in response.iter_raw():
            if time.monotonic() > deadline:
                raise AnswerLate("the whole answer did not arrive in time")
            for part in inflate(chunk, cap - size + 1):
                size += len(part)
                if size > cap:
                    raise AnswerTooLarge(f"the answer is larger than {size_text(cap)}")
                parts.append(part)
    except httpx.ReadTimeout:  # each read waits at most what remained: a read that times out meets the deadline
        raise AnswerLate("the whole answer did not arrive in time") from None
    inflate(b"", 1)  # the end of the stream: a compressed body must have ended too
    return b"".join(parts)


def _wait_at_most(deadline: float, request: httpx.Request) -> None:
    """The body's reads each wait at most what remains now (httpcore reads the timeout as the body starts)."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise AnswerLate("the whole answer did not arrive in time")
    timeouts = dict(request.extensions.get("timeout") or {})
    timeouts["read"] = min(left, timeouts.get("read") or left)
    request.extensions["timeout"] = timeouts


Inflate = Callable[[bytes, int], list[bytes]]  # (raw bytes, or b"" at the end; the most bytes to give) -> inflated
_STEP = 2**20  # inflated at most a MiB at a time: a bomb never has its cap in one buffer beside its parts


def _inflater(encoding: str) -> Inflate:
    """The incremental inflater for a Content-Encoding; one backfillctl did not offer is refused."""
    name = encoding.strip().lower()
    if name in ("", "identity"):
        return _identity
    if name in ("gzip", "x-gzip"):
        return _Zlib(zlib.MAX_WBITS | 16, "gzip").inflate
    if name == "deflate":  # zlib-wrapped as the RFC says, or raw deflate as some servers send it
        return _Zlib(zlib.MAX_WBITS, "deflate", raw_fallback=True).inflate
    shown = re.sub(r"[^A-Za-z0-9 ,.-]", "?", name[:40])
    raise AnswerUnreadable(f"the answer is encoded as {shown!r}, which backfillctl did not ask for")


def _identity(chunk: bytes, _limit: int) -> list[bytes]:
    return [chunk]


class _Zlib:
    """zlib's decompressor, never giving back more than asked: a bomb stops at the cap, not at its size."""

    def __init__(self, wbits: int, name: str, *, raw_fallback: bool = False) -> None:
        self._inflater, self._name = zlib.decompressobj(wbits), name
        self._raw_fallback, self._started = raw_fallback, False

    def inflate(self, chunk: bytes, limit: int) -> list[bytes]:
        try:
            if chunk:
                return self._feed(chunk, limit)
        except zlib.error:
            raise AnswerUnreadable(f"the {self._name} body is corrupt") from None
        if self._started and not self._inflater.eof:
            raise AnswerUnreadable(f"the {self._name} body ends before its end")
        return []

    def _feed(self, chunk: bytes, limit: int) -> list[bytes]:
        """The chunk inflated a step at a time, up to `limit` bytes (bytes after the end of the stream are not
        part of it: httpx ignores them too)."""
        if not self._started:
            self._started = True
            self._choose(chunk)
        pieces, data = [], chunk
        while data and limit > 0 and not self._inflater.eof:
            piece = self._inflater.decompress(data, min(limit, _STEP))
            if not piece:
                break
            pieces.append(piece)
            limit -= len(piece)
            data = self._inflater.unconsumed_tail
        return pieces

    def _choose(self, first: bytes) -> None:
        """Deflate as raw deflate when the first bytes are not zlib's header."""
        if self._raw_fallback:
            try:
                zlib.decompressobj(zlib.MAX_WBITS).decompress(first[:2048], 1)
            except zlib.error:
                self._inflater = zlib.decompressobj(-zlib.MAX_WBITS)


def decode_json(body: bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value of a body; raises `AnswerUnreadable` saying why it is not one backfillctl reads."""
    text = body.decode("utf-8", errors="replace").removeprefix("\ufeff")  # invalid UTF-8 is U+FFFD, never a surrogate
    try:
        value = json.loads(text, parse_constant=_no_constant, parse_float=_finite)
    except RecursionError:
        raise AnswerTooDeep(f"the answer is JSON nested deeper than {max_depth} levels") from None
    except MemoryError:
        raise AnswerUnreadable("the answer is JSON too large to decode") from None
    except ValueError as exc:
        raise AnswerUnreadable(f"the answer is not JSON ({_why_not_json(exc)})") from None
    if not within_depth(value, max_depth):
        raise AnswerTooDeep(f"the answer is JSON nested deeper than {max_depth} levels")
    return storable(value) if _UNSTORABLE_ESCAPE.search(text) else value


def _why_not_json(exc: ValueError) -> str:
    """json's reason and place, never the text around it (a number's digits are its own text: left out)."""
    if isinstance(exc, json.JSONDecodeError):
        return f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    return str(exc).split(":")[0][:80]


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("a number too large for a double")
    return value


def within_depth(value: Any, limit: int) -> bool:
    """Whether arrays and objects nest at most `limit` levels: level by level (no recursion, any depth json
    decodes), each level one comprehension (a page of 100 DAG runs: ~0.1 ms)."""
    level = [value] if type(value) is dict or type(value) is list else []
    for _ in range(limit):
        if not level:
            return True
        level = [
            child
            for item in level
            for child in (item.values() if type(item) is dict else item)
            if type(child) is dict or type(child) is list
        ]
    return not level
