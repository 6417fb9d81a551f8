"""Every answer from outside is bounded, checked and safe to hash and show (B3, R2).

Streaming faults come from a real loopback server (`tests/fakes/hostile.py`): an answer that trickles a byte every
3 s, 2 MB of gzip that inflates to 2 GiB (made as it is sent), JSON nested 200,000 deep. From Prometheus each
makes the analysis inconclusive, from Airflow the observation incomplete, with the reason; each pass ends in well
under 60 s and 400 MB. A create whose answer is lost (cut off, over the cap, malformed) is adopted, never sent
again. A lone surrogate in an Airflow answer is shown and recorded escaped, and the audit chain verifies.
"""

from __future__ import annotations

import json
import time
import tracemalloc
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from controller.adapters.airflow import AirflowClient
from controller.adapters.prometheus import PrometheusClient
from controller.cli import main
from controller.commands.reconcile.analysis import Analyst
from controller.core.model.analysis import Inconclusive
from controller.core.model.capabilities import judge
from controller.core.model.guards import Guard, GuardKind
from controller.core.model.secret import Secret
from controller.core.rules.retrying import Backoff
from controller.errors import AirflowBadAnswer, AirflowError, AirflowUnavailable
from tests.adapters.airflow.test_airflow_faults import BACKFILL
from tests.commands.reconcile.harness import Bench
from tests.core.documents.test_escaping import cli_bench
from tests.fakes.airflow import FakeAirflow
from tests.fakes.hostile import Hostile, Route, bomb_size, cut_off, deep_json, gzip_bomb, raw, trickle

__all__ = ["cli_bench"]  # the CLI in this process on the fake Airflow, with one spec, `hostile`

MIB = 2**20
DEADLINE = 3.0  # seconds: the clients' timeout in these tests (the whole answer, not one read)


class Measured:
    """How long a block took, and the most memory Python held during it (tracemalloc)."""

    seconds: float
    peak: int

    def __enter__(self) -> Measured:
        tracemalloc.start()
        self._started = time.monotonic()
        return self

    def __exit__(self, *_: object) -> None:
        self.seconds = time.monotonic() - self._started
        self.peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()


@pytest.fixture
def hostile() -> Iterator[Hostile]:
    with Hostile(FakeAirflow()) as server:
        yield server


def airflow_client(url: str, attempts: int = 1) -> AirflowClient:
    return AirflowClient(
        url,
        username="admin",
        password=Secret("admin"),
        timeout=DEADLINE,
        backoff=Backoff(base=0.0, cap=0.0, jitter=0.0, attempts=attempts),
        sleep=lambda _s: None,
    )


# --- B3: each hostile answer, from each side -------------------------------------------------------------------

HOSTILE: dict[str, Callable[[], Route]] = {
    "trickle": lambda: trickle(json.dumps(BACKFILL).encode(), every=3.0),
    "gzip-bomb": gzip_bomb,
    "deep-json": deep_json,
}
AIRFLOW_REASONS = {
    "trickle": f"GET /api/v2/backfills/7: no whole answer within {DEADLINE:g}s",
    "gzip-bomb": "GET /api/v2/backfills/7 -> 200: the answer is larger than 32 MiB",
    "deep-json": "GET /api/v2/backfills/7 -> 200: the answer is JSON nested deeper than 128 levels (application/json)",
}
PROMETHEUS_REASONS = {
    "trickle": f"did not answer within {DEADLINE:g}s (the whole answer, not one read)",
    "gzip-bomb": "answered: the answer is larger than 1 MiB",
    "deep-json": "answered 200: the answer is JSON nested deeper than 128 levels",
}


def test_the_bomb_is_two_megabytes_for_two_gibibytes() -> None:
    assert 2_000_000 < bomb_size() < 2_200_000


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_an_airflow_answer_is_bounded(hostile: Hostile, kind: str) -> None:
    hostile.routes["GET", "/api/v2/backfills/7"] = HOSTILE[kind]()
    client = airflow_client(hostile.url)
    client.version()
    with Measured() as used, pytest.raises(AirflowError) as caught:
        client.get_backfill(7)
    assert caught.value.message == AIRFLOW_REASONS[kind]
    assert type(caught.value) is (AirflowUnavailable if kind == "trickle" else AirflowBadAnswer)
    _assert_bounded(kind, used, memory=40 * MIB)  # the 32 MiB cap and a step of inflating, never twice the cap


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_prometheus_answer_is_bounded(hostile: Hostile, kind: str) -> None:
    hostile.routes["GET", "/api/v1/query"] = HOSTILE[kind]()
    with Measured() as used, PrometheusClient(hostile.url, timeout=DEADLINE) as client:
        found = client.query("max(warehouse_cpu_ratio)")
    assert found == Inconclusive(f"Prometheus {hostile.url} {PROMETHEUS_REASONS[kind]}")
    _assert_bounded(kind, used, memory=8 * MIB)  # the 1 MiB cap


