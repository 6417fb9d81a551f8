"""The reconcile's result for the pull requests behind it (`core.render.pr_result`)."""

from __future__ import annotations

from controller.core.model.binding import Phase
from controller.core.plan.values import Item, Kind, Plan
from controller.core.render.pr_result import MARKER, pr_comments, result_entries, result_json


def test_each_spec_is_told_to_its_pull_request_and_an_unrecorded_one_to_this_runs_changes() -> None:
    plan = Plan(
        (
            Item("mine", "d", Kind.NOOP, Phase.RUNNING, "running", 7),
            Item("queued", "d", Kind.WAIT, Phase.QUEUED, "queued behind mine (backfill #7)"),
            Item("refused", "e", Kind.REFUSE, Phase.BLOCKED, "<b>over</b> | expected_runs 3"),
            Item("fine", "f", Kind.NOOP, Phase.SUCCEEDED, "3 run(s) succeeded", 9),
        )
    )
    applied = [(Item("mine", "d", Kind.CREATE, Phase.RUNNING), "created")]
    entries = result_entries(plan, applied, {"mine": 40, "queued": None}, "https://af.example")
    assert [(e.spec, e.outcome.value, e.change) for e in entries] == [
        ("mine", "created", 40),
        ("queued", "queued", None),
        ("refused", "refused", None),
    ]
    assert entries[0].link == "https://af.example/dags/d/runs?run_type=backfill"
    comments = pr_comments(entries, [41, 42])
    assert list(comments) == [40, 41, 42]
    assert "`mine`" in comments[40]
    assert "`queued`" not in comments[40]
    assert comments[41] == comments[42]
    assert comments[41].splitlines()[0] == MARKER
    assert "| `refused` | refused | Blocked | — | \\<b\\>over\\</b\\> \\| expected\\_runs 3 |" in comments[41]
    assert pr_comments(entries[:1], []) == {40: comments[40]}  # nothing unrecorded, no change: only its own
    assert result_json("abc", [42, 41], entries)["changes"] == [41, 42]
