"""`backfillctl init DIR`: write a new specs repository from the starter templates (core/documents/starter.py),
pinned to the commit this backfillctl was built from."""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path

import controller
from controller import __version__
from controller.adapters import files
from controller.adapters.gitsource import GitSource
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
    outside = [p for p, _ in planned if not _inside(p, target)]
    if outside:  # a symlinked `.github` or `specs` would write elsewhere: every file stays under the target
        raise UsageError(
            f"not written: {files.display(outside[0])} leads outside {files.display(target)} (a symbolic link on the "
            "way)",
            hint="init writes only inside the folder it is given; remove the link, or init into another folder",
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


def _inside(path: Path, target: Path) -> bool:
    """`path`'s nearest existing folder, links resolved, is the target or below it (a target that does not exist yet
    has nothing in it that could lead out)."""
    if not target.exists():
        return True
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder.resolve().is_relative_to(target.resolve())


_WRITE_HINT = "make the folder writable (or choose another), then run init again with --force"


@dataclass(frozen=True, slots=True)
class Pin:
    """The commit of backfillctl that `init` pins the workflows and the pre-commit hook to, and where it came from."""

    commit: str
    version: str
    source: str  # what the user is told: "the package" (recorded at build time) or the checkout's HEAD
    dirty: bool = False  # the package was built from a tree whose tracked files differed from `commit`


def own_pin() -> Pin:
    """The full SHA this backfillctl was built from (controller/_build.py, written by hatch_build.py), or the HEAD
    of the checkout it runs from (an editable install); a usage error saying how to pass --ref when there is none."""
    try:
        record = importlib.import_module("controller._build")
    except ImportError:
        record = None
    if record is not None:
        return Pin(str(record.COMMIT), __version__, "the package (recorded when it was built)", bool(record.DIRTY))
    checkout = Path(controller.__file__).resolve().parent.parent
    source = GitSource(checkout)
    head = source.head() if source.available and source.root == checkout else None
    if head is not None and (checkout / "pyproject.toml").is_file():
        return Pin(head, __version__, f"the HEAD of the checkout {checkout}")
    raise UsageError(
        f"cannot pin the workflows: this backfillctl {__version__} does not know the commit it was built from "
        "(a wheel built outside git, or a copy without .git)",
        hint="pass --ref with the full commit SHA of backfillctl that your workflows should run (`git rev-parse "
        "HEAD` in its clone), or install backfillctl from git or from the wheel scripts/release builds",
    )


def pin_note(options: StarterOptions, pin: Pin | None) -> str:
    """What the files are pinned to, from where, and how to move the pin (the team README's "Upgrading")."""
    if pin is None:
        shown = f"pinned to {options.ref}, as given"
        if not options.pinned_to_commit:
            shown += " (not a full commit SHA: a tag or a branch can be moved to other code)"
    else:
        shown = f"pinned to {pin.commit} (backfillctl {pin.version}), from {pin.source}"
        if pin.dirty:
            shown += ", built with uncommitted changes: that commit is not all of the code you ran"
        shown += f"; {options.workflows_repo} must hold that commit"
    return f"{shown}; to upgrade: README.md, {UPGRADING}\n"


UPGRADING = '"Upgrading backfillctl"'
