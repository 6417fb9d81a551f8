"""docs/architecture.md draws what the code declares: the orchestration's rooms (the folders, and the order the
import-linter contract keeps) and the pass's refining steps (`steps.STEPS`: names, order, what each reads)."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from controller.commands.reconcile import steps

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "architecture.md").read_text()


def _table_after(marker: str) -> list[list[str]]:
    """The rows of the first markdown table after `marker` (header and rule left out)."""
    lines = DOC[DOC.index(marker) :].splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("|"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_the_refining_steps_are_the_declared_ones_in_their_order() -> None:
    rows = _table_after("<!-- steps:")
    assert [r[0] for r in rows] == [s.name for s in steps.STEPS] == ["consumers", "gate", "look-ahead"]
    assert [r[1].startswith("yes") for r in rows] == [s.decides for s in steps.STEPS]
    assert [r[2] for r in rows] == [s.reads for s in steps.STEPS]
    assert steps.DECIDING == (steps.CONSUMERS, steps.GATE)


def test_the_rooms_are_the_folders_in_the_contracts_order() -> None:
    rows = _table_after("## The orchestration's rooms")
    shown = [r[0].strip("`").rstrip("/") for r in rows]
    folders = sorted(p.name for p in (REPO / "controller" / "commands").iterdir() if (p / "__init__.py").exists())
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    (rooms,) = [c for c in contracts if c.get("containers") == ["controller.commands"]]
    assert shown == rooms["layers"] == ["verbs", "loop", "reconcile", "runtime"]
    assert sorted(shown) == folders
    assert rooms["exhaustive"] is True
    loose = sorted(p.name for p in (REPO / "controller" / "commands").glob("*.py") if p.name != "__init__.py")
    assert loose == []  # every module of the orchestration is in a room


def test_each_stage_names_modules_that_exist() -> None:
    rows = _table_after("## One pass")
    named = {m for r in rows for m in re.findall(r"\b([a-z_]+)\b", r[1]) if not r[1].startswith("`")}
    room = REPO / "controller" / "commands" / "reconcile"
    assert sorted(m for m in named if not (room / f"{m}.py").exists()) == []
    assert [r[0] for r in rows] == ["load", "observe", "make_plan", "refine", "apply", "record"]
