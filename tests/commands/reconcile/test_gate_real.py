"""The approval gate at reconcile against the real Apache Airflow 3.3.2: a pull request rebased onto main as two
commits is judged whole: unapproved at its head, neither spec is created (exit 5, Airflow untouched); approved,
both are. demo_daily and demo_tz in March 2017: no other test backfills there."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.commands.reconcile.forge import Forge, review
from tests.commands.reconcile.harness import Bench, real_bench

pytestmark = pytest.mark.airflow
DAGS = ("demo_daily", "demo_tz")


@pytest.fixture
def bench(tmp_path: Path, airflow_url: str) -> Iterator[Bench]:
    with real_bench(tmp_path, airflow_url, *DAGS) as b:
        yield b


def ours(bench: Bench) -> list[tuple[str, str]]:
    """The backfills in Airflow over this test's range."""
    with bench.client() as client:
        found = [b for dag in DAGS for b in client.list_backfills(dag)]
    return sorted((b.dag_id, b.from_date.date().isoformat()) for b in found if b.from_date.year == 2017)


def test_a_rebased_pull_request_is_created_only_approved_at_its_head(bench: Bench) -> None:
    forge = Forge(bench)
    bench.policy("version: 1\nrequire_reviewed_merge: true\n")
    forge.commit("policy")
    assert bench.cli("reconcile", "--once").returncode == 0  # the store's first reconciled commit

    refused = forge.open()
    bench.spec("sneaky", dag="demo_tz", start="2017-03-01", end="2017-03-02")
    forge.push(refused, "add sneaky")
    bench.spec("decoy", dag="demo_daily", start="2017-03-01", end="2017-03-02")
    forge.push(refused, "add decoy")
    merged = forge.merge(refused, "rebase")
    document = forge.document(merged, review("bob", "changes_requested", refused.head))
    done = bench.cli("reconcile", "--once", "--evidence", str(document))
    assert done.returncode == 5, done.stderr
    refusals = sorted(line.split(": ", 2)[1] for line in done.stderr.splitlines() if line.startswith("refused: "))
    assert refusals == ["decoy", "sneaky"]
    assert ours(bench) == []

    approved = forge.open()
    bench.spec("sneaky", dag="demo_tz", start="2017-03-01", end="2017-03-02", expected_runs=2)
    forge.push(approved, "sneaky, reviewed")
    bench.spec("decoy", dag="demo_daily", start="2017-03-01", end="2017-03-02", expected_runs=2)
    forge.push(approved, "decoy, reviewed")
    merged = forge.merge(approved, "rebase")
    document = forge.document(merged, review("bob", "approved", approved.head))
    done = bench.cli("reconcile", "--once", "--evidence", str(document))
    assert done.returncode == 0, done.stderr
    assert ours(bench) == [("demo_daily", "2017-03-01"), ("demo_tz", "2017-03-01")]
    report = bench.cli("report", "sneaky")
    assert f"#{approved.number} https://github.com/acme/specs/pull/{approved.number}: base " in report.stdout
