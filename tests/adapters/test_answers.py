"""The bounded reading and decoding of answers (`controller/adapters/answers.py`), on bodies built here: each
content encoding inflated as it streams and never past the cap, JSON as RFC 8259 has it, depth to the level."""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from controller.adapters.answers import (
    MAX_DEPTH,
    AnswerLate,
    AnswerTooDeep,
    AnswerTooLarge,
    AnswerUnreadable,
    decode_json,
    read_body,
    within_depth,
)


class Chunks(httpx.SyncByteStream):
    def __init__(self, *chunks: bytes) -> None:
        self.chunks = chunks

    def __iter__(self) -> Iterator[bytes]:
        yield from self.chunks


def streamed(*chunks: bytes, encoding: str | None = None) -> httpx.Response:
    """A response whose body arrives in `chunks`, as from a socket (not read yet)."""
    headers = {} if encoding is None else {"Content-Encoding": encoding}
    request = httpx.Request("GET", "http://a/")
    return httpx.Response(200, headers=headers, stream=Chunks(*chunks), request=request)


def read(response: httpx.Response, cap: int = 1000, seconds: float = 10.0) -> bytes:
    return read_body(response, deadline=time.monotonic() + seconds, cap=cap)


def squeezed(data: bytes, wbits: int) -> bytes:
    squeeze = zlib.compressobj(9, zlib.DEFLATED, wbits)
    return squeeze.compress(data) + squeeze.flush()


BODY = b'{"a": [1, 2, 3]}' * 20


@pytest.mark.parametrize(
    ("encoding", "wbits"),
    [("gzip", zlib.MAX_WBITS | 16), ("x-gzip", zlib.MAX_WBITS | 16), ("deflate", zlib.MAX_WBITS), ("deflate", -15)],
    ids=["gzip", "x-gzip", "deflate-zlib", "deflate-raw"],
)
def test_each_encoding_is_inflated_as_it_streams(encoding: str, wbits: int) -> None:
    packed = squeezed(BODY, wbits)
    chunks = [packed[i : i + 7] for i in range(0, len(packed), 7)]
    assert read(streamed(*chunks, encoding=encoding)) == BODY


@pytest.mark.parametrize("encoding", [None, "identity", " GZIP "])
def test_plain_and_spelled_otherwise(encoding: str | None) -> None:
    body = squeezed(BODY, zlib.MAX_WBITS | 16) if encoding == " GZIP " else BODY
    assert read(streamed(body[:5], body[5:], encoding=encoding)) == BODY


def test_the_cap_is_of_the_inflated_body_and_stops_inflating_there() -> None:
    bomb = squeezed(b"\0" * 10_000_000, zlib.MAX_WBITS | 16)
    assert len(bomb) < 20_000
    with pytest.raises(AnswerTooLarge, match=r"^the answer is larger than 1 KiB$"):
        read(streamed(bomb, encoding="gzip"), cap=1024)
    assert read(streamed(b"x" * 1024), cap=1024) == b"x" * 1024  # exactly the cap is read
    with pytest.raises(AnswerTooLarge, match=r"^the answer is larger than 1 MiB$"):
        read(streamed(b"x" * 2**20, b"x"), cap=2**20)


def test_an_answer_made_in_memory_is_capped_too() -> None:
    made = httpx.Response(200, content=b"x" * 11)
    assert read(made, cap=11) == b"x" * 11
    with pytest.raises(AnswerTooLarge):
        read(made, cap=10)


@pytest.mark.parametrize(
    ("chunks", "encoding", "why"),
    [
        ((b"\x1f\x8b garbage",), "gzip", "the gzip body is corrupt"),
        ((squeezed(BODY, zlib.MAX_WBITS | 16)[:-12],), "gzip", "the gzip body ends before its end"),
        ((b"x",), "br", "the answer is encoded as 'br', which backfillctl did not ask for"),
        ((b"x",), "gzip, br", "the answer is encoded as 'gzip, br', which backfillctl did not ask for"),
        ((b"x",), "\x1b[31m", "the answer is encoded as '??31m', which backfillctl did not ask for"),
    ],
)
def test_an_encoding_not_read_says_why(chunks: tuple[bytes, ...], encoding: str, why: str) -> None:
    with pytest.raises(AnswerUnreadable) as caught:
        read(streamed(*chunks, encoding=encoding))
    assert str(caught.value) == why


