"""The PR's sticky plan comment: exact Markdown, escaping of spec and server text, GitHub's size limit."""

from __future__ import annotations

import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from controller.cli import main
from controller.core.model.binding import Phase
from controller.core.model.spec import BackfillSpec, Execution
from controller.core.model.stages import Promotion, Publish, Rehearsal, Slice, Verify
from controller.core.plan.values import Finding, FindingKind, Item, Kind, Plan
from controller.core.render.pr_comment import LIMIT, MARKER, SpecNote, code, escape, pr_comment
from tests.commands.reconcile.harness import Bench, in_process
from tests.core.plan.test_plan import spec
from tests.fakes.airflow import FakeAirflow

MARCH1 = datetime(2022, 3, 1, tzinfo=UTC)


def walk_spec(name: str) -> BackfillSpec:
    return spec(
        name,
        dag="demo_daily",
        from_date=MARCH1,
        to_date=MARCH1 + timedelta(days=2),
        approvers=("bob", "carol"),
        ticket="CHG-4242",
        expected_runs=3,
    )


def item(spec_name: str, dag_id: str, kind: Kind, phase: Phase, **extra: Any) -> Item:
    return Item(spec_name, dag_id, kind, phase, **extra)


def plan(*items: Item, findings: tuple[Finding, ...] = ()) -> Plan:
    return Plan(tuple(items), findings)


WALK = item(
    "walk-demo",
    "demo_daily",
    Kind.CREATE,
    Phase.PENDING,
    runs_to_create=3,
    runs_in_range=3,
    first_date=MARCH1,
    last_date=MARCH1 + timedelta(days=2),
    source=walk_spec("walk-demo"),
)
QUEUED = item("walk-more", "demo_daily", Kind.WAIT, Phase.QUEUED, reason="queued behind walk-demo")
OLD = item("old-fix", "orders_daily", Kind.NOOP, Phase.SUCCEEDED, reason="finished", backfill_id=7)
OTHER = item("other-fix", "orders_daily", Kind.NOOP, Phase.SUCCEEDED, reason="finished", backfill_id=8)
NOTES = {"walk-demo": SpecNote("CHG-4242", "Walk-through of the pull-request workflow.")}


def test_changed_specs_first_with_ticket_and_reason_then_one_line_for_the_rest() -> None:
    unmanaged = Finding(FindingKind.UNMANAGED, "demo_daily", "backfill #9 is active and not managed", None, 9)
    elsewhere = Finding(FindingKind.DRIFT, "orders_daily", "paused", "old-fix", 7)
    body = pr_comment(
        plan(OLD, WALK, OTHER, QUEUED, findings=(unmanaged, elsewhere)),
        ["specs/walk-demo.yaml", "specs/policy.yaml", "specs/gone.yml", "specs/README.md", ""],
        NOTES,
    )
    assert body == (
        "<!-- backfillctl-plan -->\n"
        "### backfillctl plan\n"
        "\n"
        "**Specs this pull request adds or changes (1)**\n"
        "\n"
        "| | spec | DAG | action | runs | phase | ticket | reason |\n"
        "|---|---|---|---|---|---|---|---|\n"
        "| `+` | `walk-demo` | `demo_daily` | create | 3 of 3 | Pending | CHG-4242 | "
        "Walk-through of the pull-request workflow. |\n"
        "\n"
        "<details><summary><code>walk-demo</code>: create</summary>\n"
        "\n"
        "- reason: Walk-through of the pull-request workflow.\n"
        "- `approvers`: bob, carol\n"
        "- `expected_runs`: 3\n"
        "- `from_date`: 2022-03-01T00:00:00Z\n"
        "- `max_active_runs`: 2\n"
        "- `reprocess_behavior`: none\n"
        "- `run_backwards`: false\n"
        "- `state`: active\n"
        "- `ticket`: CHG-4242\n"
        "- `to_date`: 2022-03-03T00:00:00Z\n"
        "- first and last dates to run: 2022-03-01T00:00:00Z … 2022-03-03T00:00:00Z\n"
        "\n"
        "</details>\n"
        "\n"
        "- `gone`: not in the plan: the file was deleted or moved. Deleting a spec never cancels its backfill: "
        "an unfinished one is reported as orphaned after the merge.\n"
        "- `specs/policy.yaml`: the policy changes; it applies to every spec once merged.\n"
        "- `specs/README.md`: changed, not a spec.\n"
        "\n"
        "**Findings**\n"
        "\n"
        "- **unmanaged** on `demo_daily`: backfill \\#9 is active and not managed\n"
        "\n"
        "Other specs (3): 1 queued, 2 in sync; 1 other finding. Run `backfillctl plan` for the full plan.\n"
        "\n"
        "**Plan: 1 to create, 0 to pause, 0 to cancel, 1 queued, 0 blocked.**\n"
    )


