"""Hostile webhook receivers on real loopback HTTP servers: no part of the secret URL in any output, one deadline
per delivery however slowly a receiver answers, and bounded memory against a gzip bomb.

Before the fix: a receiver echoing its path in a short error body put the Slack-style secret into the log, `notify
status` (text and JSON) and `notifications.last_error` (only the whole URL string was scrubbed); a receiver
answering a byte a second held a delivery past its budget (httpx's timeouts are per read); a gzip bomb was
decoded whole (512 MiB) to show its first 120 characters.
"""

from __future__ import annotations

import gc
import io
import json
import logging
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from controller.adapters import logsetup
from controller.adapters.webhook import WebhookClient, WebhookError, scrub
from controller.cli import main
from controller.commands.loop.notify import DeliveryFailure, deliver
from tests.adapters.hostile import HostileReceiver, bomb, echo, gzip_bomb, trickle
from tests.adapters.store.conftest import postgres_admin, store_url
from tests.commands.loop.test_notify_fake import POLICY  # one receiver, ops, at HOOK_OPS
from tests.commands.reconcile.harness import Bench
from tests.fakes.airflow import FakeAirflow

__all__ = ["postgres_admin", "store_url"]  # the store tests' fixtures: SQLite and a throw-away PostgreSQL

SEGMENTS = ("T0SECRET1", "B0SECRET2", "xoxbSecretToken4242", "Qu3ryS3cretValue")
SECRET = "/services/{}/{}/{}?sig={}".format(*SEGMENTS)
BODY = {"event": "created", "spec": "s"}


def assert_no_secret(text: str) -> None:
    """Not a segment of the secret path or query, nor any 8 characters of one in a row, in any case."""
    folded = text.lower()
    for segment in SEGMENTS:
        for i in range(len(segment) - 7):
            assert segment[i : i + 8].lower() not in folded, (segment, text)


@pytest.fixture
def hostile() -> Iterator[Callable[..., HostileReceiver]]:
    opened: list[HostileReceiver] = []

    def _open(answer: Callable[..., None]) -> HostileReceiver:
        opened.append(HostileReceiver(answer))
        return opened[-1]

    yield _open
    for receiver in opened:
        receiver.close()


def failure(client: WebhookClient, url: str) -> WebhookError:
    with pytest.raises(WebhookError) as caught:
        client.post(url, BODY, "k1.ops", receiver="ops")
    return caught.value


# --- (1) a receiver that echoes the secret path ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("form", "said"),
    [
        (lambda path, host: f"no such webhook: {path}", "no such webhook: [redacted]"),
        (lambda path, host: f"POST http://{host}{path} refused", "POST http://{host}[redacted] refused"),
        (lambda path, host: f"unknown hook {quote(path, safe='')}", "unknown hook [redacted]"),
        (lambda path, host: json.dumps({"path": path}).replace("/", "\\/"), '{"path": "[redacted]"}'),
        (lambda path, host: f"invalid token {SEGMENTS[2]}, try again", "invalid token [redacted], try again"),
        (lambda path, host: f"token {SEGMENTS[2][:12]}… revoked", "token [redacted]… revoked"),
        (lambda path, host: f"NOT FOUND {path.upper()}", "NOT FOUND [redacted]"),
        (lambda path, host: f"bad sig={SEGMENTS[3]}", "bad [redacted]"),  # `sig=Qu3r`: 8 in a row of the query
        (lambda path, host: f"channel {SEGMENTS[0]} archived", "channel [redacted] archived"),
    ],
    ids=["path", "url", "percent-encoded", "escaped-slashes", "one-segment", "partial", "upper-case", "query", "id"],
)
def test_an_echoed_secret_path_is_scrubbed_from_the_error(
    hostile: Callable[..., HostileReceiver], form: Callable[[str, str], str], said: str
) -> None:
    receiver = hostile(echo(form))
    host = receiver.base.removeprefix("http://")
    with WebhookClient(timeout=5) as client:
        error = failure(client, receiver.base + SECRET)
    assert error.message == f"receiver ops: HTTP 404 {said.replace('{host}', host)}"
    assert_no_secret(error.message)


