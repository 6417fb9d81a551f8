"""`backfillctl plan --pr-comment FILE`: the plan as the pull request's sticky comment (reads FILE)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from controller.adapters import files
from controller.core.model.capabilities import Capabilities
from controller.core.model.spec import BackfillSpec
from controller.core.plan.values import Plan
from controller.core.render.pr_comment import SpecNote, changed_specs, pr_comment
from controller.errors import ConfigError

__all__ = ["changed_specs", "read_changed", "render"]
HINT = "write it with `git diff -z --name-only origin/main...HEAD -- specs/ > FILE` (NUL-separated paths)"
# git's C-style quoting of a path (core.quotePath): "specs/\303\251quipe/x.yaml"
_QUOTED = re.compile(r'^"(?:[^"\\]|\\.)*"$')
_ESCAPE = re.compile(rb"\\([0-7]{3}|.)")
_ESCAPES = {b"a": b"\a", b"b": b"\b", b"t": b"\t", b"n": b"\n", b"v": b"\v", b"f": b"\f", b"r": b"\r"}


def read_changed(path: Path) -> list[str]:
    """The changed paths as `git diff -z --name-only` writes them (NUL-separated), or one a line as git prints them
    without -z (quoted when they hold non-ASCII, quotes or control characters: unquoted here)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"the list of changed files {files.display(path)} does not exist", hint=HINT) from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the list of changed files {files.display(path)}: {exc}", hint=HINT) from None
    if "\x00" in text:
        return [name for name in text.split("\x00") if name]
    return [_unquote(line) if _QUOTED.match(line) else line for line in text.splitlines()]


def _unquote(line: str) -> str:
    """Undo git's quoting: octal bytes and C escapes inside double quotes."""
    decoded = _ESCAPE.sub(lambda m: _byte(m.group(1)), line[1:-1].encode())
    return decoded.decode("utf-8", "replace")  # shown only: a name that is not UTF-8 is never a spec


def _byte(escape: bytes) -> bytes:
    return bytes([int(escape, 8)]) if len(escape) == 3 else _ESCAPES.get(escape, escape)


def render(
    plan: Plan, specs: Sequence[BackfillSpec], changed: Sequence[str], airflow: Capabilities | None = None
) -> str:
    notes = {spec.name: SpecNote(spec.ticket, spec.reason) for spec in specs}
    return pr_comment(plan, changed, notes, airflow=airflow)
