"""The strict loader: values, positions, refusals, and never a crash (Hypothesis)."""

from __future__ import annotations

import json

import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from controller.core.documents import yamlsafe
from controller.core.documents.diagnostics import Diagnostic
from controller.core.documents.yamlsafe import load_document


def load(text: str) -> tuple[object, list[Diagnostic]]:
    doc, problems = load_document("x.yaml", text.encode())
    return (doc.data if doc else None), problems


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("a: 2025-01-01", {"a": "2025-01-01"}),
        ("a: no", {"a": "no"}),
        ("a: yes", {"a": "yes"}),
        ("a: off", {"a": "off"}),
        ("a: true", {"a": True}),
        ("a: False", {"a": False}),
        ("a: 10", {"a": 10}),
        ("a: -3", {"a": -3}),
        ("a: 0", {"a": 0}),
        ("a: 2.5", {"a": 2.5}),
        ("a: 1:20", {"a": "1:20"}),
        ("a: 1_000", {"a": "1_000"}),
        ("a: 0x1f", {"a": "0x1f"}),
        ("a: ~", {"a": None}),
        ("a:", {"a": None}),
        ("a: '010'", {"a": "010"}),
        ('a: "true"', {"a": "true"}),
        ("a: !!str 5", {"a": "5"}),
        ("a: [1, b]", {"a": [1, "b"]}),
        ("a: '.inf'", {"a": ".inf"}),
        ("a: 9007199254740991", {"a": 2**53 - 1}),
        ("a: -9007199254740991", {"a": -(2**53 - 1)}),
        ("a: 1.7976931348623157e308", {"a": 1.7976931348623157e308}),
        ('a: "\\U0001F600 \\u00e9"', {"a": "\U0001f600 \u00e9"}),
    ],
)
def test_plain_scalars_follow_yaml_1_2_core(text: str, value: object) -> None:
    assert load(text) == (value, [])


def test_positions_of_values_and_keys() -> None:
    doc, _ = load_document("s.yaml", b"a: 1\nlist:\n  - x\n  - y\nmap: {k: v}\n")
    assert doc is not None
    assert doc.value_marks[("list", 1)] == (4, 5)
    assert doc.key_marks[("map",)] == (5, 1)
    assert doc.value_marks[("map", "k")] == (5, 10)
    assert str(doc.locate(("map", "missing", 3))) == "s.yaml:5:6"


@pytest.mark.parametrize(
    ("text", "message", "line", "column"),
    [
        ("a: &x 1\nb: 2", "anchors (&name) are not allowed", 1, 4),
        ("a: 1\nb: *x", "aliases (*name) are not allowed", 2, 4),
        ("a: 1\na: 2", "duplicate key 'a' (first at line 1)", 2, 1),
        ("<<: {a: 1}", "merge keys (<<) are not allowed", 1, 1),
        ("a: !!python/name:os.system x", "tag !!python/name:os.system is not allowed", 1, 4),
        ("a: !custom x", "tag '!custom' is not allowed".replace("'", ""), 1, 4),
        ("a: 007", "'007' is ambiguous: YAML 1.1 reads it as octal, YAML 1.2 as decimal", 1, 4),
        ("a: -010", "'-010' is ambiguous: YAML 1.1 reads it as octal, YAML 1.2 as decimal", 1, 4),
        ("a: +010", "'+010' is ambiguous: YAML 1.1 reads it as octal, YAML 1.2 as decimal", 1, 4),
        ("a: [1, 00]", "'00' is ambiguous: YAML 1.1 reads it as octal, YAML 1.2 as decimal", 1, 8),
        ("conf:\n  a: 1\n  b: 2\n  a: 3", "duplicate key 'a' (first at line 2)", 4, 3),
        ("conf:\n  deep: {x: 1, x: 2}", "duplicate key 'x' (first at line 2)", 2, 16),
        ("list:\n  - {k: 1}\n  - k: 1\n    k: 2", "duplicate key 'k' (first at line 3)", 4, 5),
        ("a: 1\nb: {a: 1}\nc: [{b: 1}]\nb: 2", "duplicate key 'b' (first at line 2)", 4, 1),
        ("? [a]\n: 1", "mapping keys must be plain strings", 1, 3),
    ],
)
def test_refusals_are_located(text: str, message: str, line: int, column: int) -> None:
    data, problems = load(text)
    assert data is None
    assert [(p.message, p.location.line, p.location.column) for p in problems] == [(message, line, column)]


