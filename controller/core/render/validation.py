"""Render validation results as text, JSON or GitHub workflow commands (pure: returns strings)."""

from __future__ import annotations

import json
from typing import Any

from controller.core.checks.result import ValidationResult
from controller.core.documents.diagnostics import Diagnostic, json_path
from controller.core.documents.escaping import plain_lines

VALIDATE_FORMAT_VERSION = 1


def validation_text(result: ValidationResult) -> str:
    lines: list[str] = []
    for diag in result.diagnostics:
        lines.append(diag.text())
        if diag.hint:
            lines.append(f"  hint: {diag.hint}")
    lines.append(_summary(result))
    return plain_lines(lines)


def _summary(result: ValidationResult) -> str:
    errors, warnings = len(result.errors), len(result.warnings)
    files = plural(result.files_checked, "file")
    if result.policy.path:
        files += f" including the policy {result.policy.path}"
    if errors:
        return f"{plural(errors, 'error')}, {plural(warnings, 'warning')} in {files}."
    return f"OK: {plural(len(result.specs), 'spec')} valid ({files}, {plural(warnings, 'warning')})."


def skipped_text(result: ValidationResult) -> str:
    """The checks this run did not make, one line each for stderr (stdout stays the report)."""
    return plain_lines([f"note: not checked: {what}" for what in result.skipped])


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def validation_json(result: ValidationResult) -> str:
    document: dict[str, Any] = {
        "format_version": VALIDATE_FORMAT_VERSION,
        "valid": result.ok,
        "files_checked": result.files_checked,
        "specs": [{"name": s.name, "path": s.path, "dag_id": s.dag_id, "digest": s.digest} for s in result.specs],
        "diagnostics": [_diagnostic_json(d) for d in result.diagnostics],
        "summary": {"errors": len(result.errors), "warnings": len(result.warnings)},
    }
    if result.skipped:  # only then: a run that checked everything reads as it always did
        document["skipped"] = list(result.skipped)
    return json.dumps(document, indent=2, sort_keys=True) + "\n"


def _diagnostic_json(diag: Diagnostic) -> dict[str, Any]:
    loc = diag.location
    return {
        "severity": diag.severity.value,
        "file": loc.source,
        "line": loc.line,
        "column": loc.column,
        "json_path": json_path(loc.path),
        "message": diag.message,
        "hint": diag.hint,
    }


def validation_github(result: ValidationResult) -> str:
    """GitHub Actions workflow commands: `::error file=…,line=…,col=…,title=…::message`."""
    lines = [_annotation(d) for d in result.diagnostics]
    lines.append(_summary(result))
    return plain_lines(lines)  # the annotations' data is %-escaped already; this drops ESC and bidi controls


def _annotation(diag: Diagnostic) -> str:
    loc = diag.location
    props = ",".join(
        f"{key}={_escape_property(str(value))}"
        for key, value in (
            ("file", loc.source),
            ("line", loc.line),
            ("col", loc.column),
            ("title", "backfillctl validate"),
        )
    )
    body = diag.message if not loc.path else f"{json_path(loc.path)}: {diag.message}"
    if diag.hint:
        body += f"\nhint: {diag.hint}"
    return f"::{diag.severity.value}{' ' if props else ''}{props}::{_escape_data(body)}"


def _escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(text: str) -> str:
    return _escape_data(text).replace(":", "%3A").replace(",", "%2C")
