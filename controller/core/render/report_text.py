"""The change record for a terminal (pure): the Markdown one without its markup — no backslash escapes, bold
markers, code-span backticks or fences — so `report NAME` reads as text where a person reads it, and stays Markdown
where it is piped or asked for (a PR comment, a ticket)."""

from __future__ import annotations

import re

_ESCAPED = re.compile(r"\\([\\`*_{}\[\]<>()#!|~&$])")  # what `md_text` escapes, back to itself
_BOLD = re.compile(r"\*\*(.+?)\*\*")
_CODE = re.compile(r"`([^`\n]+)`")
_FENCE = re.compile(r"^`{3,}$")


def report_text(markdown: str) -> str:
    """`- **Ticket**: CHG\\-1 \\(\\#6\\)` → `- Ticket: CHG-1 (#6)`; a heading keeps its words, a fence its lines."""
    out, fenced = [], False
    for line in markdown.splitlines():
        if _FENCE.match(line):
            fenced = not fenced
            continue
        out.append(line if fenced else _text(line))  # a fence's lines are plain already: kept as they are
    return "".join(line + "\n" for line in out)


def _text(line: str) -> str:
    if line.startswith("## "):  # a section: its title in capitals, as a terminal report shows sections
        line = line[3:].upper()
    elif line.startswith("# "):
        line = line[2:]
    return _ESCAPED.sub(r"\1", _CODE.sub(r"\1", _BOLD.sub(r"\1", line)))