def test_a_pr_that_changes_no_spec() -> None:
    unpaused = [item(f"u{n}", "e", Kind.UNPAUSE, Phase.RUNNING) for n in (1, 2)]
    adopted = item("a", "f", Kind.ADOPT, Phase.RUNNING)
    assert pr_comment(plan(OLD, WALK, QUEUED, *unpaused, adopted), [], {}) == (
        f"{MARKER}\n### backfillctl plan\n\nThis pull request changes no spec.\n\n"
        "Other specs (6): 1 to create, 1 queued, 2 to unpause, 1 already in Airflow (adopted, nothing created), "
        "1 in sync. Run `backfillctl plan` for the full plan.\n\n"
        "**Plan: 1 to create, 0 to pause, 0 to cancel, 1 queued, 0 blocked, 2 to unpause, "
        "1 already in Airflow (adopted, nothing created).**\n"
    )


def test_an_incomplete_plan_says_so_first_with_every_unobserved_dag() -> None:
    unobserved = Finding(FindingKind.INCOMPLETE, "orders_daily", "DAG orders_daily was not fully observed: HTTP 503")
    body = pr_comment(plan(OLD, WALK, QUEUED, findings=(unobserved,)), ["specs/walk-demo.yaml"], {})
    assert body.startswith(
        f"{MARKER}\n### backfillctl plan\n\n"
        "**Incomplete plan**: not every DAG could be observed in Airflow (findings below), so it shows less than "
        "reconcile would do. Fix the cause and run the check again.\n\n"
        "**Specs this pull request adds or changes (1)**\n"
    )
    assert body.endswith(
        "**Findings**\n"
        "\n"
        "- **observation-incomplete** on `orders_daily`: DAG orders\\_daily was not fully observed: HTTP 503\n"
        "\n"
        "Other specs (2): 1 queued, 1 in sync. Run `backfillctl plan` for the full plan.\n"
        "\n"
        "**Plan: 1 to create, 0 to pause, 0 to cancel, 1 queued, 0 blocked.**\n"
    )
    assert "Incomplete" not in pr_comment(plan(WALK), ["specs/walk-demo.yaml"], {})


def test_a_planning_error_is_marked_in_the_details() -> None:
    broken = item("walk-demo", "demo_daily", Kind.WAIT, Phase.PENDING, error=True, reason="dry run failed: HTTP 500")
    body = pr_comment(plan(broken), ["specs/walk-demo.yaml"], {})
    assert "| `…` | `walk-demo` | `demo_daily` | queued |  | Pending |  |  |\n" in body
    assert "- error: dry run failed: HTTP 500\n" in body


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("a | b", "a \\| b"),
        ("<img src=x onerror=alert(1)>", "\\<img src=x onerror=alert\\(1\\)\\>"),
        ("</details><details open>", "\\</details\\>\\<details open\\>"),
        ("run `rm -rf /`", "run \\`rm -rf /\\`"),
        ("line one\nline two\r\n\tthree", "line one line two three"),
        ("**bold** _it_ [x](y) ~~s~~", "\\*\\*bold\\*\\* \\_it\\_ \\[x\\]\\(y\\) \\~\\~s\\~\\~"),
        ("#1 !x &amp; \\", "\\#1 \\!x \\&amp; \\\\"),
        ("<!-- backfillctl-plan -->", "\\<\\!-- backfillctl-plan --\\>"),
    ],
)
def test_escape(text: str, expected: str) -> None:
    assert escape(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [("orders_daily", "`orders_daily`"), ("specs/a.yml", "`specs/a.yml`"), ("x`y", "x\\`y"), ("a|b", "a\\|b")],
)
def test_code_spans_only_for_plain_identifiers(text: str, expected: str) -> None:
    assert code(text) == expected


def test_spec_and_server_text_cannot_break_the_table_or_open_html() -> None:
    hostile = item(
        "x",
        "dag|`<b>`",
        Kind.BLOCKED,
        Phase.BLOCKED,
        reason="Airflow said: <script>alert(1)</script>\n\n## heading",
        error=True,
        source=spec("x", approvers=("a|b", "<i>")),
    )
    note = SpecNote("CHG-1 | x", "Because `reasons` | <details open>\nsecond line")
    body = pr_comment(plan(hostile), ["specs/x.yaml"], {"x": note})
    row = next(line for line in body.splitlines() if line.startswith("| `!`"))
    assert row == (
        "| `!` | `x` | dag\\|\\`\\<b\\>\\` | blocked | | Blocked | CHG-1 \\| x | "
        "Because \\`reasons\\` \\| \\<details open\\> second line |"
    ).replace("| | Blocked", "|  | Blocked")
    assert len(re.findall(r"(?<!\\)\|", row)) == 9  # eight cells, no more
    assert "- `approvers`: a\\|b, \\<i\\>\n" in body
    assert "- error: Airflow said: \\<script\\>alert\\(1\\)\\</script\\> \\#\\# heading\n" in body
    assert "<script>" not in body
    assert body.count("<details>") == body.count("</details>") == 1


