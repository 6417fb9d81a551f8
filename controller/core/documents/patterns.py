"""Regular expressions from schemas and the policy, searched with ECMA-262 semantics (JSON Schema's dialect).

Python's `$` also matches before a final newline, so `^[a-z]+$` accepted `"demo\\n"` as a DAG id or a login
(a `requested_by: "alice\\n"` then differs from the approver `alice`); ECMA-262's `$` matches only at the end.
"""

from __future__ import annotations

import re
from functools import lru_cache


def ecma_search(pattern: str, text: str) -> bool:
    """Whether `pattern` matches somewhere in `text`, as a JSON Schema `pattern` would."""
    return _compiled(pattern).search(text) is not None


@lru_cache(maxsize=256)
def _compiled(pattern: str) -> re.Pattern[str]:
    return re.compile(ecma_pattern(pattern))


def ecma_pattern(pattern: str) -> str:
    """`pattern` with each bare `$` (outside a class, not escaped) written as `\\Z`: the end of the text only."""
    out: list[str] = []
    i, in_class = 0, False
    while i < len(pattern):
        char = pattern[i]
        if char == "\\":
            out.append(pattern[i : i + 2])
            i += 2
            continue
        if in_class:
            in_class = char != "]"
        elif char == "[":
            in_class = True
            i = _class_start(pattern, i + 1, out)
            continue
        elif char == "$":
            char = r"\Z"
        out.append(char)
        i += 1
    return "".join(out)


def _class_start(pattern: str, i: int, out: list[str]) -> int:
    """Copy `[`, an optional `^` and a leading `]` (a literal there); the index after them."""
    out.append("[")
    if pattern[i : i + 1] == "^":
        out.append("^")
        i += 1
    if pattern[i : i + 1] == "]":
        out.append("]")
        i += 1
    return i
