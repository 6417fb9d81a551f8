"""Running for weeks, end to end against the real Apache Airflow 3.3.2: notifications that survive a receiver
outage and a restart, no secret in any output, metrics that move, /healthz going 503, and the pages in headless
Chromium.

Dates are in 2019/2020 (no other test uses them), picked at random for each run so a rerun against the same
Airflow (BACKFILLCTL_TEST_AIRFLOW_URL) starts clean; ranges start on an odd day, so `demo_flaky` (failing on odd
days of the month) always fails the same share.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from controller.core.render.report_html import COLOURS
from tests.commands.reconcile.harness import Bench
from tests.support.browser import dump_dom, hex_rgb, screenshot
from tests.support.receivers import SwitchableProxy, WebhookReceiver, free_port

pytestmark = pytest.mark.airflow
DAGS = ("demo_flaky", "demo_slow")
CELL = 14 * 14  # pixels of one heat-map cell (and of one legend swatch) at scale factor 1

POLICY = """\
version: 1
notify:
  receivers:
    team-orders: {webhook_env: BACKFILLCTL_WEBHOOK_ORDERS, format: json}
    team-chat: {webhook_env: BACKFILLCTL_WEBHOOK_CHAT, format: slack}
  default_receivers: [team-orders]
"""


@pytest.fixture
def bench(tmp_path: Path, airflow_url: str) -> Iterator[Bench]:
    b = Bench(tmp_path, url=airflow_url)
    yield b
    with b.client() as client:
        for dag in DAGS:
            for backfill in client.list_backfills(dag):
                if backfill.active and backfill.from_date.year in (2019, 2020):
                    client.cancel(backfill.id)
    b.close()


def fresh_range(days: int) -> tuple[date, date]:
    """A range of `days` days within one month of 2019 or 2020, starting on an odd day."""
    rng = random.Random(uuid.uuid4().int)
    start = date(rng.choice((2019, 2020)), rng.randint(1, 12), rng.choice(range(1, 22, 2)))
    return start, start + timedelta(days=days - 1)


def cli(env: dict[str, str], *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "controller", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def test_a_receiver_that_was_down_gets_exactly_what_it_missed_after_restarts_and_no_secret_leaks(
    bench: Bench, tmp_path: Path
) -> None:
    canary = f"canary-{uuid.uuid4().hex}"
    token = f"canary-token-{uuid.uuid4().hex}"
    port = free_port()
    env = bench.cli_env(
        BACKFILLCTL_AIRFLOW_TOKEN=token,  # refused by Airflow (401): the client logs in with username/password
        BACKFILLCTL_WEBHOOK_ORDERS=f"http://127.0.0.1:{port}/orders/{canary}",
        BACKFILLCTL_WEBHOOK_CHAT=f"http://127.0.0.1:{port}/chat/{canary}?token={canary}",
    )
    bench.policy(POLICY)
    first_day, last_day = fresh_range(4)
    bench.spec(
        "notify-flaky",
        dag="demo_flaky",
        start=str(first_day),
        end=str(last_day),
        mar=4,
        reprocess="completed",
        notify="[team-chat]",
    )
    outputs: list[str] = []

    # 1. the receiver is down for the whole backfill
    first = cli(env, "--log-format", "json", "reconcile", "--until-complete", "--interval", "3", "--timeout", "600")
    outputs += [first.stdout, first.stderr]
    assert first.returncode == 0, first.stderr
    logs = [json.loads(line) for line in first.stderr.splitlines()]
    assert {"time", "level", "event", "logger"} <= set(logs[0])
    created = [line for line in logs if line["event"] == "create notify-flaky: created"]
    assert len(created) == 1
    assert {k: created[0][k] for k in ("spec", "dag", "level")} == {
        "spec": "notify-flaky",
        "dag": "demo_flaky",
        "level": "info",
    }
    assert len(created[0]["pass_id"]) == 12
    assert any("not delivered; will retry: receiver team-orders: ConnectError" in line["event"] for line in logs)
    status = cli(env, "notify", "status")
    outputs.append(status.stdout + status.stderr)
    assert status.returncode == 0, status.stderr
    pending = json.loads(cli(env, "notify", "status", "--format", "json").stdout)["undelivered"]
    assert sorted((r["receiver"], r["event"]) for r in pending) == [
        ("team-chat", "completed_with_failures"),
        ("team-chat", "created"),
        ("team-orders", "completed_with_failures"),
        ("team-orders", "created"),
    ]
    # every row was tried and failed, except that a completion enqueued in the last pass is left untried
    # when its receiver's older row came due first in that pass and failed (a down receiver is skipped)
    for row in pending:
        tried = (row["state"], row["attempts"] > 0, row["last_error"] is not None)
        assert tried == ("failed", True, True) or (row["event"], tried) == (
            "completed_with_failures",
            ("pending", False, False),
        ), row
    untried = sum(1 for r in pending if r["state"] == "pending")
    assert status.stdout.splitlines()[0] == (
        f"4 undelivered notification(s): {untried} pending, {4 - untried} failed (retried with backoff); 0 delivered"
    )

    # 2. it comes back, processes the first message but its answer is lost (500): that one is sent again
    receiver = WebhookReceiver(port, fail_first=1)
    try:
        for _ in range(3):  # three restarts of the reconciler; the first pass of each delivers what is waiting
            again = cli(env, "reconcile", "--once")
            outputs += [again.stdout, again.stderr]
            assert again.returncode == 0, again.stderr
    finally:
        receiver.close()
    got = receiver.received
    keys = [r["key"] for r in got]
    assert len(got) == 5
    assert len(set(keys)) == 4  # the one duplicate has the same idempotency key
    for r in got:  # the key is in the header and in the body (JSON field, or the Slack message's context line)
        assert r["body"]["idempotency_key"] == r["key"] if "blocks" not in r["body"] else f"`{r['key']}`" in r["raw"]
    unique = {r["key"]: r for r in got}
    by_receiver = sorted((r["path"].split("/")[1], _event(r["body"])) for r in unique.values())
    assert by_receiver == [
        ("chat", "Backfill completed with failures: notify-flaky on demo_flaky [CHG-1]"),
        ("chat", "Backfill created: notify-flaky on demo_flaky [CHG-1]"),
        ("orders", "completed_with_failures"),
        ("orders", "created"),
    ]
    done = next(r["body"] for r in unique.values() if r["body"].get("event") == "completed_with_failures")
    assert {k: done[k] for k in ("format_version", "spec", "dag_id", "ticket", "from_date", "to_date")} == {
        "format_version": 1,
        "spec": "notify-flaky",
        "dag_id": "demo_flaky",
        "ticket": "CHG-1",
        "from_date": f"{first_day}T00:00:00Z",
        "to_date": f"{last_day}T00:00:00Z",
    }
    assert done["runs"] == {"failed": 2, "success": 2}
    odd = [first_day, first_day + timedelta(days=2)]
    assert done["failed_dates"] == [f"{d}T00:00:00Z" for d in odd]
    assert done["report"].startswith("# Change record: notify-flaky\n")
    assert f"2 complete, 2 failed ({odd[0]}, {odd[1]})" in done["report"]
    final = cli(env, "notify", "status")
    assert final.stdout.splitlines()[0] == (
        "0 undelivered notification(s): 0 pending, 0 failed (retried with backoff); 4 delivered"
    )

    # 3. no secret anywhere: pages, reports, logs, audit, notification bodies and headers
    for args in (["report", "notify-flaky"], ["report", "notify-flaky", "--format", "json"], ["audit", "export"]):
        shown = cli(env, *args)
        assert shown.returncode == 0, shown.stderr
        outputs += [shown.stdout, shown.stderr]
    html = tmp_path / "report.html"
    assert cli(env, "report", "notify-flaky", "--format", "html", "--output", str(html)).returncode == 0
    outputs.append(html.read_text())
    outputs += [r["raw"] + json.dumps(dict(r["headers"].items())) for r in got]
    for text in outputs:
        assert canary not in text
        assert token not in text


def _event(body: dict[str, Any]) -> str:
    return str(body["text"]) if "blocks" in body else str(body["event"])


def scrape(base: str) -> dict[str, float]:
    text = httpx.get(f"{base}/metrics", timeout=10).text
    return {
        f"{s.name}{json.dumps(s.labels, sort_keys=True) if s.labels else ''}": s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def wait_for(what: str, check: Callable[[], bool], timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(2)
    raise AssertionError(f"timed out waiting for {what}")


def metric(values: dict[str, float], name: str, **labels: str) -> float:
    return values.get(name + (json.dumps(labels, sort_keys=True) if labels else ""), 0.0)


def test_metrics_health_status_page_and_the_html_report_in_a_browser(bench: Bench, tmp_path: Path) -> None:
    proxy = SwitchableProxy(bench.url)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    env = bench.cli_env(BACKFILLCTL_AIRFLOW_URL=proxy.url)
    slow, flaky = fresh_range(3), fresh_range(6)
    bench.spec("mon-slow", dag="demo_slow", start=str(slow[0]), end=str(slow[1]), mar=1, reprocess="completed")
    bench.spec("mon-flaky", dag="demo_flaky", start=str(flaky[0]), end=str(flaky[1]), mar=3, reprocess="completed")
    watch = subprocess.Popen(
        [sys.executable, "-m", "controller", "reconcile", "--watch", "--interval", "3", "--metrics-port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(
            "the first pass", lambda: _up(base) and metric(scrape(base), "backfillctl_passes_total", result="ok") >= 1
        )
        start = scrape(base)
        wait_for(
            "mon-flaky to finish and mon-slow to be half-way",
            lambda: (
                metric(s := scrape(base), "backfillctl_specs", phase="CompletedWithFailures") == 1
                and metric(s, "backfillctl_runs", spec="mon-slow", state="success") >= 1
            ),
            timeout=420,
        )
        moved = scrape(base)
        assert metric(start, "backfillctl_runs", spec="mon-slow", state="success") == 0
        assert [k for k in moved if '"spec": "mon-flaky"' in k] == []  # finished: no per-spec series any more
        assert metric(moved, "backfillctl_finished_runs", state="failed") == 3
        assert metric(moved, "backfillctl_finished_runs", state="success") == 3
        assert metric(moved, "backfillctl_audit_head_seq") > metric(start, "backfillctl_audit_head_seq")
        assert metric(moved, "backfillctl_pass_duration_seconds_count") > metric(
            start, "backfillctl_pass_duration_seconds_count"
        )
        endpoint = {"endpoint": "/api/v2/dags/{dag_id}/dagRuns", "method": "GET", "status_class": "2xx"}
        assert metric(moved, "backfillctl_airflow_requests_total", **endpoint) > metric(
            start, "backfillctl_airflow_requests_total", **endpoint
        )
        assert metric(moved, "backfillctl_lease_held", holder=f"ci-bot@{os.uname().nodename}") == 1
        assert metric(moved, "backfillctl_notifications_undelivered") == 0
        assert httpx.get(f"{base}/healthz").status_code == 200

        # the status page, as a person sees it
        dom = dump_dom(base + "/")
        assert 'data-spec="mon-slow" data-phase="Running"' in dom
        progress = int(dom.split('data-spec="mon-slow"')[1].split('aria-valuenow="')[1].split('"')[0])
        assert 0 < progress < 100
        assert 'data-spec="mon-flaky" data-phase="CompletedWithFailures"' in dom
        page = screenshot(base + "/", tmp_path / "status.png", height=700)
        assert page[hex_rgb("#0969da")] > 0  # the Running badge

        # the change record of the finished spec: six days, three failed (odd days), three succeeded
        html = tmp_path / "mon-flaky.html"
        written = cli(bench.cli_env(), "report", "mon-flaky", "--format", "html", "--output", str(html))
        assert written.returncode == 0, written.stderr
        dom = dump_dom(html.as_uri())
        assert 'id="heatmap" data-cells="6" data-unit="day"' in dom
        assert (dom.count('data-state="failed"'), dom.count('data-state="succeeded"')) == (3, 3)
        shot = screenshot(html.as_uri(), tmp_path / "report.png", height=1400)
        assert shot[hex_rgb(COLOURS["failed"])] == (3 + 1) * CELL  # three cells and the legend swatch
        assert shot[hex_rgb(COLOURS["succeeded"])] == (3 + 1) * CELL
        assert shot[hex_rgb(COLOURS["never_started"])] == CELL  # only the swatch
        _keep_screenshots(tmp_path)

        # Airflow unreachable: /healthz turns 503 after three failed passes, and back when it returns
        proxy.down = True
        wait_for("/healthz 503", lambda: httpx.get(f"{base}/healthz").status_code == 503, timeout=400)
        assert httpx.get(f"{base}/healthz").text.startswith("unhealthy: 3 failed passes in a row")
        assert metric(scrape(base), "backfillctl_consecutive_failed_passes") >= 3
        unanswered = [k for k, v in scrape(base).items() if '"status_class": "error"' in k and v > 0]
        assert unanswered  # requests without an answer are counted, by endpoint
        proxy.down = False
        wait_for("/healthz 200", lambda: httpx.get(f"{base}/healthz").status_code == 200, timeout=300)
    finally:
        watch.send_signal(signal.SIGTERM)
        _out, err = watch.communicate(timeout=300)
        proxy.close()
    assert "Traceback" not in err


def _up(base: str) -> bool:
    try:
        return httpx.get(f"{base}/healthz", timeout=5).status_code in (200, 503)
    except httpx.HTTPError:
        return False


def _keep_screenshots(tmp_path: Path) -> None:
    """BACKFILLCTL_SAVE_SCREENSHOTS=DIR copies the screenshots there (how docs/*.png were made)."""
    target = os.environ.get("BACKFILLCTL_SAVE_SCREENSHOTS")
    if target:
        for name in ("status.png", "report.png"):
            shutil.copy(tmp_path / name, Path(target) / name)


def run_states(airflow: str, first: date, last: date) -> list[str]:
    """The states of demo_slow's backfill runs from `first` to `last`."""
    token = httpx.post(f"{airflow}/auth/token", json={"username": "admin", "password": "admin"}).json()["access_token"]
    answer = httpx.get(
        f"{airflow}/api/v2/dags/demo_slow/dagRuns",
        params={"logical_date_gte": f"{first}T00:00:00Z", "logical_date_lte": f"{last}T00:00:00Z", "limit": 100},
        headers={"Authorization": f"Bearer {token}"},
    )
    assert answer.status_code == 200, answer.text
    return [run["state"] for run in answer.json()["dag_runs"]]


def set_dag_paused(airflow: str, dag_id: str, paused: bool) -> None:
    token = httpx.post(f"{airflow}/auth/token", json={"username": "admin", "password": "admin"}).json()["access_token"]
    answer = httpx.patch(
        f"{airflow}/api/v2/dags/{dag_id}", json={"is_paused": paused}, headers={"Authorization": f"Bearer {token}"}
    )
    assert answer.status_code == 200, answer.text


def test_stuck_when_the_dag_is_paused_is_notified_once_with_the_cause(bench: Bench) -> None:
    """The planner refuses to create on a paused DAG, so the DAG is paused after the backfill started (a run in flight
    at the pause reads `running` for ever: Airflow examines no run of a paused DAG; stuck all the same)."""
    port = free_port()
    bench.policy(POLICY + "  stuck_after_minutes: 1\n")
    first_day, last_day = fresh_range(4)
    bench.spec("stuck-slow", dag="demo_slow", start=str(first_day), end=str(last_day), mar=1, reprocess="completed")
    env = bench.cli_env(BACKFILLCTL_WEBHOOK_ORDERS=f"http://127.0.0.1:{port}/orders")
    receiver = WebhookReceiver(port)
    watch = subprocess.Popen(
        [sys.executable, "-m", "controller", "reconcile", "--watch", "--interval", "10"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def events(kind: str) -> list[dict[str, Any]]:
        return [r["body"] for r in receiver.received if r["body"]["event"] == kind]

    try:
        wait_for("the created notification", lambda: bool(events("created")), timeout=120)
        in_range = (first_day, last_day)
        wait_for("a run of it running", lambda: "running" in run_states(bench.url, *in_range), timeout=300)
        # paused with a run in flight: the queued runs never start; the running one may read `running` until Airflow
        # settles it (its scheduler examines no run of a paused DAG), and the stuck check must not wait for that
        set_dag_paused(bench.url, "demo_slow", True)
        try:
            wait_for("a stuck notification", lambda: bool(events("stuck")), timeout=300)
        except AssertionError as exc:  # what the watch saw, so a timeout under load says why
            watch.send_signal(signal.SIGTERM)
            _out, err = watch.communicate(timeout=120)
            seen = [(e.entry.action, e.entry.outcome, e.entry.message) for e in bench.events("stuck-slow")]
            raise AssertionError(
                f"{exc}; received {[r['body']['event'] for r in receiver.received]}; "
                f"recorded {seen}; the watch's log ends:\n{err[-6000:]}"
            ) from None
        time.sleep(25)  # two more passes: the same situation is not notified again
        notified = events("stuck")
        assert len(notified) == 1, [n["message"] for n in notified]
        (stuck,) = notified
        assert stuck["spec"] == "stuck-slow"
        assert re.fullmatch(
            r"[123] run\(s\) queued for more than 1 min \(oldest since \S+Z\) while none starts \(Airflow "
            r"examines no run of a paused DAG\); likely cause: the DAG demo_slow is paused in "
            r"Airflow \(backfill runs wait for it\): unpause the DAG",
            stuck["message"],
        ), stuck["message"]
    finally:
        set_dag_paused(bench.url, "demo_slow", False)
        watch.send_signal(signal.SIGTERM)
        watch.communicate(timeout=120)
        receiver.close()
    assert [e.entry.outcome for e in bench.events("stuck-slow") if e.entry.action == "finding"] == ["stuck"]
