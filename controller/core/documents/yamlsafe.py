"""Strict, located YAML loading (pure: text in, values and positions out).

Only a small, predictable subset of YAML is accepted:

* no anchors, aliases, merge keys (`<<`) or explicit tags other than `!!str`: they are errors, raised
  at the first occurrence, so an alias bomb costs one event, not an expansion;
* duplicate keys are errors naming the first occurrence;
* plain (unquoted) scalars are resolved by YAML 1.2's core schema, not YAML 1.1: `no`, `yes`, `on`,
  `off` stay strings, `2025-01-01` stays the string "2025-01-01" (never a date), `1:20` and `1_000`
  stay strings; only `true`/`false`, `null`/`~`/empty, decimal integers and decimal floats convert;
* integers with a leading zero (`010`: octal 8 in YAML 1.1, 10 in YAML 1.2) are ambiguous and refused;
* what JSON (the audit record, Airflow's conf) cannot carry is refused where it is written: integers beyond
  ±(2^53 - 1), numbers that overflow to infinity, `.inf`/`.nan` (YAML 1.2's infinity and NaN), and strings with
  a lone surrogate or a NUL (double-quoted escapes such as `"\\ud800"`, `"\\0"`);
* collections nest at most `MAX_DEPTH` deep (every reader of the values recurses once per level);
* one document per file, and the top level must be a mapping (checked by the schema).

Every value remembers where it came from: `Document.value_marks` maps a JSON path (a tuple of keys and
indexes) to the (line, column) of the value, `key_marks` to the position of the key naming it.

Two readers, one behaviour: when PyYAML has libyaml (`yaml.__with_libyaml__`), libyaml's C parser reads
the file and `_FastLoader` composes its events straight into values and marks (about ten times faster
than PyYAML's pure-Python reader, scanner and parser). It accepts only what it can prove ordinary; at the
first anchor, alias, tag, merge key, duplicate key, ambiguous integer, unusual character or syntax error
it gives up and the reference loader (pure Python, below) reads the file again, so every refusal keeps
its exact message and position. Without libyaml the reference loader reads every file.
"""

from __future__ import annotations

import re
import sys
from typing import Any

import yaml

from controller.core.documents.diagnostics import Diagnostic, Location, PathPart
from controller.core.documents.scalars import UNSTORABLE, YamlProblem, plain, problem, storable

MAX_BYTES = 1024 * 1024
MAX_DEPTH = 64
_PLAIN = "tag:backfillctl:plain"
_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"
_ALLOWED_TAGS = {_PLAIN, _STR, _MAP, _SEQ}

# the fast path leaves files with these to the reference loader, where libyaml reads differently from PyYAML:
# tabs (libyaml lets a plain scalar run on past one), a byte-order mark inside the text, directives, and a
# block scalar header followed by a comment without a space (`|#`: PyYAML refuses it, libyaml reads on); and
# `?` where a flow collection may be (PyYAML ends a plain scalar there, libyaml does not)
_UNUSUAL = re.compile(r"[\t\ufeff]|^%|[|>][-+0-9]*#", re.MULTILINE)

_CParser: Any = None
if getattr(yaml, "__with_libyaml__", False):  # pragma: no branch - the wheels ship libyaml
    from yaml._yaml import CParser as _CParser


Marks = dict[tuple[PathPart, ...], tuple[int, int]]


