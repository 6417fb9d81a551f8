"""The strict loader's refusals, each with its exact message, position and hint (fast, no CLI)."""

from __future__ import annotations

import pytest

from controller.core.documents.diagnostics import Diagnostic, Location
from controller.core.documents.scalars import yaml11_reading
from controller.core.documents.yamlsafe import MAX_BYTES, MAX_DEPTH, Document, load_document


def refused(raw: bytes) -> tuple[str, int, int, str | None]:
    doc, problems = load_document("f.yaml", raw)
    assert doc is None
    (problem,) = problems
    assert problem.location.source == "f.yaml"
    assert problem.location.path == ()
    return problem.message, problem.location.line, problem.location.column, problem.hint


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b"a: 1\nb: \xe4x\n", ("file is not valid UTF-8: byte 0xe4 cannot be decoded", 2, 4, "save the file as UTF-8")),
        (b"\xff", ("file is not valid UTF-8: byte 0xff cannot be decoded", 1, 1, "save the file as UTF-8")),
        (b"\n\xff", ("file is not valid UTF-8: byte 0xff cannot be decoded", 2, 1, "save the file as UTF-8")),
        (
            b"a: 1\n\nccc: d\xc3",
            ("file is not valid UTF-8: byte 0xc3 cannot be decoded", 3, 7, "save the file as UTF-8"),
        ),
        (b"", ("file is empty", 1, 1, "a spec is a YAML mapping; run `backfillctl new` for a template")),
        (b" \n\t\n", ("file is empty", 1, 1, "a spec is a YAML mapping; run `backfillctl new` for a template")),
        (b"# only a comment\n", ("file holds no YAML document", 1, 1, "a spec is a YAML mapping of fields")),
        (
            b"a: 1\n---\nb: 2\n",
            ("file holds more than one YAML document", 2, 1, "put one spec per file (remove the `---`)"),
        ),
        (
            b"a:\n\tb: 1\n",
            (
                "YAML syntax error: while scanning for the next token found character '\\t' "
                "that cannot start any token",
                2,
                1,
                "indent with spaces, not tabs",
            ),
        ),
        (
            b'a: 1\nb: "open\n\nc: 2\n',
            (
                "YAML syntax error: while scanning a quoted scalar found unexpected end of stream",
                2,
                4,
                "close the quote on the same line",
            ),
        ),
        (
            b"a: [1, 2\nb: 3\n",
            (
                "YAML syntax error: while parsing a flow sequence expected ',' or ']', but got ':'",
                2,
                2,
                None,
            ),
        ),
        (
            b"a: 1\n  b: 2\n",
            ("YAML syntax error: mapping values are not allowed here", 2, 4, None),
        ),
        (
            b"a: \x07\n",
            (
                "YAML error: unacceptable character #x0007: special characters are not allowed\n"
                '  in "<unicode string>", position 3',
                1,
                1,
                None,
            ),
        ),
    ],
)
def test_refusals(raw: bytes, expected: tuple[str, int, int, str | None]) -> None:
    assert refused(raw) == expected


@pytest.mark.parametrize(
    ("text", "hint"),
    [
        ("a: &x 1", "write the value out in full"),
        ("a: [1]\nb: *x", "write the value out in full"),
        ("a: 1\na: 2", "each key may appear once; delete one of them"),
        ("<<: {a: 1}", "write every key out in full"),
        ("a: !!int 5", "remove the tag; only plain YAML values are accepted"),
        ("? [a]\n: 1", "field names are plain words like dag_id"),
        ("!!int 5: x", "field names are plain words like dag_id"),
        ("a: 010", "write it without leading zeros (10) or quote it"),
        ("a: -007", "write it without leading zeros (-7) or quote it"),
    ],
)
def test_refusal_hints(text: str, hint: str) -> None:
    _, problems = load_document("f.yaml", text.encode())
    assert [p.hint for p in problems] == [hint]


def test_tags_are_named_in_short_form() -> None:
    _, problems = load_document("f.yaml", b"a: !!int 5\nb: !!float 1\n")
    assert [p.message for p in problems] == ["tag !!int is not allowed"]
    _, quoted = load_document("f.yaml", b"a: !<tag:example.com,2000:x> 5\n")
    assert [p.message for p in quoted] == ["tag tag:example.com,2000:x is not allowed"]


def test_oversized_input_is_refused_with_its_size() -> None:
    doc, problems = load_document("big.yaml", b"a" * (MAX_BYTES + 1))
    assert doc is None
    assert problems == [
        Diagnostic(
            Location("big.yaml", 1, 1),
            f"file is {MAX_BYTES + 1} bytes; the limit is {MAX_BYTES} (1 MiB)",
            "a spec is a few hundred bytes; is this the right file?",
        )
    ]
    assert MAX_BYTES == 1048576


