"""The README's promises: the spec reference matches the schemas, and the set-up commands exist."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_spec_reference_matches_the_schemas() -> None:
    result = subprocess.run([sys.executable, "scripts/spec_reference.py", "--check"], cwd=REPO, check=False)
    assert result.returncode == 0, "README spec reference is stale: run python scripts/spec_reference.py"


def test_ci_runs_the_readme_test_command() -> None:
    readme = (REPO / "README.md").read_text()
    assert "./scripts/test     # the whole test suite" in readme
    assert "./scripts/demo     # the main job" in readme
    assert (REPO / ".ci" / "run").read_text().strip().endswith("exec ./scripts/test")


def test_example_specs_validate() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "controller", "validate"], cwd=REPO, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout
    assert result.stdout == "OK: 5 specs valid (6 files including the policy specs/policy.yaml, 0 warnings).\n"


# Alembic's folder: its env.py and revisions are the migrations the store's line names, not modules of their own
ALEMBIC = Path("controller/adapters/store/migrations")
INDENT = 23  # where the Layout block's descriptions start: a shorter indent begins a package's line


def layout_entries() -> dict[str, str]:
    """The README's Layout block: each folder it describes (`controller/core/render`) → its description."""
    readme = (REPO / "README.md").read_text()
    section = readme[readme.index("## Layout\n") :]
    block = section[section.index("```\n") + 4 :]
    block = block[: block.index("```")]
    entries: dict[str, str] = {}
    parent, current = "", ""
    for line in block.splitlines():
        head, text = line[:INDENT].rstrip(), line[INDENT:]
        if head.strip():
            name = head.strip().split()[0].rstrip("/")
            current = f"{parent}/{name}" if head.startswith("  ") else name
            parent = parent if head.startswith("  ") else name
            entries[current] = ""
        entries[current] += " " + text
    return entries


def test_the_layout_names_every_package_and_module_under_controller() -> None:
    entries = layout_entries()
    missing = []
    for folder in sorted({p.parent for p in (REPO / "controller").rglob("*.py")}):
        package = folder.relative_to(REPO)
        if package == ALEMBIC or ALEMBIC in package.parents:
            continue
        described = entries.get(package.as_posix())
        if described is None:
            missing.append(f"{package}/ (no line of its own)")
            continue
        missing += [
            f"{module.relative_to(REPO)}"
            for module in sorted(folder.glob("*.py"))
            if module.name != "__init__.py" and not re.search(rf"(?<![\w.]){re.escape(module.stem)}\b", described)
        ]
    assert re.search(r"\bmigrations\b", entries["controller/adapters/store"])
    assert not missing, "README.md's Layout does not name these: " + ", ".join(missing)
