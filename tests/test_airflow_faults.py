"""Fault injection on the client via httpx.MockTransport, and the pure retry table.

Scripted responses only: the behaviour of the real server is pinned by tests/airflow/test_contract.py.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable

import httpx
import pytest

from controller.adapters.airflow import AirflowClient
from controller.adapters.airflow.transport import translate_any
from controller.core.model.airflow import BackfillRequest
from controller.core.model.capabilities import newest
from controller.core.model.secret import Secret
from controller.core.rules.retrying import Backoff, Failure, Verdict, classify, outcome_of, request_kind
from controller.errors import AirflowAmbiguous, AirflowAuthError, AirflowError, AirflowInvalid, AirflowUnavailable
from tests.airflow.test_contract import day

BACKFILL = {
    "id": 7,
    "dag_id": "d",
    "from_date": "2025-01-01T00:00:00Z",
    "to_date": "2025-01-02T00:00:00Z",
    "reprocess_behavior": "none",
    "max_active_runs": 1,
    "is_paused": False,
    "dag_run_conf": None,
    "created_at": "2026-11-29T10:00:00Z",
    "completed_at": None,
}
REQUEST = BackfillRequest("d", day("2025-01-01"), day("2025-01-02"))
Handler = Callable[[httpx.Request], httpx.Response]


def scripted(*steps: httpx.Response | Exception) -> tuple[AirflowClient, list[httpx.Request], list[float]]:
    sent: list[httpx.Request] = []
    sleeps: list[float] = []
    queue = list(steps)

    def handler(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        step = queue.pop(0)
        if isinstance(step, Exception):
            raise step
        return step

    client = AirflowClient(
        "http://airflow.test",
        token=Secret("CANARY-tok-91"),
        transport=httpx.MockTransport(handler),
        backoff=Backoff(base=0.5, cap=4, jitter=0.0, attempts=4),
        sleep=sleeps.append,
        rng=lambda: 0.5,
        capabilities=newest(),  # the preflight's, from a 3.3.2 server
    )
    return client, sent, sleeps


def test_backoff_schedule_is_capped_and_jittered() -> None:
    backoff = Backoff(base=0.5, cap=4.0, jitter=0.25, attempts=6)
    assert [backoff.delay(n, 0.0) for n in range(1, 6)] == [0.5, 1.0, 2.0, 4.0, 4.0]
    assert backoff.delay(3, 0.999) == pytest.approx(2.0 * 1.24975)
    assert backoff.delay(1, 0.0, retry_after=3.0) == 3.0


@pytest.mark.parametrize(
    ("method", "status", "verdict"),
    [
        ("GET", 200, Verdict.OK),
        ("GET", 503, Verdict.RETRY),
        ("GET", 429, Verdict.RETRY),
        ("POST", 503, Verdict.AMBIGUOUS),
        ("POST", 500, Verdict.AMBIGUOUS),
        ("PUT", 502, Verdict.RETRY),
        ("POST", 409, Verdict.OBSERVE),
        ("POST", 422, Verdict.PERMANENT),
        ("GET", 404, Verdict.PERMANENT),
        ("POST", 400, Verdict.PERMANENT),
        ("GET", 401, Verdict.PERMANENT),
    ],
)
def test_status_classification(method: str, status: int, verdict: Verdict) -> None:
    assert classify(request_kind(method), outcome_of(status)) is verdict


def test_failure_classification() -> None:
    assert classify(request_kind("POST"), Failure.NOT_SENT) is Verdict.RETRY
    assert classify(request_kind("POST"), Failure.AFTER_SEND) is Verdict.AMBIGUOUS
    assert classify(request_kind("GET"), Failure.AFTER_SEND) is Verdict.RETRY


def httpx_exception_classes() -> list[type[Exception]]:
    return [obj for _, obj in inspect.getmembers(httpx) if inspect.isclass(obj) and issubclass(obj, Exception)]


def construct(cls: type[Exception]) -> Exception:
    if cls is httpx.HTTPStatusError:
        return cls("boom", request=httpx.Request("GET", "http://x"), response=httpx.Response(500))
    try:
        return cls("boom")
    except TypeError:
        return cls()


def test_every_httpx_exception_class_is_mapped() -> None:
    classes = httpx_exception_classes()
    assert len(classes) >= 25
    for cls in classes:
        exc = construct(cls)
        mapped = translate_any("POST", "/api/v2/backfills", exc)
        assert isinstance(mapped, AirflowError), cls
        assert mapped.message.startswith("POST /api/v2/backfills failed: "), cls


def test_get_retries_503_then_succeeds(caplog: pytest.LogCaptureFixture) -> None:
    client, sent, sleeps = scripted(
        httpx.Response(503, json={"detail": "busy"}), httpx.ConnectError("refused"), httpx.Response(200, json=BACKFILL)
    )
    assert client.get_backfill(7).id == 7
    assert len(sent) == 3
    assert sleeps == [0.5, 1.0]
    assert [r.getMessage() for r in caplog.records] == [
        "attempt #1/4 failed; will retry in 0.5s: GET /api/v2/backfills/7 -> 503: busy",
        "attempt #2/4 failed; will retry in 1.0s: GET /api/v2/backfills/7 failed: ConnectError",
    ]


def test_get_gives_up_after_the_last_attempt() -> None:
    client, sent, sleeps = scripted(*[httpx.Response(500, json={"detail": "x"})] * 4)
    with pytest.raises(AirflowUnavailable) as caught:
        client.get_backfill(7)
    assert (len(sent), sleeps, caught.value.status) == (4, [0.5, 1.0, 2.0], 500)


@pytest.mark.parametrize(
    "fault",
    [
        httpx.ReadTimeout("slow"),
        httpx.RemoteProtocolError("dropped"),
        httpx.Response(503, json={"detail": "Database is locked. Backfill creation is not supported on SQLite"}),
        httpx.Response(500, text=""),
    ],
    ids=["read-timeout", "dropped", "503-locked", "500-empty"],
)
def test_create_that_may_have_landed_is_ambiguous_and_not_retried(fault: httpx.Response | Exception) -> None:
    client, sent, sleeps = scripted(fault)
    with pytest.raises(AirflowAmbiguous):
        client.create(REQUEST)
    assert (len(sent), sleeps) == (1, [])


def test_create_connect_error_is_retried_because_nothing_was_sent() -> None:
    client, sent, _ = scripted(httpx.ConnectError("refused"), httpx.Response(200, json=BACKFILL))
    assert client.create(REQUEST).id == 7
    assert len(sent) == 2


def test_create_sends_only_fields_the_spec_sets_and_which_code_reruns_use() -> None:
    client, sent, _ = scripted(httpx.Response(200, json=BACKFILL))
    client.create(REQUEST)
    assert sent[0].content == (
        b'{"dag_id":"d","from_date":"2025-01-01T00:00:00Z","to_date":"2025-01-02T00:00:00Z",'
        b'"run_on_latest_version":true}'
    )


def test_422_is_permanent_and_detail_is_truncated() -> None:
    client, sent, _ = scripted(httpx.Response(422, json={"detail": "x" * 1000}))
    with pytest.raises(AirflowInvalid) as caught:
        client.create(REQUEST)
    assert len(sent) == 1
    assert len(caught.value.detail) == 256


def test_pydantic_422_list_detail_is_readable() -> None:
    detail = [{"type": "extra_forbidden", "loc": ["body", "bogus"], "msg": "Extra inputs are not permitted"}]
    client, _, _ = scripted(httpx.Response(422, json={"detail": detail}))
    with pytest.raises(AirflowInvalid) as caught:
        client.planned_runs(REQUEST)
    assert caught.value.detail == "body.bogus: Extra inputs are not permitted"


def test_pagination_failure_on_page_two_surfaces() -> None:
    page1 = {"backfills": [dict(BACKFILL, id=i) for i in range(100)], "total_entries": 150}
    client, sent, _ = scripted(httpx.Response(200, json=page1), *[httpx.Response(500, json={"detail": "x"})] * 4)
    with pytest.raises(AirflowUnavailable):
        client.list_backfills("d")
    assert [r.url.params["offset"] for r in sent] == ["0", "100", "100", "100", "100"]


def test_redirect_is_not_followed() -> None:
    client, sent, _ = scripted(httpx.Response(307, headers={"Location": "http://evil.test/api/v2/backfills/7"}))
    with pytest.raises(AirflowError) as caught:
        client.get_backfill(7)
    assert str(caught.value) == "GET /api/v2/backfills/7 -> 307: unexpected redirect (not followed)"
    assert len(sent) == 1


def test_secret_canary_in_no_error_or_log(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    echo = httpx.Response(500, text="echo: Authorization: Bearer CANARY-tok-91")
    client, sent, _ = scripted(echo, echo, echo, echo, httpx.Response(401, json={"detail": "Not authenticated"}))
    texts = []
    for call in (lambda: client.get_backfill(7), lambda: client.list_backfills("d")):
        with pytest.raises(AirflowError) as caught:
            call()
        texts += [str(caught.value), repr(caught.value), caught.value.detail, str(caught.value.hint)]
    assert sent[0].headers["Authorization"] == "Bearer CANARY-tok-91"
    assert isinstance(caught.value, AirflowAuthError)
    texts += [r.getMessage() for r in caplog.records] + [repr(client)]
    assert all("CANARY-tok-91" not in text for text in texts), texts
