"""scripts/mutation's gate: the kill rate per module, what counts as killed, and the exit code."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import json
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def gate() -> ModuleType:
    loader = importlib.machinery.SourceFileLoader("mutation_gate", str(REPO / "scripts" / "mutation"))
    spec = importlib.util.spec_from_loader("mutation_gate", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def results(root: Path, module: str, codes: dict[str, int | None]) -> None:
    meta = root / f"{module}.meta"
    meta.parent.mkdir(parents=True, exist_ok=True)
    meta.write_text(json.dumps({"exit_code_by_key": codes}))


def test_kill_rate_per_module_and_threshold(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    mutation = gate()
    monkeypatch.setattr(mutation, "changed_lines", lambda name, module: [f"- original of {name}", "+ mutant"])
    killed = {f"m.x_f__mutmut_{i}": 1 for i in range(9)}
    results(tmp_path, "controller/core/good.py", {**killed, "m.x_f__mutmut_9": 36})  # a timeout counts as killed
    results(tmp_path, "controller/core/weak.py", {**killed, "m.x_g__mutmut_9": 0, "m.x_g__mutmut_10": 33})
    assert mutation.report(tmp_path, 90.0, 12.0) == 1
    out, err = capsys.readouterr()
    assert out.splitlines()[:3] == [
        "== mutation testing (12 s): kill rate per module, threshold 90 %",
        "controller/core/good.py                10 / 10   killed  100.0 %  ok",
        "controller/core/weak.py                 9 / 11   killed   81.8 %  BELOW THRESHOLD",
    ]
    assert out.splitlines()[4:10] == [
        "== 2 surviving mutant(s)",
        "-- m.x_g__mutmut_10 (no tests)",
        "   - original of m.x_g__mutmut_10",
        "   + mutant",
        "-- m.x_g__mutmut_9 (survived)",
        "   - original of m.x_g__mutmut_9",
    ]
    assert err == "\nmutation: kill rate below 90 % in controller/core/weak.py\n"
    assert mutation.report(tmp_path, 80.0, 12.0) == 0
    assert capsys.readouterr().out.endswith("\nmutation: every module kills at least 80 % of its mutants\n")


def test_no_mutants_is_a_failure(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert gate().report(tmp_path, 90.0, 0.0) == 1
    assert "no mutants were generated" in capsys.readouterr().err
