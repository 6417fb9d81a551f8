"""Failure paths that must tell the truth: one retry table, configuration errors at once, one clear error."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from rich.console import Console

from controller.adapters.airflow import AirflowClient
from controller.adapters.airflow.decode import backfill_from_json
from controller.cli.output import status_rich
from controller.commands.runtime.settings import Settings
from controller.core.model.airflow import BackfillRequest
from controller.core.model.capabilities import newest
from controller.core.render import plan as plan_render
from controller.core.render.status import StatusRow
from controller.core.rules.retrying import RULES, Failure, Outcome, Request
from controller.errors import AirflowAmbiguous, AirflowError, ConfigError, StalePlan
from tests.commands.reconcile.harness import Bench, mutating
from tests.fakes.airflow import FakeAirflow
from tests.support.logcheck import message_of

REQUEST = BackfillRequest("d", datetime(2025, 1, 1, tzinfo=UTC), datetime(2025, 1, 2, tzinfo=UTC))
DRY_RUN = {"backfills": [{"logical_date": "2025-01-01T00:00:00Z"}], "total_entries": 1}


def scripted(answers: list[Callable[[httpx.Request], httpx.Response]]) -> tuple[AirflowClient, list[str]]:
    seen: list[str] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(f"{request.method} {request.url.path}")
        return answers.pop(0)(request)

    transport = httpx.MockTransport(handle)
    client = AirflowClient("http://airflow", transport=transport, sleep=lambda _s: None, capabilities=newest())
    return client, seen


def status(code: int, body: Any = None) -> Callable[[httpx.Request], httpx.Response]:
    return lambda request: httpx.Response(code, json=body if body is not None else {"detail": "busy"})


def timeout(request: httpx.Request) -> httpx.Response:
    raise httpx.ReadTimeout("timed out", request=request)


def test_every_request_kind_has_a_rule_for_every_outcome() -> None:
    assert {(r, o) for r in Request for o in (*Outcome, *Failure)} == set(RULES)


def test_a_503_on_the_dry_run_is_retried_like_any_read() -> None:
    client, seen = scripted([status(503), status(503), status(200, DRY_RUN)])
    assert [p.date for p in client.planned_runs(REQUEST)] == [datetime(2025, 1, 1, tzinfo=UTC)]
    assert seen == ["POST /api/v2/backfills/dry_run"] * 3


def test_a_timeout_on_the_dry_run_is_retried_too() -> None:
    client, seen = scripted([timeout, status(200, DRY_RUN)])
    assert len(client.planned_runs(REQUEST)) == 1
    assert seen == ["POST /api/v2/backfills/dry_run"] * 2


@pytest.mark.parametrize("answer", [status(503), status(500), timeout], ids=["503", "500", "timeout"])
def test_a_create_that_may_have_landed_is_ambiguous_after_one_call(answer: Any) -> None:
    client, seen = scripted([answer])
    with pytest.raises(AirflowAmbiguous):
        client.create(REQUEST)
    assert seen == ["POST /api/v2/backfills"]


def test_a_pause_that_timed_out_is_retried() -> None:
    backfill = {
        "id": 3,
        "dag_id": "d",
        "from_date": "2025-01-01T00:00:00Z",
        "to_date": "2025-01-02T00:00:00Z",
        "reprocess_behavior": "none",
        "max_active_runs": 1,
        "is_paused": True,
        "dag_run_conf": {},
        "created_at": "2025-01-03T00:00:00Z",
        "completed_at": None,
    }
    client, seen = scripted([timeout, status(200, backfill)])
    assert client.pause(3).is_paused
    assert seen == ["PUT /api/v2/backfills/3/pause"] * 2


def test_a_url_without_a_scheme_is_never_retried() -> None:
    slept: list[float] = []
    client = AirflowClient("127.0.0.1:9", sleep=slept.append)
    with pytest.raises(AirflowError) as caught:
        client.version()
    assert caught.value.message.startswith("GET /api/v2/version failed: UnsupportedProtocol")
    assert caught.value.hint == (
        "set BACKFILLCTL_AIRFLOW_URL to the API server's address with its scheme, e.g. http://127.0.0.1:8080"
    )
    assert slept == []


def test_the_http_timeout_is_a_setting() -> None:
    assert Settings.from_env({}).airflow_timeout == 30.0
    assert Settings.from_env({"BACKFILLCTL_AIRFLOW_TIMEOUT": "240"}).airflow_timeout == 240.0
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({"BACKFILLCTL_AIRFLOW_TIMEOUT": "soon"})
    assert caught.value.message == "BACKFILLCTL_AIRFLOW_TIMEOUT='soon' is not a number of seconds from 1 to 3600"
    client = AirflowClient("http://airflow", timeout=240.0)
    assert (client.transport.http.timeout.read, client.transport.http.timeout.connect) == (240.0, 5.0)


# --- the CLI: one preflight, one error ----------------------------------------------------------------------


@pytest.fixture
def html_server() -> Iterator[str]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *_: Any) -> None:
            pass

        def do_GET(self) -> None:
            body = b"<html><body><h1>Not Found</h1><script>alert(1)</script></body></html>"
            self.send_response(404)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def cli(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "specs").mkdir(exist_ok=True)
    base = {k: v for k, v in os.environ.items() if not k.startswith("BACKFILLCTL_")}
    return subprocess.run(
        [sys.executable, "-m", "controller", *args],
        capture_output=True,
        text=True,
        env={**base, "BACKFILLCTL_SPECS_DIR": str(tmp_path / "specs"), **env},
        cwd=tmp_path,
        check=False,
        timeout=60,
    )


def test_unreachable_airflow_is_one_error_after_two_attempts(tmp_path: Path) -> None:
    done = cli(tmp_path, "plan", "--no-store", BACKFILLCTL_AIRFLOW_URL="http://127.0.0.1:9")
    assert (done.returncode, done.stdout) == (1, "")
    first, rest = done.stderr.split("\n", 1)
    retry = r"attempt #1/2 failed; will retry in 0\.[56]s: GET /api/v2/version failed: ConnectError"
    assert re.fullmatch(retry, message_of(first))  # a log line: with its time and level
    assert rest == (
        "error: cannot reach Airflow at BACKFILLCTL_AIRFLOW_URL=http://127.0.0.1:9: "
        "GET /api/v2/version failed: ConnectError\n"
        "  hint: is Airflow's api-server running, and is that its address?\n"
    )


@pytest.mark.parametrize("url", ["127.0.0.1:8080", "ftp://airflow"])
def test_a_url_that_is_not_http_is_refused_before_any_call(tmp_path: Path, url: str) -> None:
    done = cli(tmp_path, "plan", "--no-store", BACKFILLCTL_AIRFLOW_URL=url)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"error: BACKFILLCTL_AIRFLOW_URL={url!r} is not an http:// or https:// address\n"
        "  hint: set it to the api-server's base address, e.g. http://127.0.0.1:8080; percent-encode an @ / ? # "
        "in a user name or password (%40 %2F %3F %23)\n"
    )


def test_a_web_server_that_is_not_airflow_is_named_without_its_page(tmp_path: Path, html_server: str) -> None:
    done = cli(tmp_path, "plan", "--no-store", BACKFILLCTL_AIRFLOW_URL=html_server)
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"error: BACKFILLCTL_AIRFLOW_URL={html_server} does not answer like Airflow 3's API: "
        "GET /api/v2/version -> 404\n"
        "  hint: set it to the Airflow api-server's base address (scheme, host and port, no path)\n"
    )
    assert "<script>" not in done.stderr


def test_a_bad_timeout_setting_is_a_user_error(tmp_path: Path) -> None:
    done = cli(
        tmp_path, "plan", "--no-store", BACKFILLCTL_AIRFLOW_URL="http://127.0.0.1:9", BACKFILLCTL_AIRFLOW_TIMEOUT="0"
    )
    assert done.returncode == 1
    assert done.stderr.splitlines()[0] == (
        "error: BACKFILLCTL_AIRFLOW_TIMEOUT='0' is not a number of seconds from 1 to 3600"
    )


# --- an incomplete observation is never a reviewable or appliable plan ------------------------------------


@pytest.fixture
def bench(tmp_path: Path) -> Iterator[Bench]:
    b = Bench(tmp_path, fake=FakeAirflow())
    yield b
    b.close()


def failing_list(bench: Bench, times: int) -> None:
    assert bench.fake is not None
    for _ in range(times):
        bench.fake.fault("GET", "/api/v2/backfills", lambda r: httpx.Response(500, json={"detail": "<b>boom</b>"}))


def test_an_incomplete_observation_has_no_checksum_and_one_line_per_cause(bench: Bench) -> None:
    bench.spec("a", dag="demo_daily")
    bench.spec("b", dag="demo_hourly", start="2025-01-01T00:00:00Z", end="2025-01-01T03:00:00Z")
    failing_list(bench, 8)  # 4 attempts for each DAG
    result = bench.reconciler().run_once(dry_run=True)
    assert not result.plan.complete
    assert result.errors == [
        "DAGs demo_daily, demo_hourly were not fully observed: GET /api/v2/backfills -> 500: <b>boom</b>"
    ]
    text = plan_render.plan_text(result.plan)
    assert text.splitlines()[-3:] == [
        "! observation-incomplete: DAGs demo_daily, demo_hourly were not fully observed: "
        "GET /api/v2/backfills -> 500: <b>boom</b>",
        "Plan: 0 to create, 0 to pause, 0 to cancel, 0 queued, 2 blocked.",
        "Checksum: none: the observation was incomplete, so this plan can be neither reviewed nor applied",
    ]
    assert json.loads(plan_render.plan_json(result.plan))["checksum"] is None
    markdown = plan_render.plan_markdown(result.plan)
    assert "- **observation-incomplete**: DAGs demo\\_daily, demo\\_hourly were not fully observed: " in markdown
    assert "GET /api/v2/backfills -\\> 500: \\<b\\>boom\\</b\\>" in markdown
    assert "<b>" not in markdown


def test_a_reviewed_checksum_is_refused_when_the_observation_is_incomplete(bench: Bench) -> None:
    bench.spec("a")
    reviewed = bench.reconciler().run_once(dry_run=True).plan.checksum()
    failing_list(bench, 4)
    with pytest.raises(StalePlan) as refused:
        bench.run(plan_checksum=reviewed)
    assert refused.value.message == (
        f"cannot check the reviewed plan {reviewed}: the observation of Airflow is incomplete"
    )
    assert bench.fake is not None
    assert mutating(bench.fake.requests) == []


def test_markdown_has_no_python_reprs_and_one_date_style(bench: Bench) -> None:
    path = bench.spec("a")
    path.write_text(path.read_text().replace("approvers: [bob]", "approvers: [bob, carol]"))
    markdown = plan_render.plan_markdown(bench.reconciler().run_once(dry_run=True).plan)
    details = markdown.split("<details>")[1]
    assert "- approvers: bob, carol\n" in details
    assert "- run_backwards: no\n" in details
    assert "- first and last dates to run: 2025-01-01T00:00:00Z … 2025-01-07T00:00:00Z\n" in details
    assert "['" not in details
    assert "False" not in details


# --- user mistakes are exit 1 or 2 with a fix, never exit 3 ------------------------------------------------


def git(cwd: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.email=a@example.com", "-c", "user.name=A", *args], cwd=cwd, check=True, capture_output=True
    )


def shallow_clone(tmp_path: Path, repo_root: Path) -> Path:
    """A --depth 1 clone (file://, so git honours the depth) of a two-commit repository with one spec."""
    origin = tmp_path / "origin"
    (origin / "specs").mkdir(parents=True)
    spec = (repo_root / "specs" / "daily-2025-01-week1.yaml").read_text()
    (origin / "specs" / "daily-2025-01-week1.yaml").write_text(spec)
    git(origin, "init", "-q")
    git(origin, "add", "-A")
    git(origin, "commit", "-qm", "one")
    (origin / "specs" / "daily-2025-01-week1.yaml").write_text(spec + "# touched\n")
    git(origin, "commit", "-qam", "two")
    git(tmp_path, "clone", "-q", "--depth", "1", f"file://{origin}", "shallow")
    return tmp_path / "shallow"


def test_base_ref_in_a_shallow_clone_says_fetch_with_depth_0(tmp_path: Path, repo_root: Path) -> None:
    shallow_clone(tmp_path, repo_root)
    done = cli(tmp_path / "shallow", "validate", "--base", "HEAD~1", BACKFILLCTL_SPECS_DIR="specs")
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        "error: git ref 'HEAD~1' is not in this repository\n"
        "  hint: this is a shallow clone: fetch with depth 0 (git fetch --unshallow, or actions/checkout "
        "with fetch-depth: 0)\n"
    )


