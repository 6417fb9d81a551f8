"""`select`: a `completed` spec narrowed to the intervals other code made. Validated at the field (only with
`completed`, exactly one target, refused on a release without run_on_latest_version), planned with its selection,
and Blocked at reconcile (this release does not execute it) without any backfill created."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from packaging.version import Version

from controller.cli import main
from controller.core.checks.dags import check_against_release
from controller.core.checks.validation import check_spec
from controller.core.model.capabilities import capabilities_of
from controller.core.model.guards import Guard, GuardKind
from controller.core.model.policy import DEFAULT_POLICY
from controller.core.model.spec import Select
from controller.core.render.plan import plan_json, plan_markdown, plan_text
from controller.core.render.pr_comment import pr_comment
from tests.cli.test_cli_validate import SPEC
from tests.commands.reconcile.harness import Bench, fake
from tests.core.specs import loaded, text
from tests.fakes.airflow import FakeAirflow

NOW = datetime(2026, 12, 1, tzinfo=UTC)
NEEDS_COMPLETED = (
    "select needs reprocess_behavior: completed (this spec says failed): the intervals whose latest run succeeded "
    "on other code are re-run only by a completed backfill"
)

NEW_TARGET = (  # what a code-changed pause tells to do: select cannot change once applied
    "a new target is a new spec (select cannot change once applied): cancel this one (state: cancelled) and add a "
    "spec selecting the new target"
)


def _errors(body: str) -> list[tuple[str, tuple[object, ...]]]:
    found = check_spec(loaded(body), DEFAULT_POLICY, NOW)
    return [(d.message, d.location.path) for d in found if "select" in d.message and d.is_error]


def test_select_parses_to_its_target() -> None:
    assert loaded(text(reprocess="completed") + "select: {code_version: 4}\n").spec.select == Select(4)
    assert loaded(text(reprocess="completed") + "select: {bundle_version: abc123}\n").spec.select == Select(
        None, "abc123"
    )
    assert loaded(text(reprocess="completed")).spec.select is None


def test_select_refuses_run_on_latest_version_false_and_a_drain_at_their_fields() -> None:
    body = text(reprocess="completed") + "select: {code_version: 4}\n"
    assert _errors(body + "run_on_latest_version: false\n") == [
        (
            "run_on_latest_version: false contradicts select: a selected interval re-run on the code it first ran "
            "with never moves to the target",
            ("run_on_latest_version",),
        )
    ]
    assert _errors(body + "run_on_latest_version: true\n") == []
    found = check_spec(loaded(body + "drain_dag: true\n"), DEFAULT_POLICY, NOW)
    assert (
        "drain_dag cannot be used with select: each sub-range's backfill would pause the DAG when it ends, and the "
        "paused DAG would block the next",
        ("drain_dag",),
    ) in [(d.message, d.location.path) for d in found if d.is_error]


def test_select_only_with_completed_at_the_field() -> None:
    assert _errors(text(reprocess="completed") + "select: {code_version: 4}\n") == []
    assert _errors(text(reprocess="failed") + "select: {code_version: 4}\n") == [(NEEDS_COMPLETED, ("select",))]
    assert _errors(text(reprocess="none") + "select: {bundle_version: abc}\n")[0][0].startswith(
        "select needs reprocess_behavior: completed (this spec says none)"
    )


@pytest.mark.parametrize(
    ("select", "said"),
    [
        (
            "{code_version: 4, bundle_version: abc}",
            "specs/good.yaml:12:9: $.select: {'code_version': 4, 'bundle_version': 'abc'} has too many properties",
        ),
        ("{}", "$.select: {} should be non-empty"),
        ("{code_version: 0}", "$.select.code_version: 0 is less than the minimum of 1"),
        (
            "{version: 4}",
            "specs/good.yaml:12:10: $.select.version: unknown field 'version'\n  hint: did you mean 'code_version'?",
        ),
    ],
)
def test_the_schema_takes_exactly_one_target(
    select: str, said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BACKFILLCTL_SPECS_DIR", "specs")
    (tmp_path / "specs").mkdir()
    path = tmp_path / "specs" / "good.yaml"
    path.write_text(SPEC.format(name="good", to="2025-01-07", reprocess="completed") + "select: {code_version: 2}\n")
    assert main(["validate", "specs/good.yaml"]) == 0, capsys.readouterr().out
    capsys.readouterr()
    path.write_text(SPEC.format(name="good", to="2025-01-07", reprocess="completed") + f"select: {select}\n")
    assert main(["validate", "specs/good.yaml"]) == 1
    assert said in capsys.readouterr().out


@pytest.mark.parametrize(("version", "refused"), [("3.1.5", True), ("3.1.6", False), ("3.3.2", False)])
def test_validate_with_airflow_refuses_select_on_a_release_without_run_on_latest_version(
    version: str, refused: bool
) -> None:
    item = loaded(text(reprocess="completed") + "select: {code_version: 2}\n")
    found = [(d.message, d.location.path) for d in check_against_release(item, capabilities_of(Version(version)))]
    assert found == (
        [
            (
                "select needs Airflow 3.1.6 or newer (run_on_latest_version); Airflow 3.1.5 re-runs each run on the "
                "DAG version it first ran with, so no selected interval would move to the target (remove select, or "
                "upgrade Airflow)",
                ("select",),
            )
        ]
        if refused
        else []
    )


# --- planned and Blocked against the fake Airflow --------------------------------------------------------


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[Bench]:
    b = Bench(tmp_path, fake=FakeAirflow())
    yield b
    b.close()


def _history(bench: Bench, versions: dict[int, int | None], failed: tuple[int, ...] = ()) -> None:
    """demo_daily's January 1-7 run by a first spec, then each day's run given its DAG version (None: no run)."""
    bench.spec("history", end="2025-01-07")
    bench.until_terminal()
    runs = fake(bench).runs
    for (dag_id, when), run in list(runs.items()):
        if dag_id != "demo_daily":
            continue
        version = versions.get(when.day)
        if version is None:
            del runs[(dag_id, when)]
            continue
        run["dag_versions"] = [{"version_number": version, "bundle_version": None}]
        run["state"] = "failed" if when.day in failed else "success"


def _creates(bench: Bench) -> list[dict[str, Any]]:
    return [body for method, path, body in fake(bench).bodies if (method, path) == ("POST", "/api/v2/backfills")]


def test_a_select_spec_runs_its_sub_ranges_one_after_the_other_and_never_an_interval_on_target(
    bench: Bench,
) -> None:
    _history(bench, {1: 1, 2: 2, 3: 2, 4: 1, 5: None, 6: 2, 7: 2}, failed=(6,))
    before = len(_creates(bench))
    bench.spec("fix", end="2025-01-07", reprocess="completed", select="{code_version: 2}", mar=2)
    first = bench.run()
    item = next(i for i in first.plan.items if i.spec == "fix")
    assert (item.kind.value, item.reason, item.chunk) == ("create", "chunk 1: 1 run(s)", (1, 2))
    assert item.selection is not None
    assert item.selection.text() == (
        "re-runs 4 of 7 intervals in 2 backfills: 2 on version 1 or older; 1 failed; 1 never ran; "
        "3 already on version 2"
    )
    assert item.facts["selection"]["sub_ranges"] == [
        ["2025-01-01T00:00:00+00:00", "2025-01-01T00:00:00+00:00"],
        ["2025-01-04T00:00:00+00:00", "2025-01-06T00:00:00+00:00"],
    ]
    shown = item.selection.text()
    assert f"    {shown}" in plan_text(first.plan).splitlines()
    assert f"- {shown}" in plan_markdown(first.plan).splitlines()
    assert f"- {shown}" in pr_comment(first.plan, ["specs/fix.yaml"], {}).splitlines()
    listed = json.loads(plan_json(first.plan))["items"]
    assert next(i for i in listed if i["spec"] == "fix")["facts"]["selection"]["selected"] == 4
    last = bench.until_terminal()
    assert next(i for i in last.plan.items if i.spec == "fix").phase.value == "Succeeded"
    made = [
        (b["from_date"], b["to_date"], b["reprocess_behavior"], b["max_active_runs"], b["run_on_latest_version"])
        for b in _creates(bench)[before:]
    ]
    assert made == [
        ("2025-01-01T00:00:00Z", "2025-01-01T00:00:00Z", "completed", 2, True),
        ("2025-01-04T00:00:00Z", "2025-01-06T00:00:00Z", "completed", 2, True),
    ]
    ids = sorted(fake(bench).backfills)[-2:]
    assert [sorted(d.day for d in fake(bench).outcome(i)) for i in ids] == [[1], [4, 5, 6]]  # 2, 3, 7 untouched


def test_a_select_spec_with_every_interval_on_target_succeeds_with_nothing_created(bench: Bench) -> None:
    _history(bench, dict.fromkeys(range(1, 8), 3))
    created = len(_creates(bench))
    bench.spec("fix", end="2025-01-07", reprocess="completed", select="{code_version: 3}")
    item = next(i for i in bench.run().plan.items if i.spec == "fix")
    assert (item.kind.value, item.phase.value) == ("noop", "Succeeded")
    assert item.reason == "nothing to re-run: re-runs 0 of 7 intervals: nothing to re-run; 7 already on version 3"
    assert len(_creates(bench)) == created


def test_more_sub_ranges_than_max_backfills_are_refused_with_the_count(bench: Bench) -> None:
    _history(bench, {1: 1, 2: 2, 3: 1, 4: 2, 5: 1, 6: 2, 7: 1})
    bench.policy(
        """\
        version: 1
        rules:
          - dags: [demo_*]
            max_backfills: 3
        """
    )
    bench.spec("fix", end="2025-01-07", reprocess="completed", select="{code_version: 2}")
    item = next(i for i in bench.run().plan.items if i.spec == "fix")
    assert (item.kind.value, item.phase.value) == ("refuse", "Blocked")
    assert item.reason == (
        "select makes 4 backfills (contiguous sub-ranges of the 4 selected intervals); the policy allows at most 3 "
        "(max_backfills): narrow the range, or raise max_backfills in a reviewed policy change"
    )


def _latest(bench: Bench, number: int) -> None:
    fake(bench).dags["demo_daily"].latest_version = {"version_number": number, "bundle_version": None}


def test_a_select_spec_pauses_while_the_dags_code_is_not_its_target_and_goes_on_once_it_is(bench: Bench) -> None:
    _history(bench, {1: 1, 2: 1, 3: 2, 4: 1}, failed=())
    fake(bench).scheduler_running = False
    _latest(bench, 2)
    bench.spec("fix", end="2025-01-04", reprocess="completed", select="{code_version: 2}")
    assert [(i.spec, o.value) for i, o in bench.run().applied] == [("fix", "created")]
    backfill = max(fake(bench).backfills)
    _latest(bench, 3)  # a deploy while the spec runs
    moved = bench.run()
    item = next(i for i in moved.plan.items if i.spec == "fix")
    why = (
        "the DAG's latest code is DAG version 3, not the reviewed target (version 2): its runs would use code nobody "
        "reviewed for this backfill; " + NEW_TARGET
    )
    assert (item.kind.value, item.phase.value, item.reason, item.guard) == (
        "pause",
        "Paused",
        why,
        Guard(GuardKind.CODE_CHANGED),
    )
    assert [(f.kind, f.message) for f in moved.plan.findings] == [("code-changed", f"spec fix: {why}")]
    assert fake(bench).backfills[backfill]["is_paused"] is True
    _latest(bench, 2)  # the deploy rolled back: the reviewed code is the latest again
    item = next(i for i in bench.run().plan.items if i.spec == "fix")
    assert item.kind.value == "unpause"
    assert fake(bench).backfills[backfill]["is_paused"] is False


def test_a_select_spec_whose_dag_is_past_its_target_is_not_created(bench: Bench) -> None:
    _history(bench, {1: 1, 2: 2})
    _latest(bench, 3)
    before = len(_creates(bench))
    bench.spec("fix", end="2025-01-02", reprocess="completed", select="{code_version: 2}")
    item = next(i for i in bench.run().plan.items if i.spec == "fix")
    assert (item.kind.value, item.phase.value) == ("blocked", "Blocked")
    assert item.reason.startswith("the DAG's latest code is DAG version 3, not the reviewed target (version 2)")
    assert len(_creates(bench)) == before


def test_a_select_spec_whose_selection_is_not_covered_at_its_end_completes_with_failures(bench: Bench) -> None:
    """Its backfills' runs all succeed, but an interval on the target when it was selected was re-run since on older
    code: the selection is not covered, so the spec is not Succeeded, and its record says so once (no Succeeded
    recorded first, nor notified)."""
    _history(bench, {1: 1, 2: 2, 3: 1})
    fake(bench).dags["demo_daily"].version = 2  # the code its backfills' runs run on
    _latest(bench, 2)
    bench.spec("fix", end="2025-01-03", reprocess="completed", select="{code_version: 2}")
    first = next(i for i in bench.run().plan.items if i.spec == "fix")
    assert first.selection is not None
    assert (
        first.selection.text()
        == "re-runs 2 of 3 intervals in 2 backfills: 2 on version 1 or older; 1 already on version 2"
    )
    day_2 = fake(bench).runs[("demo_daily", datetime(2025, 1, 2, tzinfo=UTC))]
    day_2["dag_versions"] = [{"version_number": 1, "bundle_version": None}]  # re-run by hand on the old code
    last = bench.until_terminal()
    item = next(i for i in last.plan.items if i.spec == "fix")
    why = "the selection is not covered: version coverage: 2 of 3 intervals on DAG version 2 (1 other code)"
    assert (item.phase.value, item.reason) == ("CompletedWithFailures", f"2 run(s) succeeded; {why}")
    binding = bench.store.binding("fix")
    assert binding is not None
    assert (binding.phase.value, binding.reason) == ("CompletedWithFailures", f"2 run(s) succeeded; {why}")
    assert binding.coverage is not None
    assert [m.text() for m in binding.coverage.missed] == ["2025-01-02T00:00:00+00:00 (other code: DAG version 1)"]
    ended = [
        (e.entry.outcome, e.entry.message)
        for e in bench.events("fix")
        if e.entry.outcome in ("Succeeded", "CompletedWithFailures")
    ]
    assert ended == [("CompletedWithFailures", f"2 run(s) succeeded; {why}")]


def test_a_policy_that_merges_sub_ranges_joins_the_closest_and_re_runs_the_on_target_days_between(
    bench: Bench,
) -> None:
    _history(bench, {1: 1, 2: 2, 3: 1, 4: 2, 5: 1, 6: 2, 7: 1})  # 1, 3, 5, 7 on old code: 4 sub-ranges
    bench.policy(
        """\
        version: 1
        rules:
          - dags: [demo_*]
            max_backfills: 3
            merge_sub_ranges: true
        """
    )
    before = len(_creates(bench))
    bench.spec("fix", end="2025-01-07", reprocess="completed", select="{code_version: 2}", mar=2)
    item = next(i for i in bench.run().plan.items if i.spec == "fix")
    assert item.selection is not None
    assert item.selection.text() == (
        "re-runs 5 of 7 intervals in 3 backfills: 4 on version 1 or older; 1 on version 2 re-run to join sub-ranges; "
        "2 already on version 2"
    )
    assert (item.kind.value, item.chunk, item.runs_to_create) == ("create", (1, 3), 5)
    bench.until_terminal()
    made = [(b["from_date"][:10], b["to_date"][:10]) for b in _creates(bench)[before:]]
    assert made == [("2025-01-01", "2025-01-03"), ("2025-01-05", "2025-01-05"), ("2025-01-07", "2025-01-07")]


def test_after_a_lost_store_a_select_spec_reads_its_selection_again_and_creates_only_what_is_left(
    bench: Bench,
) -> None:
    _history(bench, {1: 1, 2: 2, 3: 1, 4: 2, 5: 1})  # 1, 3, 5 on old code: 3 sub-ranges
    fake(bench).dags["demo_daily"].version = 2  # the backfills' runs run on the target
    _latest(bench, 2)
    before = len(_creates(bench))
    bench.spec("fix", end="2025-01-05", reprocess="completed", select="{code_version: 2}", mar=2)
    bench.run()  # sub-range 1 (day 1)
    bench.run()  # it finished: sub-range 2 (day 3)
    progress = bench.store.binding("fix").progress  # type: ignore[union-attr]
    assert progress is not None
    chosen = progress.sub_ranges
    assert chosen == ((_day(1), _day(1)), (_day(3), _day(3)), (_day(5), _day(5)))
    bench.store.close()
    Path(str(bench.store.url).removeprefix("sqlite:///")).unlink()  # the store is lost
    bench.store = type(bench.store)(bench.store_url)
    adopted = bench.run()
    assert [(i.kind.value, i.reason, o.value) for i, o in adopted.applied if i.spec == "fix"] == [
        ("adopt", "adopt chunk backfill(s) #2, #3 (the spec's chunks, not bound)", "adopted")
    ]
    rederiving = next(i for i in bench.run().plan.items if i.spec == "fix")
    assert (rederiving.kind.value, rederiving.reason) == (
        "wait",
        "select: its selection read again from Airflow after a lost store: 2 sub-range(s) run, 1 left",
    )
    assert bench.store.binding("fix").progress.sub_ranges == chosen  # type: ignore[union-attr]
    last = bench.until_terminal()
    assert next(i for i in last.plan.items if i.spec == "fix").phase.value == "Succeeded"
    made = [(b["from_date"][:10], b["to_date"][:10]) for b in _creates(bench)[before:]]
    assert made == [("2025-01-01", "2025-01-01"), ("2025-01-03", "2025-01-03"), ("2025-01-05", "2025-01-05")]


def _day(n: int) -> datetime:
    return datetime(2025, 1, n, tzinfo=UTC)