def test_alias_bomb_is_refused_at_the_first_anchor_without_expanding(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cost is counted, not timed: the loader stops at the first anchor, after a handful of events."""
    layers = ["a: &a [" + ",".join(['"lol"'] * 10) + "]"]
    layers += [f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 10) + "]" for i in range(8)]
    events: list[str] = []
    real_get_event = yaml.parser.Parser.get_event

    def counting(self: yaml.parser.Parser) -> object:
        event = real_get_event(self)  # type: ignore[no-untyped-call]
        events.append(type(event).__name__)
        return event

    monkeypatch.setattr(yaml.parser.Parser, "get_event", counting)
    _, problems = load("\n".join(layers))
    assert [(p.message, p.location.line, p.location.column) for p in problems] == [
        ("anchors (&name) are not allowed", 1, 4)
    ]
    assert events == ["StreamStartEvent", "DocumentStartEvent", "MappingStartEvent", "ScalarEvent"]


@pytest.mark.skipif(yamlsafe._CParser is None, reason="PyYAML without libyaml: the reference loader reads everything")
def test_alias_bomb_stops_the_libyaml_reader_at_the_first_anchor_too(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast reader takes events only through `_FastLoader._next`: it too stops at the first anchor."""
    layers = ["a: &a [" + ",".join(['"lol"'] * 10) + "]"]
    layers += [f"{chr(98 + i)}: &{chr(98 + i)} [" + ",".join([f"*{chr(97 + i)}"] * 10) + "]" for i in range(8)]
    events: list[str] = []
    real_next = yamlsafe._FastLoader._next

    def counting(self: yamlsafe._FastLoader) -> object:
        event = real_next(self)
        events.append(type(event).__name__)
        return event

    monkeypatch.setattr(yamlsafe._FastLoader, "_next", counting)
    assert yamlsafe._compose_fast("x.yaml", "\n".join(layers)) is None  # left to the reference loader
    assert events == ["StreamStartEvent", "DocumentStartEvent", "MappingStartEvent", "ScalarEvent"]


_SPEC_LIKE = (
    'version: 1\nname: a-b\ndag_id: d\nfrom_date: "2025-01-01"\nreprocess_behavior: failed\n'
    "max_active_runs: 3\ndag_run_conf: {full_refresh: true, n: [1, 2.5, x]}\napprovers: [a, 'b']\n"
    "reason: |\n  two\n  lines\nnote: >-\n  folded\n  text\nempty: ''\nu: \"caf\\u00e9 ünïcode €\"\n"
    "list:\n  - k: v\n    j: [1, {x: y}]\n  - ~\n  - -0.5e3\n"
)


@pytest.mark.skipif(yamlsafe._CParser is None, reason="PyYAML without libyaml: the reference loader reads everything")
def test_the_libyaml_reader_gives_the_reference_values_and_positions() -> None:
    fast = yamlsafe._compose_fast("s.yaml", _SPEC_LIKE)
    assert fast is not None
    assert fast == yamlsafe._compose("s.yaml", _SPEC_LIKE)


@pytest.mark.skipif(yamlsafe._CParser is None, reason="PyYAML without libyaml: the reference loader reads everything")
@pytest.mark.parametrize(
    "text",
    [
        "a: " + "[" * 999 + "]" * 999,
        "a:\n  b: [1, {c: " + "{d: " * 70 + "1" + "}" * 71 + "]\n",
        "".join(f"{'  ' * i}k{i}:\n" for i in range(70)) + "  " * 70 + "v: 1\n",
        "- " * 80 + "x\n",
    ],
    ids=["flow lists", "flow mappings in a list", "block mappings", "block lists"],
)
def test_the_libyaml_reader_refuses_deep_nesting_as_the_reference_loader_does(text: str) -> None:
    """The fast path says this refusal itself (PyYAML's scanner takes 0.5 s on 1,000 nested `[`): same words,
    same position, same path."""
    with pytest.raises(yamlsafe.YamlProblem) as fast:
        yamlsafe._compose_fast("f.yaml", text)
    with pytest.raises(yamlsafe.YamlProblem) as reference:
        yamlsafe._compose("f.yaml", text)
    mine, theirs = fast.value, reference.value
    assert (mine.message, mine.line, mine.column, mine.hint, mine.path) == (
        theirs.message,
        theirs.line,
        theirs.column,
        theirs.hint,
        theirs.path,
    )
    assert mine.message == "lists and mappings nest more than 64 levels deep"


_YAMLISH = st.lists(
    st.sampled_from(
        [
            *"ab01:-,[]{}'\"#&*!|>?%@` \n\t\\.+eE_~xyzäé€\u2028\x85\ufeff\r",
            *("\n  ", "- ", ": ", "---", "...", "!!str ", "!!int ", "! ", "&a ", "*a", "<<: ", "true", "null", "010"),
            *("-010", "0x1", "1.5e3", "? ", '"\\u00e4"', "key: value\n", "a:\n  - 1\n  - 2\n", "'it''s'", "|\n  x\n"),
            *(">-\n  y\n", "|#", "[a, b]", "{k: v}", "\n- ", "%YAML 1.1\n"),
            *('"\\ud800"', '"\\0"', '"\\udc00": ', ".nan", "-.inf", "1e999", "9007199254740992", "[[[[[[[[[["),
        ]
    ),
    max_size=40,
).map("".join)


@pytest.mark.skipif(yamlsafe._CParser is None, reason="PyYAML without libyaml: the reference loader reads everything")
@settings(max_examples=1500, deadline=None)
@given(_YAMLISH)
@example("[" * 72)  # found by Hypothesis in CI: the fast reader refuses the 65th level itself
def test_the_libyaml_reader_accepts_only_what_the_reference_loader_reads_alike(text: str) -> None:
    """Differential: whatever the fast reader accepts, the reference loader reads to the same values and marks;
    everything else (refusals and their messages) comes from the reference loader; a nesting too deep the fast
    reader refuses itself, as the reference loader does (same message, mark and path)."""
    deep: yamlsafe.YamlProblem | None = None
    try:
        fast = yamlsafe._compose_fast("f.yaml", text)
    except yamlsafe._TooDeep as exc:
        fast, deep = None, exc
    if deep is not None:
        with pytest.raises(yamlsafe.YamlProblem) as refused:
            yamlsafe._compose("f.yaml", text)
        said = refused.value
        assert (said.message, said.line, said.column, said.path) == (deep.message, deep.line, deep.column, deep.path)
        return
    if fast is None:
        return
    try:
        reference = yamlsafe._compose("f.yaml", text)
    except (yamlsafe.YamlProblem, yaml.YAMLError) as exc:
        pytest.fail(f"the fast reader accepted {text!r}, the reference loader refuses it: {exc}")
    assert fast == reference


@settings(max_examples=1500, deadline=None)
@given(_YAMLISH)
def test_whatever_loads_can_be_written_as_strict_json_in_utf_8(text: str) -> None:
    """The audit chain hashes UTF-8 JSON and Airflow's conf is JSON: no NaN, no infinity, no lone surrogate."""
    doc, _ = load_document("f.yaml", text.encode())
    if doc is not None:
        json.dumps(doc.data, allow_nan=False, ensure_ascii=False).encode()


def test_oversized_input_is_refused_without_parsing() -> None:
    doc, problems = load_document("big.yaml", b"a: [" + b"1," * 600_000 + b"1]")
    assert doc is None
    assert problems[0].message == "file is 1200006 bytes; the limit is 1048576 (1 MiB)"


def test_bom_is_accepted() -> None:
    assert load("\ufeffa: 1") == ({"a": 1}, [])


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_any_text_gives_a_value_or_located_errors(text: str) -> None:
    doc, problems = load_document("fuzz.yaml", text.encode("utf-8", "surrogatepass"))
    assert (doc is None) == bool(problems)
    for problem in problems:
        assert problem.location.line >= 1
        assert problem.location.column >= 1
        assert problem.message
        assert problem.text().startswith("fuzz.yaml:")


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_give_a_value_or_located_errors(raw: bytes) -> None:
    doc, problems = load_document("fuzz.yaml", raw)
    assert (doc is None) == bool(problems)
