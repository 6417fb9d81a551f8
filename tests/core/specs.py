"""Build LoadedSpec values from YAML text, the way validation does (no files, no schema)."""

from __future__ import annotations

from controller.core.checks.loaded import LoadedSpec
from controller.core.documents.yamlsafe import load_document
from controller.core.model.spec import SourceFile, parse_spec

SPEC = """version: 1
name: {name}
dag_id: {dag}
from_date: "2025-01-01"
to_date: "2025-01-07"
reprocess_behavior: {reprocess}
max_active_runs: 3
ticket: CHG-1
reason: A backfill under review.
requested_by: carol
approvers: [{approvers}]
"""


def text(name: str = "s", dag: str = "orders_daily", reprocess: str = "none", approvers: str = "dave") -> str:
    return SPEC.format(name=name, dag=dag, reprocess=reprocess, approvers=approvers)


def loaded(body: str, name: str = "s") -> LoadedSpec:
    raw = body.encode()
    path = f"specs/{name}.yaml"
    doc, problems = load_document(path, raw)
    assert doc is not None, problems
    return LoadedSpec(parse_spec(doc, SourceFile(path, name, raw)), doc, name)