class Document:
    """A loaded YAML document: plain Python values plus where each one was written.

    A document read by the fast path keeps its text instead of its marks and works them out again only when
    a position is asked for (an error or a warning): a tree of 10,000 valid specs then holds 10,000 small
    texts, not 400,000 positions.
    """

    __slots__ = ("_key_marks", "_text", "_value_marks", "data", "source")

    def __init__(
        self, source: str, data: Any, value_marks: Marks | None = None, key_marks: Marks | None = None
    ) -> None:
        self.source, self.data = source, data
        self._text: str | None = None
        self._value_marks = {} if value_marks is None else value_marks
        self._key_marks = {} if key_marks is None else key_marks

    @classmethod
    def _from_text(cls, source: str, data: Any, text: str) -> Document:
        doc = cls(source, data)
        doc._value_marks = doc._key_marks = None  # type: ignore[assignment]
        doc._text = text
        return doc

    @property
    def value_marks(self) -> Marks:
        if self._text is not None:
            self._materialise()
        return self._value_marks

    @property
    def key_marks(self) -> Marks:
        if self._text is not None:
            self._materialise()
        return self._key_marks

    def _materialise(self) -> None:
        loader = _FastLoader(self._text or "", marks=True)
        loader.document()
        self._value_marks, self._key_marks, self._text = loader.value_marks, loader.key_marks, None

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Document):
            return NotImplemented
        mine = (self.source, self.data, self.value_marks, self.key_marks)
        return mine == (other.source, other.data, other.value_marks, other.key_marks)

    __hash__ = None  # type: ignore[assignment]  # mutable marks, like the dataclass it replaces

    def __repr__(self) -> str:
        return (
            f"Document(source={self.source!r}, data={self.data!r}, value_marks={self.value_marks!r}, "
            f"key_marks={self.key_marks!r})"
        )

    def locate(self, path: tuple[PathPart, ...], *, at_key: bool = False) -> Location:
        """The closest known position for `path` (the value's, or its key's when `at_key`)."""
        marks = self.key_marks if at_key else self.value_marks
        probe = path
        while probe not in marks and probe:
            probe = probe[:-1]
        line, column = marks.get(probe, self.value_marks.get((), (1, 1)))
        return Location(self.source, line, column, path)


class _Resolver(yaml.resolver.BaseResolver):
    """Marks plain scalars for our own resolution and leaves quoted ones as strings."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> str:
        if kind is yaml.ScalarNode:
            return _PLAIN if implicit[0] else _STR
        return _SEQ if kind is yaml.SequenceNode else _MAP


class _Loader(yaml.reader.Reader, yaml.scanner.Scanner, yaml.parser.Parser, yaml.composer.Composer, _Resolver):
    """Reader → scanner → parser → composer, refusing anchors and aliases as soon as they appear."""

    def __init__(self, text: str) -> None:
        yaml.reader.Reader.__init__(self, text)
        yaml.scanner.Scanner.__init__(self)
        yaml.parser.Parser.__init__(self)
        yaml.composer.Composer.__init__(self)
        _Resolver.__init__(self)
        self._path: list[PathPart] = []  # where the node being composed is; its length is the nesting depth

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            raise problem("aliases (*name) are not allowed", event.start_mark, "write the value out in full")
        if getattr(event, "anchor", None) is not None:
            raise problem("anchors (&name) are not allowed", event.start_mark, "write the value out in full")
        if parent is not None:
            key = index.value if isinstance(index, yaml.ScalarNode) else "?"  # "?": a key, or a key not plain
            self._path.append(index if isinstance(index, int) else key)
        if len(self._path) >= MAX_DEPTH and isinstance(event, yaml.CollectionStartEvent):
            raise _too_deep(event.start_mark, tuple(self._path))
        node = super().compose_node(parent, index)
        if parent is not None:
            self._path.pop()
        return node


class _TooDeep(YamlProblem):
    """Nesting past MAX_DEPTH. The fast path says it itself, at the mark and path the reference loader would give:
    every event before it was ordinary, and PyYAML's scanner is quadratic in flow nesting (0.5 s for 1,000 `[`)."""


def _too_deep(mark: Any, path: tuple[PathPart, ...]) -> _TooDeep:
    message = f"lists and mappings nest more than {MAX_DEPTH} levels deep"
    hint = f"a spec needs a few levels; flatten the value (the limit, {MAX_DEPTH}, keeps every reader of it bounded)"
    return _TooDeep(message, mark.line + 1, mark.column + 1, hint, path)


def load_document(source: str, raw: bytes) -> tuple[Document | None, list[Diagnostic]]:
    """Decode and load one YAML document; never raises for bad input, returns located diagnostics."""
    if len(raw) > MAX_BYTES:
        return None, [
            _file_error(
                source,
                f"file is {len(raw)} bytes; the limit is {MAX_BYTES} (1 MiB)",
                "a spec is a few hundred bytes; is this the right file?",
            )
        ]
    text, problem = _decode(raw)
    if problem is not None:
        return None, [_located(source, problem)]
    try:
        return _compose_fast(source, text) or _compose(source, text), []
    except YamlProblem as exc:
        return None, [_located(source, exc)]
    except yaml.MarkedYAMLError as exc:
        return None, [_located(source, _from_yaml_error(exc))]
    except yaml.YAMLError as exc:  # reader errors carry no mark of the MarkedYAMLError kind
        return None, [_file_error(source, f"YAML error: {exc}", None)]