def test_scrub_keeps_scheme_host_and_words_and_removes_every_secret_form() -> None:
    url = "https://hooks.example.com/services/T0SECRET1/B0SECRET2/xoxbSecretToken4242?sig=Qu3ryS3cretValue"
    assert scrub("hooks.example.com said: no_service at https://hooks.example.com/services", url) == (
        "hooks.example.com said: no_service at https://hooks.example.com[redacted]"
    )
    assert scrub("b0secret2%2Fxoxbsecrettoken4242", url) == "[redacted]"
    assert scrub("user pa55word1 rejected", "https://bot:pa55word1@hooks.example.com/x") == "user [redacted] rejected"
    assert scrub("webhook s3cr3t gone", "http://receiver.invalid/hook/s3cr3t") == "webhook [redacted] gone"
    assert scrub("nothing to hide", "https://hooks.example.com") == "nothing to hide"


def test_an_exception_text_is_scrubbed_and_named(hostile: Callable[..., HostileReceiver]) -> None:
    receiver = hostile(echo(lambda path, host: "", status=200))
    receiver.close()  # nothing listens on its port any more
    with WebhookClient(timeout=2) as client:
        error = failure(client, receiver.base + SECRET)
    assert error.message == "receiver ops: ConnectError: [Errno 111] Connection refused"
    assert not error.timed_out


@pytest.fixture
def bench(tmp_path: Path, store_url: str) -> Iterator[Bench]:
    b = Bench(tmp_path, fake=FakeAirflow(), store_url=store_url)
    b.policy(POLICY)
    yield b
    b.close()


