"""Each notification event once, under its own name, from a real canary and a real halt (Apache Airflow 3.3.2).

One `reconcile --watch` drives two specs at once, on DAGs of their own, and a loopback webhook receiver records
what it is sent:
- `events-canary` on `demo_chunked`: 12 hourly runs in chunks of 4, the first a canary; `promote: true` is
  written when it waits in AwaitingPromotion; then two more chunks and Succeeded;
- `events-halt` on `demo_halting` (fails every third hour): 12 hourly runs, one at a time, halted above 20 %
  failed; a new `resume` with a ratio it cannot reach (0.9) lets it finish: CompletedWithFailures.

Each event that the audit records cause must arrive exactly once (`created` per chunk, `promoted`, `halted`, the
outcome), and an observed phase is only ever sent as the event of that phase. Dates are a random day in
2015–2018 (no other test uses these DAGs there), so the test also runs again on a kept Airflow.
"""

from __future__ import annotations

import secrets
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tests.commands.reconcile.harness import Bench, real_bench
from tests.support.receivers import WebhookReceiver, free_port

pytestmark = pytest.mark.airflow
DAGS = ("demo_chunked", "demo_halting")
HOUR = timedelta(hours=1)
POLICY = """\
version: 1
notify:
  receivers:
    ops: {webhook_env: BACKFILLCTL_WEBHOOK_OPS, format: json}
  default_receivers: [ops]
"""
CANARY, HALT = "events-canary", "events-halt"
CANARY_EXECUTION = "{chunk_runs: 4, canary_runs: 4}"


def z(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def a_day() -> datetime:
    return datetime(2015, 1, 1, tzinfo=UTC) + timedelta(days=secrets.randbelow(4 * 365))


@pytest.fixture
def bench(tmp_path: Path, airflow_url: str) -> Iterator[Bench]:
    with real_bench(tmp_path, airflow_url, *DAGS) as b:
        yield b


def phases(bench: Bench) -> dict[str, str]:
    return {name: binding.phase.value for name, binding in bench.store.bindings().items()}


def snake(phase: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in phase).lstrip("_")


def test_a_real_canary_and_a_real_halt_send_each_event_once_under_its_own_name(bench: Bench) -> None:
    port = free_port()
    receiver = WebhookReceiver(port)
    bench.policy(POLICY)
    canary_first, halt_first = a_day(), a_day()
    canary: dict[str, Any] = {"dag": "demo_chunked", "start": z(canary_first), "end": z(canary_first + 11 * HOUR)}
    halt: dict[str, Any] = {"dag": "demo_halting", "start": z(halt_first), "end": z(halt_first + 11 * HOUR)}
    bench.spec(CANARY, mar=4, execution=CANARY_EXECUTION, **canary)
    bench.spec(HALT, mar=1, execution="{halt_on_failure_ratio: 0.2}", **halt)
    env = bench.cli_env(BACKFILLCTL_WEBHOOK_OPS=f"http://127.0.0.1:{port}/ops")
    watch = subprocess.Popen(
        [sys.executable, "-m", "controller", "reconcile", "--watch", "--interval", "2"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen: list[dict[str, str]] = []
    try:
        edited: set[str] = set()
        deadline = time.monotonic() + 600
        while (now := phases(bench)).get(CANARY) != "Succeeded" or now.get(HALT) != "CompletedWithFailures":
            seen.append(now)
            assert watch.poll() is None, watch.communicate()[1][-3000:]
            assert time.monotonic() < deadline, f"not done after 600 s: {now}"
            if now.get(CANARY) == "AwaitingPromotion" and CANARY not in edited:
                bench.spec(CANARY, mar=4, execution=CANARY_EXECUTION, promote="true", **canary)
                edited.add(CANARY)
            if now.get(HALT) == "Halted" and HALT not in edited:
                bench.spec(HALT, mar=1, execution="{halt_on_failure_ratio: 0.9}", resume='"CHG-2 fixed"', **halt)
                edited.add(HALT)
            time.sleep(1)
        assert edited == {CANARY, HALT}, seen
        done = time.monotonic() + 60  # the pass that recorded the outcomes delivers them; then two more passes
        while sum(r["body"]["event"] in ("succeeded", "completed_with_failures") for r in receiver.received) < 2:
            assert time.monotonic() < done, [r["body"]["event"] for r in receiver.received]
            time.sleep(1)
        time.sleep(6)
    finally:
        watch.send_signal(signal.SIGTERM)
        _out, err = watch.communicate(timeout=120)
        receiver.close()
    assert "Traceback" not in err, err[-3000:]

    records = {e.seq: e.entry for e in bench.events()}
    got = receiver.received
    for r in got:
        entry = records[r["body"]["audit_seq"]]
        print(r["body"]["spec"], r["body"]["event"], f"{entry.action}/{entry.phase} {entry.outcome}", entry.message)
    assert len({r["key"] for r in got}) == len(got)  # exactly once: every receiver answered 200, nothing repeats

    def events(spec: str) -> list[str]:
        return [r["body"]["event"] for r in got if r["body"]["spec"] == spec]

    assert events(CANARY) == ["created", "promoted", "created", "created", "succeeded"]
    assert events(HALT) == ["created", "halted", "completed_with_failures"]
    # an observed phase is sent as its own event, never under another event's name
    for r in got:
        entry = records[r["body"]["audit_seq"]]
        if entry.action == "observe":
            assert r["body"]["event"] == snake(entry.outcome or ""), (r["body"]["event"], entry.outcome)
    # and every event the audit log holds was sent: each create outcome of a chunk is one `created`
    created = [e for e in records.values() if (e.action, e.outcome) == ("create", "created")]
    assert len(created) == 3 + 1
    assert bench.store.verify().ok
