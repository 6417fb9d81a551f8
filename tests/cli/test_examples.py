"""The example corpus: every valid file passes; every invalid case fails with its pinned output.

Each entry of tests/examples/invalid/ is a spec file, or a folder that is its own specs tree (its own
policy.yaml); `<entry>.expected` holds the exact `backfillctl validate` output. Regenerate after a
deliberate message change with BACKFILLCTL_REGEN_EXAMPLES=1, then review the diff line by line.
How fast hostile files are refused is measured by bench/hostile_yaml.py, not asserted here (wall-clock asserts
fail under load); tests/core/documents/test_yamlsafe.py counts the loader's work on an alias bomb instead.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from controller.cli import main

EXAMPLES = Path(__file__).parents[1] / "examples"
INVALID = sorted(p for p in (EXAMPLES / "invalid").iterdir() if p.suffix != ".expected")
VALID = sorted((EXAMPLES / "valid").iterdir())
HOSTILE = {
    "alias-bomb",
    "python-object-apply",
    "merge-key",
    "too-large",
    "not-utf8",
    "duplicate-key",
    "empty",
    "list-not-mapping",
    "typo-dagid",
    "two-documents",
    "custom-tag",
    "surrogate-reason",
    "nul-ticket",
    "conf-infinity",
    "conf-nan",
    "conf-huge-integer",
    "conf-deep-nesting",
}


def run_validate(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, case: Path) -> tuple[int, str]:
    monkeypatch.chdir(EXAMPLES)
    specs_dir = case.relative_to(EXAMPLES) if case.is_dir() else Path(".")
    monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", str(specs_dir))
    code = main(["validate", str(case.relative_to(EXAMPLES))])
    return code, capsys.readouterr().out


def test_corpus_is_large_enough() -> None:
    assert len(INVALID) >= 30
    assert {p.stem for p in INVALID} >= HOSTILE


@pytest.mark.parametrize("case", VALID, ids=lambda p: p.stem)
def test_valid_example(case: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = run_validate(capsys, monkeypatch, case)
    policy = f"{case.relative_to(EXAMPLES)}/policy.yaml" if case.is_dir() else "policy.yaml"  # a folder: its own
    assert out == f"OK: 1 spec valid (2 files including the policy {policy}, 0 warnings).\n"
    assert code == 0


@pytest.mark.parametrize("case", INVALID, ids=lambda p: p.stem)
def test_invalid_example(case: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    code, out = run_validate(capsys, monkeypatch, case)
    expected = case.with_name(case.name.removesuffix(".yaml") + ".expected")
    if os.environ.get("BACKFILLCTL_REGEN_EXAMPLES"):
        expected.write_text(out)
    assert out == expected.read_text()
    assert code == 1
