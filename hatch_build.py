"""Build hook: records the commit this package is built from as `controller/_build.py`, so that `backfillctl init`
pins the reusable workflows and the pre-commit hook to that exact commit (a full SHA, never a movable tag).

Built from a git checkout (pip from a git URL, `python -m build`, scripts/release) the file is generated beside the
build, never in the tree; the sdist carries it, so a wheel built from the sdist (no .git) keeps it. An editable
install gets none: `init` then asks git for the checkout's HEAD itself (controller/commands/init.py).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

RECORD = "controller/_build.py"


class BuildRecordHook(BuildHookInterface):
    PLUGIN_NAME = "custom"
    _folder: Path | None = None

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "editable":
            return
        root = Path(self.root).resolve()
        commit = _commit(root)
        if commit is None:  # an unpacked sdist carries the record as an ordinary file (or, outside git, has none)
            return
        self._folder = Path(tempfile.mkdtemp(prefix="backfillctl-build-"))
        record = self._folder / "_build.py"
        record.write_text(render(*commit), encoding="utf-8")
        build_data["force_include"][str(record)] = RECORD

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)


def render(sha: str, dirty: bool) -> str:
    return (
        '"""Written by the build (hatch_build.py): the commit this package was built from."""\n\n'
        f'COMMIT = "{sha}"\nDIRTY = {dirty!r}  # built from a tree with uncommitted changes to tracked files\n'
    )


def _commit(root: Path) -> tuple[str, bool] | None:
    """(HEAD's SHA, whether tracked files differ from it) when `root` is the top of a git checkout."""
    top = _git(root, "rev-parse", "--show-toplevel")
    if top is None or Path(top).resolve() != root:  # no git, or a folder inside some other repository
        return None
    sha = _git(root, "rev-parse", "--verify", "HEAD^{commit}")
    if sha is None or len(sha) != 40:
        return None
    status = _git(root, "status", "--porcelain", "--untracked-files=no")
    return sha, bool(status)


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, check=False, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip() if done.returncode == 0 else None