def test_long_reasons_are_cut_in_the_table_and_kept_in_the_details() -> None:
    reason = "word " * 100
    body = pr_comment(plan(WALK), ["specs/walk-demo.yaml"], {"walk-demo": SpecNote("CHG-1", reason)})
    row = next(line for line in body.splitlines() if line.startswith("| `+`"))
    assert row.endswith(" | CHG-1 | " + ("word " * 100)[:199].rstrip() + "… |")
    assert len(("word " * 100)[:199].rstrip() + "…") == 200  # REASON_CELL
    assert f"- reason: {reason.strip()}\n" in body


def many(count: int) -> tuple[Plan, list[str], dict[str, SpecNote]]:
    items = [
        item(f"spec-{n:04d}", "demo_daily", Kind.CREATE, Phase.PENDING, runs_to_create=1, source=walk_spec("w"))
        for n in range(count)
    ]
    notes = {i.spec: SpecNote("CHG-1", "x" * 150) for i in items}
    return plan(*items), [f"specs/{i.spec}.yaml" for i in items], notes


def test_a_huge_plan_is_cut_to_githubs_limit_keeping_the_summary() -> None:
    big, paths, notes = many(400)
    body = pr_comment(big, paths, notes)
    assert len(body) <= LIMIT == 65_536
    assert len(pr_comment(big, paths, notes, limit=10**7)) > LIMIT
    assert body.startswith(f"{MARKER}\n### backfillctl plan\n\n**Specs this pull request adds or changes (400)**\n")
    shown = body.count("\n| `+` | ")
    assert 0 < shown < 400
    assert "<details>" not in body
    assert body.endswith(
        f"_Cut to fit GitHub's 65,536-character comment limit: the table shows {shown} of 400 changed specs, "
        "0 with details. Run `backfillctl plan` for the full plan._\n"
        "\n"
        "No other specs. Run `backfillctl plan` for the full plan.\n"
        "\n"
        "**Plan: 400 to create, 0 to pause, 0 to cancel, 0 queued, 0 blocked.**\n"
    )


def test_the_limit_is_exact() -> None:
    big, paths, notes = many(3)
    full = pr_comment(big, paths, notes, limit=10**6)
    assert pr_comment(big, paths, notes, limit=len(full)) == full
    cut = pr_comment(big, paths, notes, limit=len(full) - 1)
    assert len(cut) <= len(full) - 1
    assert cut.split("\n\n<details>")[0] == full.split("\n\n<details>")[0]  # the rows fit, the details do not
    assert cut.count("<details>") == 2
    assert cut.endswith(
        "</details>\n"
        "\n"
        "_Cut to fit GitHub's 65,536-character comment limit: the table shows 3 of 3 changed specs, 2 with details. "
        "Run `backfillctl plan` for the full plan._\n"
        "\n"
        "No other specs. Run `backfillctl plan` for the full plan.\n"
        "\n"
        "**Plan: 3 to create, 0 to pause, 0 to cancel, 0 queued, 0 blocked.**\n"
    )


def test_plan_pr_comment_needs_markdown(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "--format", "json", "--pr-comment", "changed.txt"]) == 2
    assert "--pr-comment needs --format markdown" in capsys.readouterr().err