@pytest.mark.parametrize("command", [("reconcile", "--once"), ("reconcile", "--watch"), ("plan",), ("status",)])
def test_a_shallow_checkout_is_refused_with_the_hint_to_clone_fully(
    tmp_path: Path, repo_root: Path, command: tuple[str, ...]
) -> None:
    shallow = shallow_clone(tmp_path, repo_root)
    store = tmp_path / "state.db"
    done = cli(
        shallow,
        *command,
        BACKFILLCTL_SPECS_DIR="specs",
        BACKFILLCTL_STORE_URL=f"sqlite:///{store}",
        BACKFILLCTL_AIRFLOW_URL="http://127.0.0.1:9",
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr == (
        f"error: the specs checkout {shallow.resolve()} is a shallow clone: the queue's order and the gate need its "
        "whole history\n"
        "  hint: clone it fully: git fetch --unshallow (git-sync: --depth=0; actions/checkout: fetch-depth: 0)\n"
    )
    assert not store.exists()  # refused before the store, the lease and Airflow
    git(shallow, "fetch", "-q", "--unshallow")
    done = cli(
        shallow, "plan", "--no-store", BACKFILLCTL_SPECS_DIR="specs", BACKFILLCTL_AIRFLOW_URL="http://127.0.0.1:9"
    )
    assert done.returncode == 1  # past the check: now Airflow is what is missing
    assert "shallow" not in done.stderr
    assert "error: cannot reach Airflow at BACKFILLCTL_AIRFLOW_URL=http://127.0.0.1:9" in done.stderr


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        (
            "--since",
            "yesterday",
            "Invalid value for '--since': 'yesterday' is not a date, date-time or age; use e.g. 2025-01-31, "
            "2025-01-31T12:00:00Z or 2h",
        ),
        (
            "--action",
            "nonsense",
            "Invalid value for '--action': 'nonsense' is not an audited action; use one of: adopt, audit-key, cancel, "
            "create, finding, lease, note, observe, pause, promote, publish, reconcile, rehearse, stop, unlock, "
            "unpause, verify",
        ),
    ],
)
def test_audit_filters_that_match_nothing_by_mistake_are_usage_errors(
    tmp_path: Path, option: str, value: str, message: str
) -> None:
    done = cli(tmp_path, "audit", "show", option, value, BACKFILLCTL_STORE_URL=f"sqlite:///{tmp_path}/s.db")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines()[-1] == f"Error: {message}"
    assert not (tmp_path / "s.db").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--watch", "--interval", "inf"], "Invalid value for '--interval': inf is not between 1 and 86400 seconds"),
        (["--watch", "--interval", "nan"], "Invalid value for '--interval': nan is not between 1 and 86400 seconds"),
        (["--watch", "--interval", "0"], "Invalid value for '--interval': 0 is not between 1 and 86400 seconds"),
        (["--watch", "--interval", "-5"], "Invalid value for '--interval': -5 is not between 1 and 86400 seconds"),
        (
            ["--until-complete", "--timeout", "inf"],
            "Invalid value for '--timeout': inf is not between 1 and 2592000 seconds",
        ),
        (
            ["--until-complete", "--timeout", "nan"],
            "Invalid value for '--timeout': nan is not between 1 and 2592000 seconds",
        ),
        (["--lock-timeout", "inf"], "Invalid value for '--lock-timeout': inf is not between 0 and 86400 seconds"),
        (["--lock-timeout", "nan"], "Invalid value for '--lock-timeout': nan is not between 0 and 86400 seconds"),
        (["--lock-timeout", "-1"], "Invalid value for '--lock-timeout': -1 is not between 0 and 86400 seconds"),
    ],
)
def test_seconds_out_of_range_are_usage_errors_naming_the_option_and_its_range(
    tmp_path: Path, args: list[str], message: str
) -> None:
    """`--interval inf` once exited 3 (OverflowError); a NaN timeout waited for ever."""
    done = cli(tmp_path, "reconcile", *args, BACKFILLCTL_STORE_URL=f"sqlite:///{tmp_path}/s.db")
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines()[-1] == f"Error: {message}"
    assert not (tmp_path / "s.db").exists()


