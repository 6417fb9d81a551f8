"""Print the README's spec reference table from the schema's descriptions (`--check` compares)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BEGIN, END = "<!-- spec-reference:begin -->", "<!-- spec-reference:end -->"


def table(schema_name: str) -> str:
    schema = json.loads((REPO / "schemas" / schema_name).read_text())
    required = set(schema.get("required", []))
    rows = ["| field | required | description |", "|---|---|---|"]
    for name, prop in schema["properties"].items():
        rows.append(f"| `{name}` | {'yes' if name in required else 'no'} | {prop['description']} |")
    return "\n".join(rows)


def reference() -> str:
    return (
        f"{BEGIN}\n### Spec fields\n\n{table('backfill-spec.schema.json')}\n\n### Policy fields\n\n"
        f"{table('policy.schema.json')}\n{END}"
    )


def main() -> int:
    readme = (REPO / "README.md").read_text()
    start, stop = readme.index(BEGIN), readme.index(END) + len(END)
    if "--check" in sys.argv:
        return 0 if readme[start:stop] == reference() else 1
    (REPO / "README.md").write_text(readme[:start] + reference() + readme[stop:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