def test_exactly_one_mebibyte_is_still_read() -> None:
    raw = b"a: 1\n" + b"#" * (MAX_BYTES - 5)
    assert len(raw) == MAX_BYTES
    doc, problems = load_document("f.yaml", raw)
    assert (problems, doc.data if doc else None) == ([], {"a": 1})


def test_marks_of_keys_and_values_in_nested_structures() -> None:
    text = "top: 1\nconf:\n  inner: [a, {k: v}]\n  other: x\n"
    doc, problems = load_document("f.yaml", text.encode())
    assert problems == []
    assert doc is not None
    assert doc.data == {"top": 1, "conf": {"inner": ["a", {"k": "v"}], "other": "x"}}
    assert doc.value_marks == {
        (): (1, 1),
        ("top",): (1, 6),
        ("conf",): (3, 3),
        ("conf", "inner"): (3, 10),
        ("conf", "inner", 0): (3, 11),
        ("conf", "inner", 1): (3, 14),
        ("conf", "inner", 1, "k"): (3, 18),
        ("conf", "other"): (4, 10),
    }
    assert doc.key_marks == {
        ("top",): (1, 1),
        ("conf",): (2, 1),
        ("conf", "inner"): (3, 3),
        ("conf", "inner", 1, "k"): (3, 15),
        ("conf", "other"): (4, 3),
    }


def test_locate_falls_back_to_the_closest_known_parent() -> None:
    doc, _ = load_document("f.yaml", b"a:\n  b: 1\n")
    assert doc is not None
    assert doc.locate(("a", "b")) == Location("f.yaml", 2, 6, ("a", "b"))
    assert doc.locate(("a", "b"), at_key=True) == Location("f.yaml", 2, 3, ("a", "b"))
    assert doc.locate(("a", "zz", 3)) == Location("f.yaml", 2, 3, ("a", "zz", 3))
    assert doc.locate(("a", "b", "zz")) == Location("f.yaml", 2, 6, ("a", "b", "zz"))
    assert doc.locate(("nope",), at_key=True) == Location("f.yaml", 1, 1, ("nope",))
    assert doc.locate(()) == Location("f.yaml", 1, 1, ())
    assert Document("g.yaml", None).locate(("x",)) == Location("g.yaml", 1, 1, ("x",))


def test_quoted_keys_are_strings_and_quoted_values_stay_strings() -> None:
    doc, problems = load_document("f.yaml", b"'a': '1'\n\"b\": null\nc: 'null'\nd: 1.5e3\ne: .5\nf: 1.\ng: '-.inf'\n")
    assert problems == []
    assert doc is not None
    assert doc.data == {"a": "1", "b": None, "c": "null", "d": 1500.0, "e": 0.5, "f": 1.0, "g": "-.inf"}


@pytest.mark.parametrize(
    ("value", "reading"),
    [
        ("no", "YAML 1.1 tools read `no` as the boolean false; this loader keeps the string"),
        ("Yes", "YAML 1.1 tools read `Yes` as the boolean true; this loader keeps the string"),
        ("ON", "YAML 1.1 tools read `ON` as the boolean true; this loader keeps the string"),
        ("y", "YAML 1.1 tools read `y` as the boolean true; this loader keeps the string"),
        ("off", "YAML 1.1 tools read `off` as the boolean false; this loader keeps the string"),
        ("N", "YAML 1.1 tools read `N` as the boolean false; this loader keeps the string"),
        ("nope", None),
        (True, None),
        (0, None),
    ],
)
def test_yaml11_reading(value: object, reading: str | None) -> None:
    assert yaml11_reading(value) == reading