def _decode(raw: bytes) -> tuple[str, YamlProblem | None]:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        column = exc.start - (raw.rfind(b"\n", 0, exc.start) + 1) + 1
        message = f"file is not valid UTF-8: byte 0x{raw[exc.start]:02x} cannot be decoded"
        return "", YamlProblem(message, line, column, "save the file as UTF-8")
    return text.removeprefix("\ufeff"), None


def _compose(source: str, text: str) -> Document:
    if not text.strip():
        raise YamlProblem("file is empty", 1, 1, "a spec is a YAML mapping; run `backfillctl new` for a template")
    loader = _Loader(text)
    try:
        node = loader.get_single_node()
    finally:
        loader.dispose()
    if node is None:
        raise YamlProblem("file holds no YAML document", 1, 1, "a spec is a YAML mapping of fields")
    doc = Document(source, None)
    data = _convert(node, (), doc)
    return Document(source, data, doc.value_marks, doc.key_marks)


class _Defer(Exception):
    """The fast path met something it leaves to the reference loader."""


def _compose_fast(source: str, text: str) -> Document | None:
    """The document via libyaml, or None: no libyaml, or anything to refuse or explain (see the module doc)."""
    if _CParser is None or _UNUSUAL.search(text) or _question_after_flow(text):
        return None
    try:
        data = _FastLoader(text, marks=False).document()
    except _TooDeep:
        raise
    except (_Defer, YamlProblem, yaml.YAMLError):
        return None
    return Document._from_text(source, data, text)


def _question_after_flow(text: str) -> bool:
    """A `?` after the first `[` or `{` (linear: no backtracking on hostile input)."""
    starts = [i for i in (text.find("["), text.find("{")) if i >= 0]
    return bool(starts) and text.find("?", min(starts)) >= 0


class _FastLoader:
    """Composes libyaml's events into plain values and marks, like `_Loader` + `_convert` for valid input.

    Events are taken only through `_next` (the tests count work there); each node's event is peeked first, so
    an anchor or alias stops the loader before it is taken, as in `_Loader.compose_node`.
    """

    __slots__ = ("_marks", "_parser", "key_marks", "value_marks")

    def __init__(self, text: str, *, marks: bool) -> None:
        self._parser, self._marks = _CParser(text), marks
        self.value_marks: Marks = {}
        self.key_marks: Marks = {}

    def _next(self) -> Any:
        return self._parser.get_event()

    def document(self) -> Any:
        self._next()  # StreamStartEvent
        if not isinstance(self._next(), yaml.DocumentStartEvent):
            raise _Defer  # no document at all: the reference loader says so
        data = self._node(())
        self._next()  # DocumentEndEvent
        if not isinstance(self._next(), yaml.StreamEndEvent):
            raise _Defer  # a second document
        return data

    def _node(self, path: tuple[PathPart, ...]) -> Any:
        event = self._parser.peek_event()
        if type(event) is yaml.AliasEvent or event.anchor is not None:
            raise _Defer
        self._next()
        mark = event.start_mark
        if self._marks:
            self.value_marks[path] = (mark.line + 1, mark.column + 1)
        kind, tag = type(event), event.tag
        if kind is yaml.ScalarEvent:
            if tag is None or tag == "!":
                tag = _PLAIN if event.implicit[0] else _STR
            if tag not in _ALLOWED_TAGS or not (event.value or event.style):
                raise _Defer  # libyaml places an empty plain value elsewhere than PyYAML
            if event.style == '"' and UNSTORABLE.search(event.value):
                raise _Defer  # only a double-quoted escape writes one; the reference loader says where
            return event.value if tag == _STR else plain(event.value, mark, path)
        if tag is not None and tag != "!" and tag not in _ALLOWED_TAGS:
            raise _Defer
        if len(path) >= MAX_DEPTH:
            raise _too_deep(mark, path)
        if kind is yaml.SequenceStartEvent:
            items: list[Any] = []
            while type(self._parser.peek_event()) is not yaml.SequenceEndEvent:
                items.append(self._node((*path, len(items))))
            self._next()
            return items
        return self._mapping(path)

    def _mapping(self, path: tuple[PathPart, ...]) -> dict[str, Any]:
        result: dict[str, Any] = {}
        while True:
            event = self._parser.peek_event()
            kind = type(event)
            if kind is yaml.MappingEndEvent:
                self._next()
                return result
            if kind is not yaml.ScalarEvent or event.anchor is not None:
                raise _Defer  # an alias, an anchor or a non-scalar key
            self._next()
            key, tag = sys.intern(event.value), event.tag  # field names repeat in every spec: share them
            if tag is None or tag == "!":
                tag = _PLAIN if event.implicit[0] else _STR
            if (tag == _PLAIN and key == "<<") or tag not in (_PLAIN, _STR) or key in result or not key:
                raise _Defer
            if event.style == '"' and UNSTORABLE.search(key):
                raise _Defer
            child = (*path, key)
            if self._marks:
                mark = event.start_mark
                self.key_marks[child] = (mark.line + 1, mark.column + 1)
            result[key] = self._node(child)


