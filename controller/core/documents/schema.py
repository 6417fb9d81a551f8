"""JSON Schema validation of loaded documents, with located, human messages (pure).

The schema documents are passed in (the adapters read them from `schemas/`); this module never reads
files.  Formats are asserted with jsonschema's FormatChecker; `missing_format_checkers` lets a test fail
when a schema uses a format nobody checks.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator, Mapping
from typing import Any

from jsonschema import Draft202012Validator, FormatChecker, validators
from jsonschema.exceptions import ValidationError

from controller.core.documents.diagnostics import Diagnostic, PathPart
from controller.core.documents.patterns import ecma_search
from controller.core.documents.scalars import yaml11_reading
from controller.core.documents.yamlsafe import Document

Schema = Mapping[str, Any]
_SECRET_KEY = re.compile(r"token|password|secret|credential", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<!e\.g)(?<!i\.e)\.(?:\s|$)")


def _ecma_pattern(validator: Any, pattern: str, instance: object, _schema: Schema) -> Iterator[ValidationError]:
    """jsonschema's `pattern` keyword with its words, searched as ECMA-262 does (`$` only at the end)."""
    if validator.is_type(instance, "string") and not ecma_search(pattern, str(instance)):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


_Validator = validators.extend(Draft202012Validator, {"pattern": _ecma_pattern})


class SchemaValidator:
    """Validates one kind of document (spec or policy) against its JSON Schema.

    The schema is checked against the Draft 2020-12 metaschema first, unless it is `trusted`: the packaged
    schemas are (tests/repo/test_schemas.py checks them), and checking costs tens of milliseconds at every start.
    """

    def __init__(self, schema: Schema, *, trusted: bool = False) -> None:
        if not trusted:
            Draft202012Validator.check_schema(schema)
        self.schema = schema
        # local references inlined: the same checks and messages, without a reference lookup per value
        self._validator = _Validator(_inline_local_refs(schema), format_checker=FormatChecker())
        self._properties: Mapping[str, Any] = schema.get("properties", {})

    def validate(self, doc: Document) -> list[Diagnostic]:
        errors = sorted(self._validator.iter_errors(doc.data), key=lambda e: list(map(str, e.absolute_path)))
        return [diag for error in errors for diag in self._diagnostics(doc, error)]

    def _diagnostics(self, doc: Document, error: ValidationError) -> Iterator[Diagnostic]:
        path: tuple[PathPart, ...] = tuple(error.absolute_path)
        if error.validator == "additionalProperties":
            yield from self._unknown_fields(doc, error, path)
            return
        message, hint = _message(error, self._properties, path)
        if "propertyNames" in error.absolute_schema_path and isinstance(error.instance, str):
            yield Diagnostic(doc.locate((*path, error.instance), at_key=True), message, hint)  # the key is wrong
            return
        yield Diagnostic(doc.locate(path), message, hint)

    def _unknown_fields(
        self, doc: Document, error: ValidationError, path: tuple[PathPart, ...]
    ) -> Iterator[Diagnostic]:
        allowed = sorted(error.schema.get("properties", {}))
        for key in sorted(set(error.instance) - set(allowed)):
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f"did you mean {close[0]!r}?" if close else f"allowed fields: {', '.join(allowed)}"
            if _SECRET_KEY.search(key):
                hint = "secrets never go in spec files; set BACKFILLCTL_AIRFLOW_TOKEN in the environment"
            yield Diagnostic(doc.locate((*path, key), at_key=True), f"unknown field {key!r}", hint)


