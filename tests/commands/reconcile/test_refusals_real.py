"""A create reconcile would refuse, against the real Apache Airflow 3.3.2: the PR check fails before the merge
(`plan` exits 5), `status` shows the refusal afterwards, and `--until-complete` stops waiting for specs queued
behind it. demo_params (daily) in 2022: no other test creates backfills there, so its queue is ours alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.commands.reconcile.harness import NOT_GIT, Bench
from tests.support.logcheck import untimed

pytestmark = pytest.mark.airflow
REFUSAL = "the dry run counts 10 runs; expected_runs is 5"


@pytest.fixture
def bench(tmp_path: Path, airflow_url: str) -> Iterator[Bench]:
    b = Bench(tmp_path, url=airflow_url)
    yield b
    b.close()


def too_big(bench: Bench, name: str = "a-too-big") -> None:  # first by name: the head of its DAG's queue
    bench.spec(name, dag="demo_params", start="2022-09-01", end="2022-09-10", expected_runs=5)


def test_plan_exits_5_when_reconcile_would_refuse_a_create(bench: Bench) -> None:
    too_big(bench)
    plain = bench.cli("plan", "--no-store")
    assert (plain.returncode, plain.stderr) == (5, f"refused: a-too-big: {REFUSAL}\n")
    assert plain.stdout.startswith("! refused   a-too-big  demo_params  2022-09-01 → 2022-09-10")
    bench.spec("creates", dag="demo_tz", start="2022-11-01", end="2022-11-02")  # a change: it alone would exit 4
    detailed = bench.cli("plan", "--no-store", "--detailed-exitcode")  # 5 wins over 4
    assert (detailed.returncode, detailed.stderr) == (5, f"refused: a-too-big: {REFUSAL}\n")
    assert "\n+ create    creates    demo_tz      2022-11-01 → 2022-11-02" in detailed.stdout  # DAGs aligned
    dry = bench.cli("reconcile", "--dry-run")
    assert (dry.returncode, untimed(dry.stderr)) == (5, f"{NOT_GIT}refused: a-too-big: {REFUSAL}\n")


def test_the_pr_comment_fails_for_the_pull_requests_own_refusal_only(bench: Bench) -> None:
    too_big(bench, "a-blocked-on-main")
    bench.spec("pr-spec", dag="demo_params", start="2022-10-05", end="2022-10-06", expected_runs=2)
    (bench.root / "changed.txt").write_text("specs/pr-spec.yaml\n")
    args = ("plan", "--no-store", "--format", "markdown", "--pr-comment", "changed.txt")
    unrelated = bench.cli(*args)
    assert (unrelated.returncode, unrelated.stderr) == (0, "")  # queued behind main's refused spec: not this PR's
    assert "**Refused" not in unrelated.stdout

    (bench.root / "changed.txt").write_text("specs/a-blocked-on-main.yaml\n")
    own = bench.cli(*args)
    assert (own.returncode, own.stderr) == (5, f"refused: a-blocked-on-main: {REFUSAL}\n")
    assert own.stdout.startswith(
        "<!-- backfillctl-plan -->\n"
        "### backfillctl plan\n"
        "\n"
        "**Refused: after the merge, reconcile would refuse 1 spec this pull request adds or changes** "
        "(this check fails, exit 5):\n"
        "\n"
        "- `a-blocked-on-main`: the dry run counts 10 runs; expected\\_runs is 5\n"
        "\n"
        "Fix the spec (review the dry run's count and set `expected_runs` to it, or narrow the range) and push "
        "again; reconcile creates nothing for a refused spec.\n"
        "\n"
        "**Specs this pull request adds or changes (1)**\n"
    )


def test_status_shows_what_reconcile_last_refused(bench: Bench) -> None:
    too_big(bench)
    refused = bench.cli("reconcile", "--once")
    assert (refused.returncode, untimed(refused.stderr)) == (5, f"{NOT_GIT}refused: a-too-big: {REFUSAL}\n")

    status = bench.cli("status", "a-too-big")
    assert status.returncode == 0, status.stderr
    row = status.stdout.splitlines()[2]  # after the counts per phase and the header
    assert row.split()[:3] == ["a-too-big", "demo_params", "Blocked"]
    assert re.search(rf"  refused by reconcile at \d{{4}}-\d\d-\d\dT\d\d:\d\d:\d\dZ: {REFUSAL}$", row), row


def test_until_complete_settles_when_the_queue_waits_on_a_refusal(bench: Bench) -> None:
    too_big(bench)
    bench.spec("b-next", dag="demo_params", start="2022-10-01", end="2022-10-02")
    settled = bench.cli("reconcile", "--until-complete", "--interval", "1", "--timeout", "20")
    assert settled.returncode == 5
    assert untimed(settled.stderr) == (
        f"{NOT_GIT}refused: a-too-big: {REFUSAL}\n"
        f"stuck: b-next is queued behind a-too-big, which is Blocked: {REFUSAL}\n"
    )
    assert [(e.entry.action, e.entry.outcome) for e in bench.events("a-too-big")] == [("observe", "Blocked")]
