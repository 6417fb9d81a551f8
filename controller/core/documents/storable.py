"""Text from outside made storable (pure): what UTF-8, the audit hash, a log line, a page and PostgreSQL carry.

A JSON answer may hold `"\\ud800"`, a lone UTF-16 surrogate: Python decodes it, but no UTF-8 encoder writes it, so
hashing, storing or printing it raises. PostgreSQL's text cannot hold a NUL. Each such character becomes its JSON
escape as six ASCII characters (`\\ud800`, `\\u0000`): the text shows what was sent, and is valid Unicode. Text
without them is returned as it is, so what is storable today is stored and hashed byte for byte as before.
"""

from __future__ import annotations

import re
from typing import Any

from controller.core.documents.scalars import UNSTORABLE

SURROGATE = re.compile("[\ud800-\udfff]")  # what no UTF-8 encoder writes (a NUL it does: only PostgreSQL refuses it)


def _escape(found: re.Match[str]) -> str:
    return f"\\u{ord(found.group()):04x}"


def storable_text(text: str, unsafe: re.Pattern[str] = UNSTORABLE) -> str:
    """`text` with each character `unsafe` matches (a lone surrogate or a NUL) as its `\\uXXXX` escape."""
    return unsafe.sub(_escape, text)


def storable(value: Any, unsafe: re.Pattern[str] = UNSTORABLE) -> Any:
    """A JSON value (decoded, or about to be encoded) with every string in it, keys too, made `storable_text`.

    Recursive: the caller bounds the depth (a decoded answer is checked first, an audit entry is the
    controller's own)."""
    if isinstance(value, str):
        return storable_text(value, unsafe)
    if isinstance(value, dict):
        return {storable_text(k, unsafe) if isinstance(k, str) else k: storable(v, unsafe) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [storable(item, unsafe) for item in value]
    return value
