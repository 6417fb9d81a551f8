"""`backfillctl validate` and `backfillctl new`: read files, run the pure validator, write scaffolds."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from pathlib import Path

from controller.adapters import files
from controller.core.scaffold import NewSpec, scaffold
from controller.core.spec import SourceFile
from controller.core.validation import SpecValidator, ValidationResult
from controller.errors import ConfigError


def build_validator() -> SpecValidator:
    return SpecValidator(files.load_schema("backfill-spec.schema.json"), files.load_schema("policy.schema.json"))


def validate_paths(
    paths: Sequence[Path], specs_dir: Path, now: datetime, validator: SpecValidator | None = None
) -> ValidationResult:
    """Validate every spec under `paths` (default: the specs folder) with the tree's policy."""
    tree = files.collect(paths or [specs_dir], specs_dir)
    return (validator or build_validator()).validate(
        tree.specs, now=now, policy_file=tree.policy, read_problems=tree.problems
    )


def create_spec(new: NewSpec, specs_dir: Path, now: datetime) -> tuple[Path, ValidationResult]:
    """Write `specs_dir/<name>.yaml` from the template and validate it with the tree's policy."""
    path = specs_dir / f"{new.name}.yaml"
    text = scaffold(new)
    validator = build_validator()
    tree = files.collect([], specs_dir)
    preview = validator.validate(
        [SourceFile(files.display(path), new.name, text.encode())], now=now, policy_file=tree.policy
    )
    if any(d.message.startswith("YAML") for d in preview.errors):
        raise ConfigError(
            f"the values given do not make a readable spec: {preview.errors[0].message}",
            hint="check --name, --dag-id and the dates",
        )
    files.write_new(path, text)
    return path, preview
