"""Tags on collections: refused unless they are YAML's own map/seq (also on libyaml's fast path)."""

from __future__ import annotations

import pytest

from controller.core.documents.yamlsafe import load_document


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: !!python/object:os.system {x: 1}\n", "tag !!python/object:os.system is not allowed"),
        ("a: !!set [1]\n", "tag !!set is not allowed"),
        ("a: !custom [1]\n", "tag !custom is not allowed"),
        ("a: !!omap [x: 1]\n", "tag !!omap is not allowed"),
    ],
)
def test_a_foreign_tag_on_a_collection_is_refused_where_it_stands(text: str, message: str) -> None:
    document, problems = load_document("f.yaml", text.encode())
    assert document is None
    assert [(p.message, p.location.line, p.location.column) for p in problems] == [(message, 1, 4)]


@pytest.mark.parametrize("text", ["a: !!map {x: 1}\n", "a: ! {x: 1}\n", "a: !!seq [1]\n"])
def test_yamls_own_collection_tags_are_plain_collections(text: str) -> None:
    document, problems = load_document("f.yaml", text.encode())
    assert problems == []
    assert document is not None
    assert document.data == ({"a": {"x": 1}} if "{" in text else {"a": [1]})