def test_status_on_an_80_column_terminal_keeps_whole_names() -> None:
    rows = [
        StatusRow(
            "daily-2025-01-week1-rounding-fix",
            "demo_finance_ledger_daily",
            "CompletedWithFailures",
            12,
            5,
            2,
            0,
            0,
            7,
            None,
            "failed: 2025-01-01, 2025-01-03",
        ),
        StatusRow("flaky-[red]-spec", "demo_flaky", "Running", 3, 1, 0, 1, 2, 4, 90.0, "in sync"),
    ]
    console = Console(width=80, record=True, color_system=None)
    console.print(status_rich(rows, console.width))
    lines = console.export_text().splitlines()
    assert lines[1:] == [
        "daily-2025-01-week1-rounding-fix  DAG demo_finance_ledger_daily  backfill #12",
        "  CompletedWithFailures  100% done, ETA -",
        "  runs: 5 ok, 2 failed, 0 running, 0 queued of 7",
        "  failed: 2025-01-01, 2025-01-03",
        "flaky-[red]-spec  DAG demo_flaky  backfill #3",
        "  Running  25% done, ETA 1m30s",
        "  runs: 1 ok, 0 failed, 1 running, 2 queued of 4",
        "  in sync",
    ]


def test_a_pull_request_is_judged_by_the_policy_it_merges_into(tmp_path: Path) -> None:
    """A PR that loosens the policy and adds a spec that needs the looser policy is refused."""
    repo = tmp_path / "repo"
    (repo / "specs").mkdir(parents=True)
    strict = 'version: 1\nrules:\n  - dags: ["finance_*"]\n    approvers: [fin-lead]\n'
    (repo / "specs" / "policy.yaml").write_text(strict)
    git(repo, "init", "-q", "-b", "main")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "policy")
    git(repo, "checkout", "-qb", "feature")
    (repo / "specs" / "policy.yaml").write_text(strict.replace("[fin-lead]", "[fin-lead, mallory]"))
    spec = (
        'version: 1\nname: ledger\ndag_id: finance_ledger\nfrom_date: "2025-01-01"\nto_date: "2025-01-02"\n'
        "reprocess_behavior: none\nmax_active_runs: 1\nticket: CHG-1\nreason: A backfill under review.\n"
        "requested_by: carol\napprovers: [mallory]\n"
    )
    (repo / "specs" / "ledger.yaml").write_text(spec)
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "loosen the policy and use it")
    alone = cli(repo, "validate", BACKFILLCTL_SPECS_DIR="specs")
    assert alone.returncode == 0, alone.stdout  # the head's own policy allows it
    done = cli(repo, "validate", "--base", "main", BACKFILLCTL_SPECS_DIR="specs")
    assert done.returncode == 1
    assert done.stdout.splitlines()[:2] == [
        "specs/ledger.yaml:11:13: $.approvers[0]: 'mallory' may not approve backfills of 'finance_ledger'",
        "  hint: allowed approvers: fin-lead",
    ]


def test_a_finding_is_audited_once_not_on_every_pass(bench: Bench) -> None:
    assert bench.fake is not None
    bench.fake._create({"dag_id": "demo_hourly", "from_date": "2024-01-01", "to_date": "2024-01-02"})
    bench.spec("waits", dag="demo_hourly")
    for _ in range(3):
        bench.run()
    findings = [
        (e.entry.outcome, e.entry.dag_id, e.entry.backfill_id) for e in bench.events() if e.entry.action == "finding"
    ]
    assert findings == [("unmanaged", "demo_hourly", 1)]


def test_an_airflow_answer_without_a_required_date_is_an_airflow_error_not_a_crash() -> None:
    with pytest.raises(AirflowError) as caught:
        backfill_from_json({"id": 1, "dag_id": "d", "from_date": None, "to_date": "2025-01-01T00:00:00Z"})
    assert caught.value.message == "from_date is null, not a date-time"  # the client adds the call
