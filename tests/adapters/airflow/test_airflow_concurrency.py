"""Requests in flight to one Airflow: `BACKFILLCTL_AIRFLOW_MAX_CONCURRENCY` (default 2, for MWAA's, Composer's and
Astro's limits) read once with the settings and given to the client; a dry run at a time whatever that bound; and a
429's `Retry-After` waited exactly before the request is sent again."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from controller.adapters.airflow import AirflowClient
from controller.commands.runtime.session import make_client
from controller.commands.runtime.settings import Settings
from controller.core.model.secret import Secret
from controller.core.rules.retrying import RETRY_AFTER_LIMIT, Backoff, waits_too_long
from controller.errors import AirflowUnavailable, ConfigError
from tests.cli.test_failure_paths import cli
from tests.fakes.loopback import serving

VARIABLE = "BACKFILLCTL_AIRFLOW_MAX_CONCURRENCY"
HOLD = 0.03  # seconds a request stays in flight: the others pile up behind the bound


def test_unset_or_empty_the_bound_is_two() -> None:
    assert Settings.from_env({}).airflow_max_concurrency == 2
    assert Settings.from_env({VARIABLE: ""}).airflow_max_concurrency == 2
    assert Settings.from_env({VARIABLE: "  "}).airflow_max_concurrency == 2
    assert Settings().airflow_max_concurrency == 2


@pytest.mark.parametrize(("value", "bound"), [("1", 1), (" 5 ", 5), ("64", 64), ("007", 7)])
def test_a_whole_number_from_1_to_64_is_the_bound(value: str, bound: int) -> None:
    assert Settings.from_env({VARIABLE: value}).airflow_max_concurrency == bound


@pytest.mark.parametrize("value", ["0", "-1", "65", "1.5", "two", "2e1", "+3", "٣"])
def test_any_other_value_names_the_variable_and_the_fix(value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Settings.from_env({VARIABLE: value})
    assert caught.value.message == f"{VARIABLE}={value!r} is not a whole number of requests from 1 to 64"
    assert caught.value.hint == (
        f"e.g. {VARIABLE}=2 (the default) for MWAA, Cloud Composer or Astro; unset it for the default"
    )


def test_a_bad_bound_stops_a_command_before_anything_is_read(tmp_path: Path) -> None:
    done = cli(tmp_path, "plan", "--no-store", BACKFILLCTL_AIRFLOW_URL="http://127.0.0.1:9", **{VARIABLE: "0"})
    assert (done.returncode, done.stdout) == (1, "")
    assert done.stderr == (
        f"error: {VARIABLE}='0' is not a whole number of requests from 1 to 64\n"
        f"  hint: e.g. {VARIABLE}=2 (the default) for MWAA, Cloud Composer or Astro; unset it for the default\n"
    )


class Peak:
    def __init__(self) -> None:
        self.lock, self.now, self.peak = threading.Lock(), Counter[str](), Counter[str]()

    def hold(self, path: str) -> None:
        kinds = ("all", path)
        with self.lock:
            self.now.update(kinds)
            self.peak |= Counter({k: self.now[k] for k in kinds})
        time.sleep(HOLD)
        with self.lock:
            self.now.subtract(kinds)


@pytest.fixture
def airflow() -> Iterator[tuple[str, Peak]]:
    """A real HTTP server on loopback that answers the version, holding each request `HOLD` seconds."""
    peak = Peak()

    def version(path: str) -> tuple[int, dict[str, str]]:
        peak.hold(path)
        return 200, {"version": "3.3.2"}

    with serving(version) as url:
        yield url, peak


@pytest.mark.parametrize(("environ", "bound"), [({}, 2), ({VARIABLE: "3"}, 3), ({VARIABLE: "1"}, 1)])
def test_the_commands_client_keeps_the_settings_bound_whatever_the_callers_pool(
    airflow: tuple[str, Peak], environ: dict[str, str], bound: int
) -> None:
    url, peak = airflow
    settings = Settings.from_env(
        {"BACKFILLCTL_AIRFLOW_URL": url, "BACKFILLCTL_AIRFLOW_TOKEN": "token-of-the-tests", **environ}
    )
    with make_client(settings, preflight=False) as client, ThreadPoolExecutor(max_workers=8) as pool:
        assert (
            list(pool.map(lambda _n: client.transport.json("GET", "/api/v2/version"), range(16)))
            == [{"version": "3.3.2"}] * 16
        )
    assert peak.peak["all"] == bound


def test_dry_runs_go_one_at_a_time_beside_the_other_reads() -> None:
    peak = Peak()

    def handler(request: httpx.Request) -> httpx.Response:
        peak.hold(request.url.path)
        return httpx.Response(200, json={"backfills": []})

    client = AirflowClient(
        "http://fake", token=Secret("token-of-the-tests"), transport=httpx.MockTransport(handler), max_concurrency=4
    )
    calls = [("POST", "/api/v2/backfills/dry_run"), ("GET", "/api/v2/backfills")] * 6
    with client, ThreadPoolExecutor(max_workers=12) as pool:
        list(pool.map(lambda call: client.transport.json(*call, json={}, idempotent=True), calls))
    assert (peak.peak["all"], peak.peak["/api/v2/backfills/dry_run"]) == (4, 1)


def answering(*steps: httpx.Response) -> tuple[AirflowClient, list[str], list[float]]:
    """A client whose server answers `steps` in turn; the paths it was sent and the waits it made."""
    queue, sent, slept = list(steps), list[str](), list[float]()

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(f"{request.method} {request.url.path}")
        return queue.pop(0)

    backoff = Backoff(base=0.5, cap=4.0, jitter=0.0, attempts=3)
    client = AirflowClient(
        "http://fake",
        token=Secret("token-of-the-tests"),
        transport=httpx.MockTransport(handler),
        backoff=backoff,
        sleep=slept.append,
    )
    return client, sent, slept


BUSY = {"detail": "Too Many Requests"}


def test_a_429s_retry_after_is_waited_before_the_read_is_sent_again() -> None:
    client, sent, slept = answering(
        httpx.Response(429, headers={"Retry-After": "7"}, json=BUSY), httpx.Response(200, json={"version": "3.3.2"})
    )
    assert client.transport.json("GET", "/api/v2/version") == {"version": "3.3.2"}
    assert (sent, slept) == (["GET /api/v2/version"] * 2, [7.0])


def test_a_429_on_a_create_is_sent_again_after_its_retry_after_as_nothing_was_created() -> None:
    client, sent, slept = answering(
        httpx.Response(429, headers={"Retry-After": "3"}, json=BUSY), httpx.Response(201, json={"id": 1})
    )
    assert client.transport.json("POST", "/api/v2/backfills", json={}) == {"id": 1}
    assert (sent, slept) == (["POST /api/v2/backfills"] * 2, [3.0])


def test_a_retry_after_shorter_than_the_backoff_or_not_seconds_waits_the_backoff() -> None:
    client, _sent, slept = answering(
        httpx.Response(429, headers={"Retry-After": "0.2"}, json=BUSY),
        httpx.Response(429, headers={"Retry-After": "Wed, 21 Oct 2026 07:28:00 GMT"}, json=BUSY),
        httpx.Response(200, json={}),
    )
    assert client.transport.json("GET", "/api/v2/version") == {}
    assert slept == [0.5, 1.0]


def test_429s_past_the_attempts_are_an_unavailable_airflow_after_each_wait() -> None:
    client, sent, slept = answering(*[httpx.Response(429, headers={"Retry-After": "2"}, json=BUSY)] * 3)
    with pytest.raises(AirflowUnavailable) as caught:
        client.transport.json("GET", "/api/v2/dags")
    assert caught.value.message == "GET /api/v2/dags -> 429: Too Many Requests"
    assert (len(sent), slept) == (3, [2.0, 2.0])


@pytest.mark.parametrize("asked", ["61", "3600", "1e9", "inf"])
def test_a_retry_after_longer_than_a_pass_waits_is_not_slept_on(asked: str) -> None:
    """A server's Retry-After is outside text: an hour (or `inf`, which `time.sleep` cannot take) never holds the
    pass; the read fails now, saying why, and the next pass asks again."""
    client, sent, slept = answering(httpx.Response(429, headers={"Retry-After": asked}, json=BUSY))
    with pytest.raises(AirflowUnavailable) as caught:
        client.transport.json("GET", "/api/v2/dags")
    shown = f"{float(asked):.0f}"
    assert caught.value.message == (
        f"GET /api/v2/dags -> 429: Too Many Requests; Airflow asks to be asked again in {shown} s, longer than a "
        "pass waits (60 s): the next pass asks again"
    )
    assert (sent, slept, caught.value.status) == (["GET /api/v2/dags"], [], 429)


@pytest.mark.parametrize(("asked", "waited"), [("60", 60.0), ("-5", 0.5), ("nan", 0.5), ("0", 0.5)])
def test_a_retry_after_up_to_the_limit_is_waited_and_one_that_is_no_wait_leaves_the_backoff(
    asked: str, waited: float
) -> None:
    client, _sent, slept = answering(
        httpx.Response(429, headers={"Retry-After": asked}, json=BUSY), httpx.Response(200, json={})
    )
    assert client.transport.json("GET", "/api/v2/version") == {}
    assert slept == [waited]


def test_the_backoff_takes_a_retry_after_only_within_its_limit() -> None:
    backoff = Backoff(base=1.0, cap=8.0, jitter=0.5, attempts=4)
    assert [backoff.delay(3, 0.5, after) for after in (None, 2.0, 5.0, 60.0, 60.5, -1.0)] == [
        5.0,
        5.0,
        5.0,
        60.0,
        5.0,
        5.0,
    ]
    assert [waits_too_long(after) for after in (None, 59.9, 60.0, 60.01, float("inf"), float("nan"))] == [
        False,
        False,
        False,
        True,
        True,
        False,
    ]
    assert RETRY_AFTER_LIMIT == 60.0