_OUT_OF_RANGE = (
    "JSON readers that use doubles (JavaScript, the Airflow UI) round larger integers; quote it to pass it as a string"
)
_SURROGATE = "which is not Unicode text (it cannot be written as UTF-8)"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'reason: "ok \\ud800"',
            (
                "the string holds a lone surrogate U+D800 at character 4, " + _SURROGATE,
                ("reason",),
                1,
                9,
                "write the character itself instead of \\u escapes of UTF-16 surrogates",
            ),
        ),
        (
            'conf: {k: ["\\ud83d\\ude00"]}',
            (
                "the string holds a lone surrogate U+D83D at character 1, " + _SURROGATE,
                ("conf", "k", 0),
                1,
                12,
                "write \\U0001F600 instead of \\u escapes of UTF-16 surrogates",
            ),
        ),
        (
            'conf:\n  "k\\udfff": 1',
            (
                "the key holds a lone surrogate U+DFFF at character 2, " + _SURROGATE,
                ("conf", "k\udfff"),
                2,
                3,
                "write the character itself instead of \\u escapes of UTF-16 surrogates",
            ),
        ),
        (  # the non-specific tag makes a quoted scalar plain: its escapes are still checked
            'reason: ! "ok \\ud800"',
            (
                "the string holds a lone surrogate U+D800 at character 4, " + _SURROGATE,
                ("reason",),
                1,
                9,
                "write the character itself instead of \\u escapes of UTF-16 surrogates",
            ),
        ),
        (
            'ticket: ! "CHG-1\\0"',
            (
                "the string holds a NUL character (\\0) at character 6, which PostgreSQL cannot store",
                ("ticket",),
                1,
                9,
                "remove the \\0 escape",
            ),
        ),
        (
            'ticket: "CHG-1\\0"',
            (
                "the string holds a NUL character (\\0) at character 6, which PostgreSQL cannot store",
                ("ticket",),
                1,
                9,
                "remove the \\0 escape",
            ),
        ),
        (
            "conf: {x: 1e999}",
            (
                "number 1e999 is out of range: it overflows to infinity, which JSON cannot carry",
                ("conf", "x"),
                1,
                11,
                "write a number below 1.8e308 in magnitude, or quote it to pass it as a string",
            ),
        ),
        (
            "conf: [-1e999]",
            (
                "number -1e999 is out of range: it overflows to infinity, which JSON cannot carry",
                ("conf", 0),
                1,
                8,
                "write a number below 1.8e308 in magnitude, or quote it to pass it as a string",
            ),
        ),
        (
            "conf: {x: .nan}",
            (
                ".nan is NaN (not a number) in YAML 1.2, which JSON cannot carry",
                ("conf", "x"),
                1,
                11,
                "quote it to pass it as a string; or write null",
            ),
        ),
        (
            "conf: {x: -.INF}",
            (
                "-.INF is infinity in YAML 1.2, which JSON cannot carry",
                ("conf", "x"),
                1,
                11,
                "quote it to pass it as a string; or write null",
            ),
        ),
        (
            "conf: {id: 9007199254740992}",
            (
                "integer 9007199254740992 is out of range: integers must lie within -9007199254740991 and "
                "9007199254740991 (2^53 - 1)",
                ("conf", "id"),
                1,
                12,
                _OUT_OF_RANGE,
            ),
        ),
        (
            "n: -" + "9" * 5000,
            (
                "integer -999999999...9999 (5001 characters) is out of range: integers must lie within "
                "-9007199254740991 and 9007199254740991 (2^53 - 1)",
                ("n",),
                1,
                4,
                _OUT_OF_RANGE,
            ),
        ),
    ],
    ids=[
        *("surrogate", "surrogate-pair", "surrogate-key", "tagged-surrogate", "tagged-nul", "nul"),
        *("inf", "minus-inf", "nan", "yaml-inf", "2^53", "5000"),
    ],
)
def test_what_json_cannot_carry_is_refused_where_it_is_written(
    text: str, expected: tuple[str, tuple[object, ...], int, int, str]
) -> None:
    """Every string and number of a spec reaches JSON (the audit chain, Airflow's conf) and PostgreSQL."""
    doc, problems = load_document("f.yaml", text.encode())
    assert doc is None
    assert [(p.message, p.location.path, p.location.line, p.location.column, p.hint) for p in problems] == [expected]


def _nested(levels: int) -> str:
    return "conf: " + "[" * levels + "]" * levels


def test_nesting_is_bounded_and_the_deepest_allowed_level_loads() -> None:
    doc, problems = load_document("f.yaml", _nested(MAX_DEPTH - 1).encode())  # the top mapping is the first level
    assert problems == []
    assert doc is not None
    doc, problems = load_document("f.yaml", _nested(1000).encode())
    assert doc is None
    assert [(p.message, p.location.path, p.location.line, p.location.column, p.hint) for p in problems] == [
        (
            "lists and mappings nest more than 64 levels deep",
            ("conf", *[0] * 63),
            1,
            70,
            "a spec needs a few levels; flatten the value (the limit, 64, keeps every reader of it bounded)",
        )
    ]


def test_nesting_in_block_style_is_bounded_too() -> None:
    text = "".join(f"{'  ' * i}k{i}:\n" for i in range(MAX_DEPTH)) + "  " * MAX_DEPTH + "v: 1\n"
    doc, problems = load_document("f.yaml", text.encode())
    assert doc is None
    assert [(p.message, len(p.location.path), p.location.line) for p in problems] == [
        ("lists and mappings nest more than 64 levels deep", 64, 65)
    ]


@pytest.mark.parametrize(
    ("text", "path"),
    [
        ("? [a]\n: " + "[" * 70 + "]" * 70, ("?", *[0] * 63)),
        ("? " + "[" * 70 + "]" * 70 + "\n: 1", ("?", *[0] * 63)),
    ],
    ids=["under a complex key", "in a complex key"],
)
def test_nesting_under_or_in_a_complex_key_is_located_too(text: str, path: tuple[object, ...]) -> None:
    _, problems = load_document("f.yaml", text.encode())
    assert [(p.text().split(": ")[-1], p.location.path) for p in problems] == [
        ("lists and mappings nest more than 64 levels deep", path)
    ]
