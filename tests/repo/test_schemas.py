"""The JSON Schemas themselves: valid Draft 2020-12, identified, closed, described, formats checked."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator, FormatChecker

from controller.core.documents.schema import missing_format_checkers

SCHEMAS = sorted((Path(__file__).resolve().parents[2] / "schemas").glob("*.schema.json"))


def objects(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if node.get("type") == "object" and "properties" in node:
            yield node
        for value in node.values():
            yield from objects(value)
    elif isinstance(node, list):
        for value in node:
            yield from objects(value)


def test_every_schema_exists() -> None:
    assert [p.name for p in SCHEMAS] == ["backfill-spec.schema.json", "evidence.schema.json", "policy.schema.json"]


@pytest.mark.parametrize("path", SCHEMAS, ids=lambda p: p.name)
def test_schema_is_valid_against_the_metaschema(path: Path) -> None:
    schema = json.loads(path.read_text())
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"].startswith("urn:backfillctl:schema:")


@pytest.mark.parametrize("path", SCHEMAS, ids=lambda p: p.name)
def test_every_object_is_closed_and_every_property_described(path: Path) -> None:
    schema = json.loads(path.read_text())
    found = list(objects(schema))
    assert found
    for obj in found:
        assert obj.get("additionalProperties") is False
        for name, prop in obj["properties"].items():
            assert prop.get("description"), f"{path.name}: property {name} has no description"


@pytest.mark.parametrize("path", SCHEMAS, ids=lambda p: p.name)
def test_every_used_format_has_a_checker(path: Path) -> None:
    assert missing_format_checkers(json.loads(path.read_text())) == set()


def test_missing_format_checker_is_detected() -> None:
    schema = {"properties": {"a": {"type": "string", "format": "date-time"}, "b": {"format": "no-such-format"}}}
    assert missing_format_checkers(schema) == {"no-such-format"}
    assert missing_format_checkers(schema, FormatChecker(formats=())) == {"date-time", "no-such-format"}