def test_an_echoed_path_reaches_no_log_status_or_store(
    hostile: Callable[..., HostileReceiver],
    bench: Bench,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    receiver = hostile(echo(lambda path, host: f"no such webhook: {path} ({quote(path, safe='')})"))
    bench.spec("s1")
    bench.run()
    policy, env = bench.reconciler().load().policy, {"HOOK_OPS": receiver.base + SECRET}
    logger, lines = logging.getLogger("controller"), io.StringIO()
    level, propagate = logger.level, logger.propagate
    handler = logsetup.configure("json", stream=lines)  # no `secrets`: the variable's name says nothing of a URL
    logger.addHandler(caplog.handler)
    caplog.clear()
    try:
        with WebhookClient(timeout=5) as client:
            stats = deliver(bench.store, policy, env, bench.settings(), client=client)
    finally:
        for added in (handler, caplog.handler):
            logger.removeHandler(added)
        logger.setLevel(level)
        logger.propagate = propagate
    said = "receiver ops: HTTP 404 no such webhook: [redacted] ([redacted])"
    assert (stats.failed, stats.delivered) == ([DeliveryFailure("ops", said)], [])
    (row,) = bench.store.due_notifications("9999")
    assert row.last_error == said
    logged = [json.loads(line)["event"] for line in lines.getvalue().splitlines()]
    assert logged == [f"notification {row.key} (created) not delivered; will retry: {said}"]
    assert [r.getMessage() for r in caplog.records] == logged

    monkeypatch.setenv("BACKFILLCTL_STORE_URL", bench.store_url)
    capsys.readouterr()
    assert main(["notify", "status"]) == 0
    text = capsys.readouterr().out
    assert text.splitlines()[1].endswith(f"  {said}")
    assert main(["notify", "status", "--format", "json"]) == 0
    (shown,) = json.loads(capsys.readouterr().out)["undelivered"]
    assert shown["last_error"] == said
    for output in (text, json.dumps(shown), lines.getvalue(), caplog.text):
        assert_no_secret(output)


# --- (2) a receiver that answers a byte a second ----------------------------------------------------------


@pytest.mark.parametrize("headers_first", [False, True], ids=["status-line", "body"])
def test_a_trickling_receiver_times_out_within_the_delivery_deadline(
    hostile: Callable[..., HostileReceiver], headers_first: bool
) -> None:
    receiver = hostile(trickle(headers_first=headers_first))
    with WebhookClient(timeout=2.5) as client:
        started = time.monotonic()
        error = failure(client, receiver.base + SECRET)
        elapsed = time.monotonic() - started
    assert 2.5 <= elapsed < 3.0, elapsed
    assert (error.message, error.timed_out) == ("receiver ops: timed out (no whole answer within 2.5 s)", True)


def test_a_trickling_receiver_over_tls_times_out_too(
    hostile: Callable[..., HostileReceiver], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    receiver = hostile(trickle(headers_first=False))
    monkeypatch.setenv("SSL_CERT_FILE", str(receiver.over_tls(tmp_path)))  # httpx trusts it (its `trust_env`)
    with WebhookClient(timeout=2) as client:
        started = time.monotonic()
        error = failure(client, receiver.base + SECRET)
        elapsed = time.monotonic() - started
    assert 2.0 <= elapsed < 2.5, elapsed
    assert (error.message, receiver.requests) == ("receiver ops: timed out (no whole answer within 2 s)", 1)


def test_a_trickling_receiver_holds_a_pass_no_longer_than_its_budget(
    hostile: Callable[..., HostileReceiver], tmp_path: Path
) -> None:
    receiver = hostile(trickle(headers_first=False))
    bench = Bench(tmp_path, fake=FakeAirflow())
    bench.policy(POLICY)
    bench.spec("s1")
    bench.spec("s2", dag="demo_hourly")
    bench.run()
    policy = bench.reconciler().load().policy
    env = {"HOOK_OPS": receiver.base + SECRET}
    with WebhookClient(timeout=30) as client:  # the pass's budget (2 s) is less than a delivery's own deadline
        started = time.monotonic()
        stats = deliver(bench.store, policy, env, bench.settings(), budget=2.0, client=client)
        elapsed = time.monotonic() - started
    assert 2.0 <= elapsed < 2.5, elapsed
    # cut short by the budget, not failed by the receiver: both rows wait for the next pass, no attempt counted
    assert (stats.failed, stats.delivered, stats.deferred) == ([], [], 2)
    assert [(r.attempts, r.last_error) for r in bench.store.due_notifications("9999")] == [(0, None), (0, None)]
    with WebhookClient(timeout=1.5) as client:  # a deadline of its own within the budget: a failure, retried
        stats = deliver(bench.store, policy, env, bench.settings(), budget=10.0, client=client)
    assert (stats.failed, stats.deferred) == (
        [DeliveryFailure("ops", "receiver ops: timed out (no whole answer within 1.5 s)")],
        1,
    )
    bench.close()


# --- (3) a gzip bomb ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bomb_body() -> bytes:
    return gzip_bomb()


@pytest.mark.parametrize(
    ("status", "outcome"),
    [(500, "receiver ops: HTTP 500 (gzip-encoded answer, not read)"), (200, None)],
    ids=["error", "success"],
)
def test_a_gzip_bomb_is_never_decoded(
    hostile: Callable[..., HostileReceiver], bomb_body: bytes, status: int, outcome: str | None
) -> None:
    assert 400_000 < len(bomb_body) < 600_000  # ~0.5 MB on the wire, 512 MiB decoded
    receiver = hostile(bomb(bomb_body, status))
    gc.collect()
    tracemalloc.start()
    try:
        with WebhookClient(timeout=10) as client:
            try:
                answered: int | str = client.post(receiver.base + SECRET, BODY, "k1.ops", receiver="ops")
            except WebhookError as exc:
                answered = exc.message
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert answered == (outcome or 200)
    assert peak < 16 * 2**20, f"{peak:,} bytes"  # decoded, the body alone is 512 MiB (seen: 0.1 MB)