def test_plan_pr_comment_names_a_missing_file_before_contacting_airflow(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BACKFILLCTL_AIRFLOW_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("BACKFILLCTL_STORE_URL", f"sqlite:///{tmp_path}/none.db")
    assert main(["plan", "--format", "markdown", "--pr-comment", "changed.txt"]) == 1
    assert capsys.readouterr().err == (
        "error: the list of changed files changed.txt does not exist\n"
        "  hint: write it with `git diff -z --name-only origin/main...HEAD -- specs/ > FILE` (NUL-separated paths)\n"
    )
    assert not (tmp_path / "none.db").exists()


def staged_spec(name: str, **extra: Any) -> BackfillSpec:
    """The walk-through spec with a rehearsal, a verification, a publish, the tables it rewrites and its rollback."""
    fields: dict[str, Any] = {
        "rehearsal": Rehearsal(
            (Slice(MARCH1, MARCH1), Slice(MARCH1 + timedelta(days=2, hours=6), MARCH1 + timedelta(days=2, hours=6))), 2
        ),
        "verify": Verify("orders_verify", None, 30, "check_rows"),
        "publish": Publish("orders_publish"),
        "writes": ("warehouse.orders", "bi | revenue <b>"),
        "rollback": "restore snapshot `orders_2022q1`\n| see runbook [R-12](http://x)",
        "execution": Execution(canary_runs=1, promotion=Promotion.ON_VERIFICATION),
    }
    fields.update(extra)
    return replace(walk_spec(name), **fields)


def test_writes_and_rollback_lead_and_the_stages_are_one_line_each_in_the_details_all_escaped() -> None:
    staged = replace(WALK, spec="staged", source=staged_spec("staged"))
    body = pr_comment(plan(staged), ["specs/staged.yaml"], {})
    assert (
        "**Tables these specs rewrite, and how to undo it:**\n"
        "\n"
        "- `staged`: rewrites `warehouse.orders`, bi \\| revenue \\<b\\>; rollback: restore snapshot "
        "\\`orders\\_2022q1\\` \\| see runbook \\[R-12\\]\\(http://x\\)\n"
        "\n"
        "**Specs this pull request adds or changes (1)**\n"
    ) in body
    assert (
        "- `to_date`: 2022-03-03T00:00:00Z\n"
        "- rehearsal (attempt 2), 2 slices: 2022-03-01 … 2022-03-01, 2022-03-03T06:00:00Z … 2022-03-03T06:00:00Z\n"
        "- verify: `orders_verify` (timeout 30 min, result task `check_rows`); its pass after the canary continues "
        "the spec\n"
        "- publish: `orders_publish`, once, after the final verification passed\n"
        "- first and last dates to run:"
    ) in body


def test_a_spec_that_rewrites_tables_without_a_rollback_note_says_so_and_long_lists_are_counted() -> None:
    tables = tuple(f"t{n}" for n in range(12))
    quiet = replace(
        WALK,
        source=staged_spec("walk-demo", writes=tables, rollback=None, rehearsal=None, verify=None, publish=None),
    )
    body = pr_comment(plan(quiet), ["specs/walk-demo.yaml"], {})
    shown = ", ".join(f"`t{n}`" for n in range(10))
    assert f"- `walk-demo`: rewrites {shown} and 2 more; no rollback note\n" in body
    assert [line for line in body.splitlines() if line.startswith(("- rehearsal", "- verify", "- publish"))] == []


def test_a_spec_without_writes_or_rollback_adds_nothing() -> None:
    body = pr_comment(plan(WALK), ["specs/walk-demo.yaml"], NOTES)
    assert "rewrite" not in body
    assert "rollback" not in body


def test_a_long_rollback_note_is_cut_to_300_characters() -> None:
    note = "restore " + "x" * 400
    body = pr_comment(
        plan(replace(WALK, source=staged_spec("walk-demo", writes=(), rollback=note))), ["specs/walk-demo.yaml"], {}
    )
    line = next(line for line in body.splitlines() if line.startswith("- `walk-demo`: rollback: "))
    assert line == f"- `walk-demo`: rollback: restore {'x' * 291}…"


def test_under_no_store_the_applied_specs_read_as_already_in_airflow_not_as_adopts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = Bench(tmp_path, fake=FakeAirflow())
    try:
        assert bench.fake is not None
        bench.fake.scheduler_running = False  # the applied specs stay Running
        bench.spec("daily-fix", dag="demo_daily")
        bench.spec("ledger-fix", dag="demo_finance_ledger")
        assert [(i.spec, o) for i, o in bench.run().applied] == [("daily-fix", "created"), ("ledger-fix", "created")]
        bench.spec("tz-fix", dag="demo_tz")  # the pull request's spec
        (tmp_path / "changed.txt").write_text("specs/tz-fix.yaml\0")
        in_process(bench, monkeypatch)
        monkeypatch.chdir(tmp_path)
        args = ["plan", "--no-store", "--format", "markdown", "--pr-comment", "changed.txt"]
        assert main(args) == 0
        assert capsys.readouterr().out.endswith(
            "Other specs (2): 2 already in Airflow (adopted, nothing created). Run `backfillctl plan` for the full "
            "plan.\n"
            "\n"
            "**Plan: 1 to create, 0 to pause, 0 to cancel, 0 queued, 0 blocked, 2 already in Airflow (adopted, nothing "
            "created).**\n"
        )
    finally:
        bench.close()
