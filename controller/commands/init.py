"""`backfillctl init DIR`: write a new specs repository from the starter templates (core/documents/starter.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from controller.adapters import files
from controller.core.documents.starter import StarterOptions, starter_files
from controller.errors import UsageError


@dataclass(frozen=True, slots=True)
class Written:
    path: Path
    replaced: bool  # an existing file overwritten (only with --force)


def init_repository(target: Path, options: StarterOptions, *, force: bool = False) -> list[Written]:
    """Every starter file under `target`; nothing is written when one exists already (unless `force`)."""
    problems = options.problems()
    if problems:
        option, problem = problems[0]
        raise UsageError(f"{option}: {problem}", hint=f"`backfillctl init --help` says what {option} takes")
    planned = [(target / relative, text) for relative, text in starter_files(options)]
    existing = [path for path, _ in planned if path.exists() or path.is_symlink()]
    if existing and not force:
        shown = ", ".join(files.display(p) for p in existing)
        raise UsageError(
            f"not written: {len(existing)} file(s) exist already: {shown}",
            hint="nothing was changed; pass --force to overwrite them, or init into an empty folder",
        )
    not_files = [p for p in existing if p.is_symlink() or not p.is_file()]
    if not_files:  # --force replaces files, never follows a link or empties a folder
        raise UsageError(
            f"not written: {files.display(not_files[0])} is not a regular file",
            hint="move it away and run init again; nothing was changed",
        )
    written: list[Written] = []
    for path, text in planned:
        replaced = path in existing
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as exc:
            done = f"; written before it: {', '.join(files.display(w.path) for w in written)}" if written else ""
            raise UsageError(f"cannot write {files.display(path)}: {exc.strerror}{done}", hint=_WRITE_HINT) from None
        written.append(Written(path, replaced))
    return written


_WRITE_HINT = "make the folder writable (or choose another), then run init again with --force"
