"""What `validate` says of each downstream system's `analysis` in the policy (pure)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from controller.core.documents.diagnostics import Diagnostic
from controller.core.documents.yamlsafe import Document
from controller.core.model.analysis import analysis_problems


def check_policy_analysis(doc: Document) -> Iterator[Diagnostic]:
    """Every system's analysis in the policy document (that passed the schema)."""
    systems = doc.data.get("downstream", {}) if isinstance(doc.data, Mapping) else {}
    for system, raw in systems.items():
        analysis = raw.get("analysis")
        if analysis is None:
            continue
        for path, message, hint in analysis_problems(system, analysis):
            yield Diagnostic(doc.locate(("downstream", system, "analysis", *path)), message, hint)
