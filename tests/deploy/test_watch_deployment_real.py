"""The deployment's walk-through against the real Apache Airflow 3.3.2: the container's command as the Deployment
runs it (`backfillctl reconcile --watch --metrics-port=… --metrics-host=…`) on a full clone of the specs repository
that a second process advances with each merge (git pull, as git-sync would), finding its own evidence in a fake
GitHub API on loopback. Each merge's spec is gated with that evidence and created — a squash whose branch is gone
from the clone, then a merge commit — and served on /healthz and the status page; an unapproved merge is not.
demo_daily and demo_tz in April 2016: no other test backfills there."""

from __future__ import annotations

import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.commands.reconcile.forge import Forge, answer_merge, git
from tests.commands.reconcile.harness import Bench, real_bench
from tests.commands.reconcile.test_gate_script import github_review
from tests.fakes.github import REPO, FakeGitHub, serving
from tests.support.receivers import free_port

pytestmark = pytest.mark.airflow
DAGS = ("demo_daily", "demo_tz")
RANGE = ("2016-04-01", "2016-04-02")  # every spec of this test: no other real test backfills these days
TOKEN = "github_pat_walkthrough_0123456789"


@pytest.fixture
def bench(tmp_path: Path, airflow_url: str) -> Iterator[Bench]:
    with real_bench(tmp_path / "origin", airflow_url, *DAGS) as b:
        yield b


def ours(bench: Bench) -> list[tuple[str, str]]:
    """This test's backfills: its specs' exact range (other real tests backfill other days of 2016 on these DAGs)."""
    with bench.client() as client:
        found = [b for dag in DAGS for b in client.list_backfills(dag)]
    mine = [b for b in found if (b.from_date.date().isoformat(), b.to_date.date().isoformat()) == RANGE]
    return sorted((b.dag_id, b.from_date.date().isoformat()) for b in mine)


def until(what: Callable[[], bool], seconds: float, watcher: subprocess.Popen[str], log: Path | None = None) -> None:
    """Wait for `what`; a timeout says what the watch process logged (under a loaded CI, why it was slow)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if what():
            return
        assert watcher.poll() is None, "the watch process exited" + _tail(log)
        time.sleep(0.5)
    raise AssertionError(f"not within {seconds:g}s{_tail(log)}")


def _tail(log: Path | None) -> str:
    return "" if log is None else "; the watch's log ends:\n" + log.read_text()[-4000:]


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except urllib.error.URLError:  # not listening yet
        return 0, ""


def test_the_watch_deployment_gates_each_merge_with_its_own_evidence(bench: Bench, tmp_path: Path) -> None:
    forge = Forge(bench)
    bench.policy("version: 1\nrequire_reviewed_merge: true\n")
    forge.commit("policy")
    checkout = tmp_path / "checkout"
    git(tmp_path, "clone", "-q", str(bench.root), str(checkout))  # a full clone: --depth=0
    port = free_port()
    github = FakeGitHub(token=TOKEN)
    answers = github.answers
    answers[f"{REPO}/collaborators/bob/permission"] = {"permission": "write", "role_name": "write"}
    env = bench.cli_env(
        BACKFILLCTL_SPECS_DIR=str(checkout / "specs"),
        BACKFILLCTL_GITHUB_REPOSITORY="acme/specs",
        BACKFILLCTL_GITHUB_TOKEN=TOKEN,
    )
    with serving(github):
        env["BACKFILLCTL_GITHUB_API_URL"] = github.url
        command = ["reconcile", "--watch", "--interval=1", f"--metrics-port={port}", "--metrics-host=127.0.0.1"]
        log = tmp_path / "watch.log"
        with log.open("w") as out:
            watcher = subprocess.Popen(
                [sys.executable, "-m", "controller", *command], cwd=checkout, env=env, stdout=out, stderr=out, text=True
            )
        try:
            until(lambda: get(port, "/healthz")[0] == 200, 60, watcher)

            def merge(name: str, dag: str, method: str, approved: bool) -> None:
                pull = forge.open()
                bench.spec(name, dag=dag, start=RANGE[0], end=RANGE[1], mar=1)
                forge.push(pull, f"add {name}")
                merged = forge.merge(pull, method)
                state = "APPROVED" if approved else "COMMENTED"
                answer_merge(answers, bench.root, merged, [github_review("bob", state, pull.head, pull.number)])
                git(bench.root, "branch", "-q", "-D", pull.branch)  # deleted on merge: the clone never sees it
                git(checkout, "pull", "-q", "--ff-only")  # the second process: git-sync's part

            merge("w-squash", "demo_tz", "squash", approved=True)
            until(lambda: ours(bench) == [("demo_tz", "2016-04-01")], 180, watcher, log)  # a create, on a busy Airflow
            merge("w-merge", "demo_daily", "merge", approved=True)
            until(lambda: len(ours(bench)) == 2, 180, watcher, log)
            assert ours(bench) == [("demo_daily", "2016-04-01"), ("demo_tz", "2016-04-01")]
            merge("w-unapproved", "demo_daily", "squash", approved=False)
            head = git(checkout, "rev-parse", "HEAD")
            until(lambda: getattr(bench.store.last_reconciled(), "commit", None) == head, 120, watcher, log)
            status, page = get(port, "/")
            health = get(port, "/healthz")
        finally:
            watcher.terminate()
            watcher.wait(timeout=60)
    said = log.read_text()
    assert health == (200, "ok\n"), said
    assert status == 200
    for name in ("w-squash", "w-merge", "w-unapproved"):
        assert name in page
    assert ours(bench) == [("demo_daily", "2016-04-01"), ("demo_tz", "2016-04-01")]  # the unapproved one waits
    assert "refused: w-unapproved: " in said, said
    assert TOKEN not in said
    asked = {a.path for a in github.requests}
    assert f"{REPO}/pulls/41/commits" in asked  # the squash's commits, from GitHub
    assert {a.authorization for a in github.requests} == {f"Bearer {TOKEN}"}