def _inline_local_refs(schema: Schema) -> Schema:
    """The schema with each `{"$ref": "#/$defs/NAME", …}` replaced by NAME's keywords (beside its own).

    Only where that cannot change a result: a definition that is itself free of references, and no keyword
    in both places. Anything else keeps its `$ref`.
    """
    defs: Mapping[str, Any] = schema.get("$defs", {})
    plain = {
        name: d for name, d in defs.items() if isinstance(d, Mapping) and "$ref" not in repr(d) and "$id" not in repr(d)
    }

    def walk(node: Any) -> Any:
        if isinstance(node, Mapping):
            ref = node.get("$ref")
            if isinstance(ref, str) and ref.startswith("#/$defs/") and ref[len("#/$defs/") :] in plain:
                target = plain[ref[len("#/$defs/") :]]
                siblings = {k: v for k, v in node.items() if k != "$ref"}
                if not set(siblings) & set(target):
                    return {**{k: walk(v) for k, v in siblings.items()}, **target}
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        return node

    inlined: Schema = walk(schema)
    return inlined


def missing_format_checkers(schema: Schema, checker: FormatChecker | None = None) -> set[str]:
    """Formats the schema uses that the format checker cannot check."""
    known = set((checker or FormatChecker()).checkers)
    return {fmt for fmt in _formats(schema) if fmt not in known}


def _formats(node: Any) -> Iterator[str]:
    if isinstance(node, Mapping):
        if isinstance(node.get("format"), str):
            yield node["format"]
        for value in node.values():
            yield from _formats(value)
    elif isinstance(node, list):
        for value in node:
            yield from _formats(value)


def _message(
    error: ValidationError, properties: Mapping[str, Any], path: tuple[PathPart, ...]
) -> tuple[str, str | None]:
    handler = _HANDLERS.get(str(error.validator))
    if handler is not None:
        return handler(error, properties, path)
    return error.message, None


def _required(
    error: ValidationError, properties: Mapping[str, Any], path: tuple[PathPart, ...]
) -> tuple[str, str | None]:
    field = str(error.message).split("'")[1]
    description = properties.get(field, {}).get("description", "") if not path else ""
    hint = f"add `{field}:`" + (f" ({_first_sentence(description)})" if description else "")
    return f"missing required field {field!r}", hint


def _enum(error: ValidationError, _p: Mapping[str, Any], _path: tuple[PathPart, ...]) -> tuple[str, str | None]:
    hint = yaml11_reading(error.instance)
    if hint and "none" in error.validator_value:
        hint += "; did you mean 'none'?"
    elif isinstance(error.instance, bool):
        hint = "YAML read an unquoted true/false as a boolean; quote the value"
    return error.message, hint


def _type(error: ValidationError, _p: Mapping[str, Any], path: tuple[PathPart, ...]) -> tuple[str, str | None]:
    expected, value = error.validator_value, error.instance
    if not path and expected == "object":
        return (
            f"the document must be a mapping of fields, not {_kind(value)}",
            "write `key: value` lines, one per field",
        )
    if value is None:
        return f"the value is empty; expected {_article(expected)}", "write a value or remove the key"
    hint = None
    if expected == "boolean" and yaml11_reading(value):
        hint = "write true or false; YAML 1.2 reads only those as booleans"
    elif isinstance(value, str) and expected in ("integer", "boolean"):
        hint = "remove the quotes"
    elif expected == "array" and not isinstance(value, (dict, list)):
        hint = f"write a list: [{value}]"
    return error.message, hint


def _date(error: ValidationError, _p: Mapping[str, Any], _path: tuple[PathPart, ...]) -> tuple[str, str | None]:
    value = error.instance
    if not isinstance(value, str):
        return f"{value!r} is not a date string", 'write a date like "2025-01-01"'
    message = f"{value!r} is not a date (YYYY-MM-DD) or an RFC 3339 date-time with an offset"
    hint = "use a real calendar date such as 2025-01-31"
    if "T" in value and not value.endswith(("Z", "z")) and value[-6:-5] not in ("+", "-"):
        message = f"{value!r} has no UTC offset; a date-time without one is ambiguous"
        hint = f"add an offset, e.g. {value}Z for UTC"
    return message, hint


def _any_of(error: ValidationError, p: Mapping[str, Any], path: tuple[PathPart, ...]) -> tuple[str, str | None]:
    """The schema's two alternatives: a spec's `windows` (always or a list) and dates."""
    if path and path[-1] == "windows":
        return (
            f"{error.instance!r} is neither `always` nor a list of windows",
            'write `windows: always`, or a list like `- {days: [sat, sun], start: "00:00", end: "24:00", '
            "timezone: Europe/Berlin}`",
        )
    return _date(error, p, path)


