"""A pull request's reviews file, read as JSON (pure): `gh api --paginate` writes one array a page, one after the
other; `--slurp` writes an array of those arrays; either is a list of reviews here, or a located reason why not."""

from __future__ import annotations

import json
from typing import Any

from controller.core.documents.diagnostics import Diagnostic, Location

REVIEWS_HINT = (
    "save the reviews with `gh api --paginate --slurp repos/OWNER/REPO/pulls/N/reviews` "
    "(a JSON array, one array per page, or an array of pages)"
)


def reviews_json(text: str, source: str) -> tuple[list[Any], list[Diagnostic]]:
    """The reviews in order from one JSON array, concatenated arrays (`gh api --paginate`: one per page)
    or an array of arrays (`gh api --paginate --slurp`)."""
    decoder = json.JSONDecoder()
    pages: list[tuple[Any, int]] = []
    at = _skip_blank(text, 0)
    while at < len(text):
        try:
            value, end = decoder.raw_decode(text, at)
        except json.JSONDecodeError as exc:
            where = Location(source, exc.lineno, exc.colno)
            return [], [Diagnostic(where, f"the reviews file is not valid JSON: {exc.msg}", REVIEWS_HINT)]
        except (ValueError, RecursionError) as exc:  # a number of over 4,300 digits; arrays nested past the stack
            why = "nests arrays or objects too deeply" if isinstance(exc, RecursionError) else "holds a number too long"
            return [], [Diagnostic(_at(source, text, at), f"the reviews file {why} to read as JSON", REVIEWS_HINT)]
        pages.append((value, at))
        at = _skip_blank(text, end)
    if not pages:
        return [], [Diagnostic(Location(source, 1, 1), "the reviews file is empty", REVIEWS_HINT)]
    if (
        len(pages) == 1
        and isinstance(pages[0][0], list)
        and pages[0][0]
        and all(isinstance(page, list) for page in pages[0][0])
    ):
        return [review for page in pages[0][0] for review in page], []
    found: list[Any] = []
    for value, start in pages:
        if not isinstance(value, list):
            message = f"the reviews file must hold JSON arrays of reviews, found a JSON {_json_kind(value)} here"
            return [], [Diagnostic(_at(source, text, start), message, REVIEWS_HINT)]
        found += value
    return found, []


def _at(source: str, text: str, at: int) -> Location:
    """Line and column (from 1) of the character at offset `at`."""
    before = text[:at]
    return Location(source, before.count("\n") + 1, at - before.rfind("\n"))


def _json_kind(value: Any) -> str:
    """What a JSON value other than an array is (what `json` decodes to: no other type reaches here)."""
    if isinstance(value, bool):
        return "boolean"
    return {dict: "object", str: "string", int: "number", float: "number", type(None): "null"}[type(value)]


def _skip_blank(text: str, at: int) -> int:
    while at < len(text) and text[at] in " \t\r\n":
        at += 1
    return at
