"""Located findings: what is wrong, where (file:line:col and JSON path), and how to fix it."""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import StrEnum

PathPart = str | int

_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


def json_path(path: tuple[PathPart, ...]) -> str:
    """Render a path as JSONPath: `$.approvers[1]`, `$['odd key']`."""
    out = "$"
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        elif _IDENTIFIER.match(part):
            out += f".{part}"
        else:
            out += "[" + repr(part) + "]"
    return out


@dataclass(frozen=True, slots=True)
class Location:
    source: str
    line: int
    column: int
    path: tuple[PathPart, ...] = ()

    def __str__(self) -> str:
        return f"{self.source}:{self.line}:{self.column}"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    location: Location
    message: str
    hint: str | None = None
    severity: Severity = Severity.ERROR

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR

    def text(self) -> str:
        """`file:line:col: $.path: message` (the path omitted for whole-file problems)."""
        where = f"{self.location}: "
        if self.location.path:
            where += f"{json_path(self.location.path)}: "
        prefix = "warning: " if self.severity is Severity.WARNING else ""
        return f"{where}{prefix}{self.message}"

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.location.source, self.location.line, self.location.column, self.message)
