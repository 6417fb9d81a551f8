"""docs/operations.md, the on-call runbook: every `backfillctl …` line in it parses with this CLI (a command or a
flag that does not exist fails here: `--help` stops before option values are checked), and every test it names
exists."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from controller.cli import main

DOC = Path(__file__).resolve().parents[2] / "docs" / "operations.md"
BLOCKS = re.compile(r"```bash\n(.*?)```", re.DOTALL)


def commands() -> list[list[str]]:
    found = []
    for block in BLOCKS.findall(DOC.read_text()):
        for line in block.splitlines():
            words = shlex.split(line, comments=True)
            if "backfillctl" in words:
                found.append(words[words.index("backfillctl") + 1 :])
    return found


def test_the_runbook_has_the_commands_of_each_situation() -> None:
    verbs = sorted({" ".join(w for w in args[:2] if not w.startswith("-")) for args in commands()})
    assert verbs == [
        "audit export",
        "audit show",
        "audit verify",
        "reconcile",
        "report orders-2025q1",
        "status",
        "stop",
        "stop lift",
        "stop list",
        "stop orders-2025q1",
        "store migrate",
        "store unlock",
    ]


@pytest.mark.parametrize("args", commands(), ids=" ".join)
def test_each_command_in_the_runbook_parses(args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*args, "--help"]) == 0, capsys.readouterr().err
    assert capsys.readouterr().out.startswith("Usage: ")


def test_each_test_the_runbook_names_exists() -> None:
    named = set(re.findall(r"`(test_[a-z0-9_]+)(?:…)?`", DOC.read_text()))
    tests = "\n".join(p.read_text() for p in Path(__file__).parents[1].rglob("test_*.py"))
    missing = [name for name in sorted(named) if not re.search(rf"def {re.escape(name)}", tests)]
    assert named
    assert not missing


def test_the_docs_spell_no_deprecated_command() -> None:
    """`stop --list` and `stop --lift` still work (with a note on stderr); what the docs teach is `stop list|lift`."""
    root = DOC.parents[1]
    docs = [root / "README.md", *sorted((root / "docs").glob("*.md")), *sorted((root / ".github").rglob("*.yml"))]
    found = [f"{p.name}: {m}" for p in docs for m in re.findall(r"stop --li(?:st|ft)\b", p.read_text())]
    assert found == ["README.md: stop --list", "README.md: stop --lift"]  # the sentence saying they still work
