"""The reviews file as JSON (`core/documents/reviews_json.py`): every shape `gh api` writes is a list of reviews
in order; anything else is one located diagnostic with the same hint."""

from __future__ import annotations

from typing import Any

import pytest

from controller.core.documents.reviews_json import REVIEWS_HINT, reviews_json

A, B, C = {"id": 1}, {"id": 2}, {"id": 3}


@pytest.mark.parametrize(
    ("text", "reviews"),
    [
        ('[{"id": 1}, {"id": 2}]', [A, B]),  # one page
        ('[{"id": 1}]\n[{"id": 2}, {"id": 3}]\n', [A, B, C]),  # --paginate: one array a page
        ('[[{"id": 1}], [{"id": 2}, {"id": 3}]]', [A, B, C]),  # --paginate --slurp: an array of pages
        (" \t\r\n[]\n", []),  # no review yet
        ("[]\n[]", []),
        ("[[], []]", []),
        ('[[{"id": 1}], {"id": 2}]', [[A], B]),  # not every item a page: one array of whatever it holds
    ],
)
def test_what_gh_writes_is_read_in_order(text: str, reviews: list[Any]) -> None:
    assert reviews_json(text, "reviews.json") == (reviews, [])


def _said(text: str) -> tuple[int, int, str]:
    found, problems = reviews_json(text, "r.json")
    assert found == []
    (problem,) = problems
    assert (problem.location.source, problem.hint) == ("r.json", REVIEWS_HINT)
    return problem.location.line, problem.location.column, problem.message


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("", (1, 1, "the reviews file is empty")),
        ("  \n\t", (1, 1, "the reviews file is empty")),
        ("[1,", (1, 4, "the reviews file is not valid JSON: Expecting value")),
        ("[]\n  x", (2, 3, "the reviews file is not valid JSON: Expecting value")),
        ('{"id": 1}', (1, 1, "the reviews file must hold JSON arrays of reviews, found a JSON object here")),
        ('[]\n  "x"', (2, 3, "the reviews file must hold JSON arrays of reviews, found a JSON string here")),
        ("[]\n7", (2, 1, "the reviews file must hold JSON arrays of reviews, found a JSON number here")),
        ("[] 1.5", (1, 4, "the reviews file must hold JSON arrays of reviews, found a JSON number here")),
        ("[] true", (1, 4, "the reviews file must hold JSON arrays of reviews, found a JSON boolean here")),
        ("[] null", (1, 4, "the reviews file must hold JSON arrays of reviews, found a JSON null here")),
        ("X", (1, 1, "the reviews file is not valid JSON: Expecting value")),
        ("\n[]\n  x\n\n", (3, 3, "the reviews file is not valid JSON: Expecting value")),
        ('\n[]\n  "x"\n\n[]', (3, 3, "the reviews file must hold JSON arrays of reviews, found a JSON string here")),
        ("[]\n\n [" + "1" * 5000 + "]", (3, 2, "the reviews file holds a number too long to read as JSON")),
        ("\n[]\n [" + "1" * 5000 + "]\n\n", (3, 2, "the reviews file holds a number too long to read as JSON")),
    ],
)
def test_anything_else_is_one_located_problem(text: str, said: tuple[int, int, str]) -> None:
    assert _said(text) == said


def test_nesting_past_the_stack_is_said_not_raised() -> None:
    line, column, message = _said("[]\n" + "[" * 100_000)
    assert (line, column, message) == (2, 1, "the reviews file nests arrays or objects too deeply to read as JSON")
