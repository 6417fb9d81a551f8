"""`backfillctl plan --pr-comment FILE`: the plan as the pull request's sticky comment (reads FILE)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from controller.adapters import files
from controller.core.plan import Plan
from controller.core.pr_comment import SpecNote, changed_specs, pr_comment
from controller.core.spec import BackfillSpec
from controller.errors import ConfigError

__all__ = ["changed_specs", "read_changed", "render"]
HINT = "write it with `git diff --name-only origin/main...HEAD -- specs/ > FILE` (one path a line)"


def read_changed(path: Path) -> list[str]:
    """The changed paths, one a line, as `git diff --name-only` prints them."""
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        raise ConfigError(f"the list of changed files {files.display(path)} does not exist", hint=HINT) from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot read the list of changed files {files.display(path)}: {exc}", hint=HINT) from None


def render(plan: Plan, specs: Sequence[BackfillSpec], changed: Sequence[str]) -> str:
    notes = {spec.name: SpecNote(spec.ticket, spec.reason) for spec in specs}
    return pr_comment(plan.as_json(), changed, notes)
