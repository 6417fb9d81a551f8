"""`backfillctl validate` memory: a file's bytes and document are dropped once it is checked, so what
validation keeps grows by far less per file than a file costs; diagnostics found later are still placed."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from controller.commands.reconcile.specfiles import validate_paths
from controller.core.documents.yamlsafe import load_document
from controller.core.model.spec import BackfillSpec, SourceFile, parse_spec
from tests.core.specs import text

REPO = Path(__file__).resolve().parents[3]

NOW = datetime(2026, 1, 1, tzinfo=UTC)
SPEC = """version: 1
name: spec-{i:05d}
dag_id: dag_{dag}
from_date: "2025-{month:02d}-01"
to_date: "2025-{month:02d}-28"
reprocess_behavior: failed
max_active_runs: 3
expected_runs: 28
dag_run_conf: {{batch: {i}, full_refresh: true}}
ticket: CHG-{ticket}
reason: Generated spec number {i} for the memory test, a sentence of some length like real ones.
requested_by: requester-{dag}
approvers: [approver-a, approver-b]
downstream: [warehouse.table_{dag}]
"""


def _tree(folder: Path, count: int) -> Path:
    specs = folder / "specs"
    specs.mkdir(parents=True)
    for i in range(count):
        text = SPEC.format(i=i, ticket=i + 1000, dag=i % 10, month=i % 12 + 1)
        (specs / f"spec-{i:05d}.yaml").write_text(text)
    return specs


MEASURE = """
import gc, json, sys, tracemalloc
from datetime import UTC, datetime
from pathlib import Path
from controller.commands.runtime.validator import build_validator
from controller.commands.reconcile.specfiles import validate_paths

validator = build_validator()
gc.collect()
tracemalloc.start()
before = tracemalloc.get_traced_memory()[0]
result = validate_paths([], Path(sys.argv[1]), datetime(2026, 1, 1, tzinfo=UTC), validator=validator)
gc.collect()
kept = tracemalloc.get_traced_memory()[0] - before
print(json.dumps({"kept": kept, "ok": result.ok, "specs": len(result.specs)}))
"""


def _kept(specs: Path) -> tuple[int, bool, int]:
    """Bytes still allocated by a validation (its result alive), measured by tracemalloc in a fresh interpreter:
    what earlier tests leave in this process (log records pytest keeps, caches) is not validation's."""
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, str(specs)], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    return found["kept"], found["ok"], found["specs"]


def test_validation_keeps_far_less_than_the_files_per_spec(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    small, large = _tree(tmp_path / "small", 200), _tree(tmp_path / "large", 2000)
    kept_small, ok_small, count_small = _kept(small)
    kept_large, ok_large, count_large = _kept(large)
    assert (ok_small, count_small, ok_large, count_large) == (True, 200, True, 2000)
    per_spec = (kept_large - kept_small) / 1800
    file_size = (large / "spec-00000.yaml").stat().st_size
    # before: raw bytes, text or marks, the document's values and the spec: about 3 KB a spec; now under 1 KB
    assert per_spec < 1.2 * 1024, f"{per_spec:.0f} bytes kept per spec (a file is {file_size} bytes)"


def test_a_duplicate_name_is_placed_by_reading_its_file_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    specs = _tree(tmp_path, 3)
    (specs / "spec-00001.yaml").write_text("\n\n" + (specs / "spec-00000.yaml").read_text())
    result = validate_paths([], Path("specs"), NOW)
    assert [d.text() for d in result.errors if "already used" in d.message] == [
        "specs/spec-00001.yaml:4:7: $.name: name 'spec-00000' is already used by specs/spec-00000.yaml:2:7"
    ]


def test_a_file_changed_after_its_checks_is_placed_at_its_first_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    specs = _tree(tmp_path, 3)
    result = validate_paths([], Path("specs"), NOW)
    assert result.ok
    (specs / "spec-00001.yaml").write_text("changed: since\n")
    (specs / "spec-00000.yaml").unlink()
    assert [str(item.at("name")) for item in result.loaded] == [
        "specs/spec-00000.yaml:1:1",  # gone
        "specs/spec-00001.yaml:1:1",  # changed
        "specs/spec-00002.yaml:2:7",  # as it was: read again
    ]


def test_specs_of_one_tree_share_the_values_they_repeat() -> None:
    first, second = (text(name=n, approvers="dave, erin") for n in ("a", "b"))
    shared: dict[Any, Any] = {}
    a, b = (_parse(body, n, shared) for body, n in ((first, "a"), (second, "b")))
    assert (a, b) == (_parse(first, "a"), _parse(second, "b"))  # the same values as without sharing
    assert (a.dag_id, a.from_date, a.to_date, a.requested_by, a.approvers, a.downstream, a.notify) == (
        "orders_daily",
        datetime(2025, 1, 1, tzinfo=UTC),
        datetime(2025, 1, 7, tzinfo=UTC),
        "carol",
        ("dave", "erin"),
        (),
        (),
    )
    same = ("dag_id", "from_date", "to_date", "requested_by", "approvers")
    assert [getattr(a, f) is getattr(b, f) for f in same] == [True] * len(same)
    assert [getattr(a, f) is getattr(b, f) for f in ("name", "path", "digest")] == [False] * 3


def test_only_strings_their_tuples_and_dates_are_shared() -> None:
    """A settled spec skips the schema: 1 and True (equal keys) must not become one another."""
    shared: dict[Any, Any] = {}
    one = _parse(text(name="a", dag="1", approvers="1"), "a", shared)
    true = _parse(text(name="b", dag="true", approvers="true"), "b", shared)
    got: list[Any] = [one.dag_id, one.approvers, true.dag_id, true.approvers]  # off-schema values
    assert got == [1, (1,), True, (True,)]
    assert [type(got[2]), type(got[3][0])] == [bool, bool]


def _parse(body: str, name: str, shared: dict[Any, Any] | None = None) -> BackfillSpec:
    raw = body.encode()
    doc = load_document(f"specs/{name}.yaml", raw)[0]
    assert doc is not None
    return parse_spec(doc, SourceFile(f"specs/{name}.yaml", name, raw), shared)
