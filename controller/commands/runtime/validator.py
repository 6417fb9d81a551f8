"""The validator of spec and policy files, for the schemas packaged with backfillctl."""

from __future__ import annotations

from controller.adapters import files
from controller.core.checks.validation import SpecValidator


def build_validator() -> SpecValidator:
    """The validator for the packaged schemas (trusted: tests/repo/test_schemas.py checks them against the
    metaschema)."""
    spec, policy = files.load_schema("backfill-spec.schema.json"), files.load_schema("policy.schema.json")
    return SpecValidator(spec, policy, trusted=True)