def _const(error: ValidationError, _p: Mapping[str, Any], _path: tuple[PathPart, ...]) -> tuple[str, str | None]:
    return f"must be {error.validator_value!r}, got {error.instance!r}", "this tool reads format version 1"


def _min_length(error: ValidationError, _p: Mapping[str, Any], path: tuple[PathPart, ...]) -> tuple[str, str | None]:
    hint = "say why the backfill is needed, for reviewers and the change record" if path == ("reason",) else None
    return error.message, hint


_DAG_ID_HINT = "a dag_id has letters, digits, '_', '.' and '-' only"
_ENVIRONMENT_HINT = (
    "environment names have lower-case letters, digits, '_' and '-', starting with a letter (e.g. staging)"
)
_PATTERN_HINTS = {  # by the field's own name (its last path part), else by the top-level field
    "name": "use lower-case letters, digits, '-', '_' and '.', and name the file the same",
    "dag_id": _DAG_ID_HINT,
    "allowed_dags": _DAG_ID_HINT,
    "dags": f"{_DAG_ID_HINT}: a downstream system lists exact dag_ids (globs are for `rules[].dags`)",
    "result_task": "a task_id has letters, digits, '_', '.' and '-' only",
    "rehearse_in": _ENVIRONMENT_HINT,
    "environments": _ENVIRONMENT_HINT,
}
_ENV_NAME_HINT = (
    "an environment variable's name: upper-case letters, digits and '_' (e.g. BACKFILLCTL_STAGING_AIRFLOW_URL)"
)


def _pattern(error: ValidationError, _p: Mapping[str, Any], path: tuple[PathPart, ...]) -> tuple[str, str | None]:
    if path and path[-1] in ("max_sample_age", "pause_after"):  # the policy's analysis durations
        return f"{error.instance!r} is not a duration", "write hours, minutes and seconds in that order: 90s, 2m, 1h30m"
    named = [str(part) for part in path if isinstance(part, str)]
    own = named[-1] if named else ""
    if own.endswith("_env"):
        return error.message, _ENV_NAME_HINT
    hint = _PATTERN_HINTS.get(own) or _PATTERN_HINTS.get(named[0] if named else "")
    return error.message, hint or "logins have letters, digits, '.', '_' and '-'"


def _unique(error: ValidationError, _p: Mapping[str, Any], _path: tuple[PathPart, ...]) -> tuple[str, str | None]:
    return error.message, "list each entry once"


def _format(error: ValidationError, _p: Mapping[str, Any], _path: tuple[PathPart, ...]) -> tuple[str, str | None]:
    if error.validator_value == "regex":
        return f"{error.instance!r} is not a valid regular expression", "check brackets and escapes (Python syntax)"
    return error.message, None


def _min_items(error: ValidationError, _p: Mapping[str, Any], _path: tuple[PathPart, ...]) -> tuple[str, str | None]:
    count = int(error.validator_value)
    return "the list is empty", f"add at least {count} entr{'y' if count == 1 else 'ies'}"


def _article(expected: Any) -> str:
    names = {
        "string": "a string",
        "integer": "an integer",
        "boolean": "true or false",
        "array": "a list",
        "object": "a mapping",
    }
    return names.get(str(expected), str(expected))


def _kind(value: Any) -> str:
    names = {list: "a list", str: "a string", int: "a number", float: "a number", bool: "a boolean"}
    return "nothing" if value is None else names.get(type(value), type(value).__name__)


def _first_sentence(text: str) -> str:
    return _SENTENCE_END.split(text, maxsplit=1)[0]


_HANDLERS = {
    "required": _required,
    "enum": _enum,
    "type": _type,
    "anyOf": _any_of,
    "const": _const,
    "minLength": _min_length,
    "pattern": _pattern,
    "uniqueItems": _unique,
    "minItems": _min_items,
    "format": _format,
}