def test_the_deadline_is_of_the_whole_answer() -> None:
    class Slow(httpx.SyncByteStream):
        def __iter__(self) -> Iterator[bytes]:
            for _ in range(10):
                time.sleep(0.05)
                yield b"x"

    slow = httpx.Response(200, stream=Slow(), request=httpx.Request("GET", "http://a/"))
    started = time.monotonic()
    with pytest.raises(AnswerLate, match=r"^the whole answer did not arrive in time$"):
        read(slow, seconds=0.12)
    assert time.monotonic() - started < 0.3  # every read was quick: the deadline, not a read timeout, ended it


def test_each_read_waits_at_most_what_remains() -> None:
    response = streamed(b"x")
    response.request.extensions["timeout"] = {"connect": 5.0, "read": 30.0, "write": 30.0, "pool": 30.0}
    read(response, seconds=2.0)
    assert 0 < response.request.extensions["timeout"]["read"] <= 2.0


def deep(levels: int) -> bytes:
    return b"[" * levels + b"]" * levels


@pytest.mark.parametrize(
    ("body", "value"),
    [
        (b'{"a": [1, 2.5, "x", null, true]}', {"a": [1, 2.5, "x", None, True]}),
        ("\ufeff[1]".encode(), [1]),  # a byte order mark
        (b'["\xff"]', ["\ufffd"]),  # invalid UTF-8 is U+FFFD, never a surrogate
        (b'["\xed\xa0\x80"]', ["\ufffd\ufffd\ufffd"]),  # a surrogate's UTF-8 bytes are invalid UTF-8
        (b'["\\ud800", {"k\\udfff": "\\u0000"}]', ["\\ud800", {"k\\udfff": "\\u0000"}]),  # as escapes: storable
        (b'["\\ud83d\\ude00", "\\\\ud800"]', ["\U0001f600", "\\ud800"]),  # a pair is its character
        (deep(MAX_DEPTH), json.loads(deep(MAX_DEPTH))),  # as deep as allowed
    ],
)
def test_json_decoded(body: bytes, value: Any) -> None:
    assert decode_json(body) == value


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (deep(MAX_DEPTH + 1), "the answer is JSON nested deeper than 128 levels"),  # decoded, then refused
        (deep(200_000), "the answer is JSON nested deeper than 128 levels"),  # json's own RecursionError
        (b"[NaN]", "the answer is not JSON (NaN is not JSON)"),
        (b"[-Infinity]", "the answer is not JSON (-Infinity is not JSON)"),
        (b"[1e999]", "the answer is not JSON (a number too large for a double)"),
        (
            b"[" + b"9" * 5000 + b"]",
            "the answer is not JSON (Exceeds the limit (4300 digits) for integer string conversion)",
        ),
        (b"<html>", "the answer is not JSON (Expecting value at line 1 column 1)"),
        (b"", "the answer is not JSON (Expecting value at line 1 column 1)"),
    ],
)
def test_json_refused(body: bytes, why: str) -> None:
    kind = AnswerTooDeep if "deeper" in why else AnswerUnreadable
    with pytest.raises(kind) as caught:
        decode_json(body)
    assert str(caught.value) == why


@pytest.mark.parametrize(
    ("value", "limit", "within"),
    [
        (1, 0, True),
        ([], 0, False),
        ([], 1, True),
        ([[]], 1, False),
        ({"a": {"b": 1}}, 2, True),
        ({"a": {"b": {}}}, 2, False),
        ([1, [2, [3]], {"x": [[]]}], 4, True),
        ([1, [2, [3]], {"x": [[[]]]}], 4, False),
    ],
)
def test_depth_is_counted_by_level(value: Any, limit: int, within: bool) -> None:
    assert within_depth(value, limit) is within
