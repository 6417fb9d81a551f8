"""The schema validator inlines local `$ref`s for speed: the same diagnostics as the schema as written."""

from __future__ import annotations

import copy
import random
from pathlib import Path

import pytest
from jsonschema import FormatChecker

from controller.adapters import files
from controller.core.documents import schema as schema_module
from controller.core.documents.schema import SchemaValidator, _inline_local_refs
from controller.core.documents.yamlsafe import Document, load_document

EXAMPLES = sorted((Path(__file__).resolve().parents[2] / "examples").rglob("*.yaml"))
VALUES = [None, 0, -1, 1.5, "", "x", "no", "2025-01-01", "2025-02-30", "2025-01-01T00:00:00", "2025-01-01T00:00:00Z"]
VALUES += [True, [], ["a"], ["a", "a"], ["bad login!"], {}, {"a": 1}, "x" * 300]


def test_references_are_inlined_only_where_safe() -> None:
    schema = {
        "$defs": {"d": {"type": "string"}, "r": {"$ref": "#/$defs/d"}, "t": {"type": "integer"}},
        "properties": {
            "a": {"description": "x", "$ref": "#/$defs/d"},
            "b": {"$ref": "#/$defs/r"},
            "c": {"type": "string", "$ref": "#/$defs/t"},
        },
    }
    inlined = _inline_local_refs(schema)["properties"]
    assert inlined == {
        "a": {"description": "x", "type": "string"},
        "b": {"$ref": "#/$defs/r"},  # a definition with references of its own stays a reference
        "c": {"type": "string", "$ref": "#/$defs/t"},  # a keyword on both sides: kept as written
    }


@pytest.mark.parametrize("name", ["backfill-spec.schema.json", "policy.schema.json"])
def test_inlined_schema_gives_the_same_diagnostics(name: str) -> None:
    schema = files.load_schema(name)
    fast = SchemaValidator(schema)
    written = SchemaValidator(schema)
    written._validator = schema_module._Validator(schema, format_checker=FormatChecker())
    docs = [d for p in EXAMPLES if (d := load_document(p.name, p.read_bytes())[0]) and isinstance(d.data, dict)]
    rng = random.Random(12)
    for _ in range(600):
        base = rng.choice(docs)
        data = copy.deepcopy(base.data)
        for _ in range(rng.randint(1, 3)):
            key = rng.choice([*data, "bogus", "approvers", "from_date", "to_date", "rules", "windows", "execution"])
            if rng.random() < 0.15:
                data.pop(key, None)
            else:
                data[key] = rng.choice(VALUES)
        doc = Document(base.source, data, base.value_marks, base.key_marks)
        assert fast.validate(doc) == written.validate(doc), data
