"""Plain and quoted scalars as this loader reads them (pure): YAML 1.2's core schema, and only what JSON, the audit
record and PostgreSQL can carry. A refusal is a `YamlProblem` at the scalar's mark, with a hint.
"""

from __future__ import annotations

import math
import re
from typing import Any

from controller.core.documents.diagnostics import PathPart

# JSON's safe integers: beyond them a reader that uses doubles (JavaScript, the Airflow UI) rounds the number
MAX_SAFE_INTEGER = 2**53 - 1
_SAFE_DIGITS = len(str(MAX_SAFE_INTEGER))

_NULL = re.compile(r"^(?:~|null|Null|NULL|)$")
_BOOL = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_INT = re.compile(r"^[-+]?(?:0|[1-9][0-9]*)$")
_LEADING_ZERO_INT = re.compile(r"^[-+]?0[0-9]+$")
_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$")
_SPECIAL_FLOAT = re.compile(r"^(?:[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")
# a lone surrogate is not Unicode (it cannot be encoded as UTF-8); PostgreSQL's text cannot hold a NUL
UNSTORABLE = re.compile("[\x00\ud800-\udfff]")
_YAML11_BOOL = {"y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF"}


class YamlProblem(Exception):
    """Raised inside the loader; converted to a Diagnostic at the boundary of `load_document`."""

    def __init__(
        self, message: str, line: int, column: int, hint: str | None = None, path: tuple[PathPart, ...] = ()
    ) -> None:
        super().__init__(message)
        self.message, self.line, self.column, self.hint, self.path = message, line, column, hint, path


def problem(message: str, mark: Any, hint: str | None = None, path: tuple[PathPart, ...] = ()) -> YamlProblem:
    return YamlProblem(message, mark.line + 1, mark.column + 1, hint, path)


def storable(value: str, mark: Any, path: tuple[PathPart, ...], what: str) -> str:
    """The string, or a refusal naming its first character that cannot be stored (by code point, never raw)."""
    found = UNSTORABLE.search(value)
    if found is None:
        return value
    at, char = found.start(), found.group()
    if char == "\x00":
        raise problem(
            f"the {what} holds a NUL character (\\0) at character {at + 1}, which PostgreSQL cannot store",
            mark,
            "remove the \\0 escape",
            path,
        )
    pair = value[at : at + 2]
    joined = pair.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "replace") if len(pair) == 2 else ""
    better = f"\\U{ord(joined):08X}" if len(joined) == 1 else "the character itself"
    raise problem(
        f"the {what} holds a lone surrogate U+{ord(char):04X} at character {at + 1}, which is not Unicode "
        "text (it cannot be written as UTF-8)",
        mark,
        f"write {better} instead of \\u escapes of UTF-16 surrogates",
        path,
    )


def plain(value: str, mark: Any, path: tuple[PathPart, ...] = ()) -> Any:
    """A plain scalar by YAML 1.2's core schema; an integer with a leading zero is refused, and so is a number
    JSON cannot carry."""
    if _NULL.match(value):
        return None
    if value in _BOOL:
        return _BOOL[value]
    if _LEADING_ZERO_INT.match(value):
        raise problem(
            f"{value!r} is ambiguous: YAML 1.1 reads it as octal, YAML 1.2 as decimal",
            mark,
            f"write it without leading zeros ({int(value)}) or quote it",
            path,
        )
    if _INT.match(value):
        return _integer(value, mark, path)
    if _FLOAT.match(value) and any(c.isdigit() for c in value):
        return _finite(value, mark, path)
    if _SPECIAL_FLOAT.match(value):
        what = "NaN (not a number)" if "nan" in value.lower() else "infinity"
        raise problem(
            f"{value} is {what} in YAML 1.2, which JSON cannot carry", mark, _NUMBER_HINT + "; or write null", path
        )
    return value


_NUMBER_HINT = "quote it to pass it as a string"


def _integer(value: str, mark: Any, path: tuple[PathPart, ...]) -> int:
    # counting digits first: int() of a 5,000-digit string raises ValueError (Python's 4,300-digit limit)
    digits = len(value.lstrip("+-"))
    number = int(value) if digits <= _SAFE_DIGITS else None
    if number is not None and abs(number) <= MAX_SAFE_INTEGER:
        return number
    raise problem(
        f"integer {_shown(value)} is out of range: integers must lie within -{MAX_SAFE_INTEGER} and "
        f"{MAX_SAFE_INTEGER} (2^53 - 1)",
        mark,
        f"JSON readers that use doubles (JavaScript, the Airflow UI) round larger integers; {_NUMBER_HINT}",
        path,
    )


def _finite(value: str, mark: Any, path: tuple[PathPart, ...]) -> float:
    number = float(value)
    if math.isfinite(number):
        return number
    raise problem(
        f"number {_shown(value)} is out of range: it overflows to infinity, which JSON cannot carry",
        mark,
        f"write a number below 1.8e308 in magnitude, or {_NUMBER_HINT}",
        path,
    )


def _shown(value: str) -> str:
    """A number as written, or its ends and length when it is long (a 5,000-digit number is not echoed)."""
    return value if len(value) <= 24 else f"{value[:10]}...{value[-4:]} ({len(value)} characters)"


def yaml11_reading(value: Any) -> str | None:
    """What YAML 1.1 (PyYAML's default) would have made of a plain string, for hints; None if the same."""
    if isinstance(value, str) and value in _YAML11_BOOL:
        truth = value.lower() in ("y", "yes", "on")
        return f"YAML 1.1 tools read `{value}` as the boolean {str(truth).lower()}; this loader keeps the string"
    return None