def _convert(node: Any, path: tuple[PathPart, ...], doc: Document) -> Any:
    doc.value_marks[path] = (node.start_mark.line + 1, node.start_mark.column + 1)
    if node.tag not in _ALLOWED_TAGS:
        tag = node.tag.replace("tag:yaml.org,2002:", "!!")
        raise problem(
            f"tag {tag} is not allowed", node.start_mark, "remove the tag; only plain YAML values are accepted"
        )
    if isinstance(node, yaml.MappingNode):
        return _convert_mapping(node, path, doc)
    if isinstance(node, yaml.SequenceNode):
        return [_convert(item, (*path, i), doc) for i, item in enumerate(node.value)]
    return _scalar(node, path)


def _convert_mapping(node: Any, path: tuple[PathPart, ...], doc: Document) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key_node, value_node in node.value:
        key = _key(key_node)
        child = (*path, key)
        storable(key, key_node.start_mark, child, "key")
        if key in result:
            first = doc.key_marks[child][0]
            raise problem(
                f"duplicate key {key!r} (first at line {first})",
                key_node.start_mark,
                "each key may appear once; delete one of them",
            )
        doc.key_marks[child] = (key_node.start_mark.line + 1, key_node.start_mark.column + 1)
        result[key] = _convert(value_node, child, doc)
    return result


def _key(node: Any) -> str:
    if node.tag == _PLAIN and node.value == "<<":
        raise problem("merge keys (<<) are not allowed", node.start_mark, "write every key out in full")
    if not isinstance(node, yaml.ScalarNode) or node.tag not in (_PLAIN, _STR):
        raise problem("mapping keys must be plain strings", node.start_mark, "field names are plain words like dag_id")
    return str(node.value)


def _scalar(node: Any, path: tuple[PathPart, ...]) -> Any:
    value: str = node.value
    if node.tag == _STR:
        return storable(value, node.start_mark, path, "string")
    resolved = plain(value, node.start_mark, path)
    # `! "…"` makes a quoted scalar plain (PyYAML): its escapes may still write what no store can hold
    return storable(resolved, node.start_mark, path, "string") if isinstance(resolved, str) else resolved


def _from_yaml_error(exc: yaml.MarkedYAMLError) -> YamlProblem:
    mark = exc.problem_mark or exc.context_mark
    text = "YAML syntax error: " + " ".join(p for p in (exc.context, exc.problem) if p)
    hint = None
    if "expected a single document" in text:
        text, hint = "file holds more than one YAML document", "put one spec per file (remove the `---`)"
    elif "found character '\\t'" in text:
        hint = "indent with spaces, not tabs"
    elif "quoted scalar" in text and exc.context_mark is not None:
        mark, hint = exc.context_mark, "close the quote on the same line"
    line, column = (mark.line + 1, mark.column + 1) if mark is not None else (1, 1)
    return YamlProblem(text, line, column, hint)


def _located(source: str, problem: YamlProblem) -> Diagnostic:
    return Diagnostic(Location(source, problem.line, problem.column, problem.path), problem.message, problem.hint)


def _file_error(source: str, message: str, hint: str | None) -> Diagnostic:
    return Diagnostic(Location(source, 1, 1, ()), message, hint)
