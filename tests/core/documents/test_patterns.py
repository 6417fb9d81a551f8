"""Patterns are searched as JSON Schema's ECMA-262 does: `$` matches only at the end of the text."""

from __future__ import annotations

import pytest

from controller.core.documents.patterns import ecma_pattern, ecma_search


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("^[a-z]+$", r"^[a-z]+\Z"),
        (r"^a\$b$", r"^a\$b\Z"),  # an escaped dollar is a dollar
        ("^[$]$", r"^[$]\Z"),  # inside a class too
        ("^[]$]x$", r"^[]$]x\Z"),  # a leading ] is part of the class
        ("^[^]$]x$", r"^[^]$]x\Z"),
        ("^(a$|b$)", r"^(a\Z|b\Z)"),
        (r"^\\$", r"^\\\Z"),  # an escaped backslash, then the anchor
        ("^(CHG|INC)-[0-9]+", "^(CHG|INC)-[0-9]+"),
    ],
)
def test_a_bare_dollar_anchors_at_the_end_only(pattern: str, expected: str) -> None:
    assert ecma_pattern(pattern) == expected


@pytest.mark.parametrize(
    ("pattern", "text", "matches"),
    [
        ("^[a-z]+$", "demo", True),
        ("^[a-z]+$", "demo\n", False),  # Python's re.search says True
        ("^(CHG|INC)-[0-9]+$", "CHG-1\n", False),
        ("^(CHG|INC)-[0-9]+$", "CHG-12", True),
        ("CHG", "x CHG y", True),  # a search, not a full match
        ("^a$", "b", False),
    ],
)
def test_search_as_json_schema_does(pattern: str, text: str, matches: bool) -> None:
    assert ecma_search(pattern, text) is matches
