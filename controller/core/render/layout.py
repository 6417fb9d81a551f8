"""Text tables that fit a terminal (pure): columns sized to their content, the least needed left out first when
the width is short, a free-text last column wrapped below; a name is never cut (a line too narrow for one is
longer than the width instead)."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass

GAP = "  "
NOTE_MIN = 24  # narrower than this, the note goes on lines of its own below its row
NOTE_INDENT = "    "


@dataclass(frozen=True, slots=True)
class Column:
    header: str
    right: bool = False  # numbers are right-aligned
    keep: int = 0  # 0 is never left out; the highest goes first when the width is short


def wrap(text: str, width: int) -> list[str]:
    """Lines of at most `width` characters, broken at spaces only (a word longer than that stays whole)."""
    return textwrap.wrap(text, max(width, 1), break_long_words=False, break_on_hyphens=False) or [""]


def hang(text: str, width: int | None) -> list[str]:
    """`text` as one line, or wrapped to `width` with its continuation lines indented (a hanging indent)."""
    if width is None or len(text) <= width:
        return [text]
    lead = text[: len(text) - len(text.lstrip())]
    first, *rest = wrap(text.strip(), width - len(NOTE_INDENT))
    return [lead + first, *(NOTE_INDENT + line for line in rest)]


def table(
    columns: Sequence[Column], rows: Sequence[Sequence[str]], notes: Sequence[str], note_header: str, width: int | None
) -> tuple[list[str], list[str]]:
    """The table's lines and the headers of the columns left out to fit `width` (None: no limit, one line a row)."""
    kept = list(range(len(columns)))
    sizes = [max([len(columns[c].header), *(len(r[c]) for r in rows)]) for c in kept]

    def span(chosen: list[int]) -> int:
        return sum(sizes[c] for c in chosen) + len(GAP) * (len(chosen) - 1)

    inline = width is None or span(kept) + len(GAP) + NOTE_MIN <= width
    while width is not None and not inline and span(kept) > width and any(columns[c].keep for c in kept):
        kept.remove(max(kept, key=lambda c: columns[c].keep))
    left_out = [columns[c].header for c in range(len(columns)) if c not in kept]

    def cells(values: Sequence[str]) -> str:
        return GAP.join(
            values[c].rjust(sizes[c]) if columns[c].right else values[c].ljust(sizes[c]) for c in kept
        ).rstrip()

    head = cells([c.header for c in columns])
    lines = [f"{head.ljust(span(kept))}{GAP}{note_header}" if inline else head]
    for row, note in zip(rows, notes, strict=True):
        line = cells(row)
        if inline and note:
            start = span(kept) + len(GAP)
            parts = [note] if width is None else wrap(note, width - start)
            lines += [f"{line.ljust(span(kept))}{GAP}{parts[0]}", *(" " * start + p for p in parts[1:])]
        else:
            lines.append(line)
            if note:
                room = (width or len(note) + len(NOTE_INDENT)) - len(NOTE_INDENT)
                lines += [NOTE_INDENT + p for p in wrap(note, room)]
    return lines, left_out


def left_out_line(left_out: Sequence[str], width: int | None) -> list[str]:
    """Says which columns a short width left out, and where to find them."""
    if not left_out:
        return []
    text = f"({', '.join(left_out)} left out to fit {width} columns; --format json has every field)"
    return wrap(text, width or len(text))