def _assert_bounded(kind: str, used: Measured, memory: int) -> None:
    if kind == "trickle":  # a byte every 3 s: no read waits past the deadline
        assert DEADLINE <= used.seconds < DEADLINE + 0.5, used.seconds
    else:
        assert used.seconds < 20, used.seconds
    assert used.peak < memory, used.peak


class LoopBench(Bench):
    """A bench whose clients reach the fake Airflow through the loopback server, with short deadlines."""

    def client(self) -> AirflowClient:
        client = airflow_client(self.url, attempts=2)
        self.clients.append(client)
        return client


@pytest.fixture
def loop_bench(tmp_path: Path, hostile: Hostile) -> Iterator[LoopBench]:
    bench = LoopBench(tmp_path, url=hostile.url)
    bench.fake = hostile.fake
    yield bench
    bench.close()


LISTING_REASONS = {
    "trickle": f"GET /api/v2/backfills: no whole answer within {DEADLINE:g}s",
    "gzip-bomb": "GET /api/v2/backfills -> 200: the answer is larger than 32 MiB",
    "deep-json": "GET /api/v2/backfills -> 200: the answer is JSON nested deeper than 128 levels (application/json)",
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_outside_answers_are_bounded_in_a_pass_airflow(loop_bench: LoopBench, hostile: Hostile, kind: str) -> None:
    loop_bench.spec("s1")
    hostile.routes["GET", "/api/v2/backfills"] = HOSTILE[kind]()
    with Measured() as used:
        result = loop_bench.run()
    assert result.errors == [f"DAG demo_daily was not fully observed: {LISTING_REASONS[kind]}"]
    assert result.applied == []
    assert hostile.seen.count(("POST", "/api/v2/backfills")) == 0
    assert used.seconds < 60, used.seconds
    assert used.peak < 400 * MIB, used.peak
    assert loop_bench.store.verify().ok


ANALYSIS_POLICY = """\
    version: 1
    downstream:
      warehouse:
        max_active_runs: 8
        analysis:
          prometheus: {url_env: BACKFILLCTL_PROMETHEUS_URL, query: "max(warehouse_cpu_ratio)"}
          pause_above: 0.85
          max_sample_age: 2m
          on_inconclusive: {pause_after: 10m}
"""


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_outside_answers_are_bounded_in_a_pass_prometheus(tmp_path: Path, hostile: Hostile, kind: str) -> None:
    bench = Bench(tmp_path, fake=FakeAirflow())
    bench.policy(ANALYSIS_POLICY)
    bench.spec("wh", downstream="[warehouse]")
    hostile.routes["GET", "/api/v1/query"] = HOSTILE[kind]()
    reconciler = bench.reconciler()

    def connect(_name: str, env: Mapping[str, str]) -> PrometheusClient:
        return PrometheusClient(env["BACKFILLCTL_PROMETHEUS_URL"], timeout=DEADLINE)

    reconciler.analyst = Analyst(bench.store, {"BACKFILLCTL_PROMETHEUS_URL": hostile.url}, connect)
    try:
        with Measured() as used:
            result = reconciler.run_once()
    finally:
        bench.close()
    (item,) = result.current.items
    assert (item.kind.value, item.guard) == ("wait", Guard(GuardKind.ANALYSIS, "warehouse"))
    reason = f"inconclusive: warehouse: Prometheus {hostile.url} {PROMETHEUS_REASONS[kind]}; pausing at "
    assert item.reason.startswith(reason), item.reason
    assert bench.fake is not None
    assert bench.fake.backfills == {}
    assert used.seconds < 60, used.seconds
    assert used.peak < 400 * MIB, used.peak


# --- a create whose answer is lost ------------------------------------------------------------------------------

LOST: dict[str, Callable[[int, bytes], Route]] = {
    "cut-off": lambda status, body: cut_off(status, body, sent=10),
    "over-the-cap": lambda _status, _body: gzip_bomb(64 * MIB),
    "malformed": lambda _status, _body: raw(200, b'{"id": "seven"}'),
    "not-json": lambda _status, _body: raw(200, b"<html>created</html>", Content_Type="text/html"),
}


@pytest.mark.parametrize("how", sorted(LOST))
def test_a_create_whose_answer_is_lost_is_adopted_never_sent_twice(
    loop_bench: LoopBench, hostile: Hostile, how: str
) -> None:
    loop_bench.spec("s1")
    hostile.once["POST", "/api/v2/backfills"] = hostile.processed(LOST[how])
    result = loop_bench.run()
    assert [o for _, o in result.applied] == ["recovered-after-ambiguous"]
    assert hostile.seen.count(("POST", "/api/v2/backfills")) == 1
    assert hostile.fake is not None
    assert list(hostile.fake.backfills) == [1]
    assert loop_bench.trail("s1") == [
        ("create", "intent", None),
        ("create", "outcome", "recovered-after-ambiguous"),
    ]
    again = loop_bench.run()
    assert again.applied == []
    assert hostile.seen.count(("POST", "/api/v2/backfills")) == 1
    assert loop_bench.store.verify().ok


def scripted(*bodies: Any, version: str = "3.3.2") -> AirflowClient:
    queue = [b if isinstance(b, httpx.Response) else httpx.Response(200, json=b) for b in bodies]
    caps = judge(version).capabilities
    return AirflowClient(
        "http://airflow.test",
        token=Secret("tok"),
        transport=httpx.MockTransport(lambda _request: queue.pop(0)),
        backoff=Backoff(base=0.0, cap=0.0, jitter=0.0, attempts=1),
        capabilities=caps,
    )


# --- R2: a lone surrogate in an answer --------------------------------------------------------------------------

SURROGATE_BODY = b'{"detail": "bad \\ud800 x"}'


@pytest.mark.parametrize(
    ("method", "path", "status", "shown"),
    [
        ("POST", "/api/v2/backfills/dry_run", 422, "hostile: Airflow refuses it: bad \\ud800 x"),
        (
            "GET",
            "/api/v2/backfills",
            500,
            "DAG demo_daily was not fully observed: GET /api/v2/backfills -> 500: bad \\ud800 x",
        ),
    ],
    ids=["dry-run-422", "backfills-500"],
)
def test_outside_text_never_crashes_the_chain(
    cli_bench: Bench, capsys: pytest.CaptureFixture[str], method: str, path: str, status: int, shown: str
) -> None:
    assert cli_bench.fake is not None
    for _ in range(2):  # the client's two attempts at a 500
        cli_bench.fake.fault(method, path, lambda _r: httpx.Response(status, content=SURROGATE_BODY))
    assert main(["reconcile", "--once"]) == 1
    out, err = capsys.readouterr()
    assert f"error: {shown}\n" in err
    (out + err).encode("utf-8")  # printable as UTF-8: nothing unencodable reached the terminal
    assert cli_bench.store.verify().ok
    recorded = [e.entry.message or "" for e in cli_bench.events()]
    assert all("\ud800" not in m for m in recorded)


def test_text_from_airflow_arrives_storable() -> None:
    """Lone surrogates and NULs in any string of an answer, keys too, arrive as their escapes: every value read
    from Airflow can be hashed, stored and shown."""
    body = (
        b'{"backfills": [{"id": 7, "dag_id": "d\\ud800", "from_date": "2025-01-01T00:00:00Z", '
        b'"to_date": "2025-01-02T00:00:00Z", "reprocess_behavior": "none", "max_active_runs": 1, "is_paused": false, '
        b'"dag_run_conf": {"k\\udfff": ["v\\u0000", "\\ud83d\\ude00"]}, "created_at": "2026-11-29T10:00:00Z", '
        b'"completed_at": null}], "total_entries": 1}'
    )
    (backfill,) = scripted(httpx.Response(200, content=body)).list_backfills("d")
    assert backfill.dag_id == "d\\ud800"
    assert backfill.dag_run_conf == {"k\\udfff": ["v\\u0000", "\U0001f600"]}
