"""The PR comment of the golden plan (every kind of item and finding) stays byte-identical:
tests/core/render/golden/pr-comment*.md were rendered before the comment took the typed Plan (from the plan's JSON, at
2ad8938)."""

from __future__ import annotations

from pathlib import Path

from controller.core.render.pr_comment import SpecNote, pr_comment
from tests.core.render.test_render_golden import complete_plan, plan

GOLDEN = Path(__file__).parent / "golden"
NOTES = {"new-one": SpecNote("CHG-1", "Fix the | rounding <b>"), "big": SpecNote("CHG-2", "too big")}
CHANGED = [
    "specs/new-one.yaml",
    "specs/big.yaml",
    "specs/queued-two.yaml",
    "specs/gone.yaml",
    "specs/policy.yaml",
    "specs/x.md",
]


def test_the_pr_comment_of_the_golden_plan_is_unchanged() -> None:
    assert pr_comment(plan(), CHANGED, NOTES) == (GOLDEN / "pr-comment.md").read_text(encoding="utf-8")
    complete = pr_comment(complete_plan(), ["specs/running.yaml"], {})
    assert complete == (GOLDEN / "pr-comment-complete.md").read_text(encoding="utf-8")
