"""Fault injection on the client via httpx.MockTransport, and the pure retry table.

Scripted responses only: the behaviour of the real server is pinned by tests/adapters/airflow/test_contract.py.
"""

from __future__ import annotations

import inspect
import logging
import ssl
from collections.abc import Callable
from datetime import UTC, datetime
from types import MappingProxyType

import httpx
import pytest

from controller.adapters.airflow import AirflowClient
from controller.adapters.airflow.failures import translate_any
from controller.adapters.airflow.transport import tls_for
from controller.core.model.airflow import BackfillRequest
from controller.core.model.capabilities import newest
from controller.core.model.secret import Secret
from controller.core.rules.retrying import Backoff, Failure, Verdict, classify, outcome_of, request_kind
from controller.errors import (
    AirflowAmbiguous,
    AirflowAuthError,
    AirflowConflict,
    AirflowError,
    AirflowInvalid,
    AirflowUnavailable,
)
from tests.adapters.airflow.test_contract import day
from tests.fakes.airflow import FakeAirflow
from tests.fakes.calls import record_calls

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


def test_an_http_url_loads_no_ca_bundle_and_its_context_trusts_nothing() -> None:
    for url in ("http://airflow:8080", "HTTP://airflow"):
        context = tls_for(url)
        assert isinstance(context, ssl.SSLContext)
        # a TLS connection it would make fails closed: a certificate is required and no authority is trusted
        assert (context.verify_mode, context.check_hostname, context.get_ca_certs()) == (ssl.CERT_REQUIRED, True, [])
    assert tls_for("https://airflow.example") is True  # httpx's default: the CA bundle, verified


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


# --- triggered runs (issue 28): exactly once -------------------------------------------------------------

RUN = {
    "dag_run_id": "r1",
    "dag_id": "v",
    "state": "queued",
    "queued_at": "2026-12-02T06:53:10.039294Z",
    "start_date": None,
    "end_date": None,
    "conf": {"k": 1},
}


@pytest.mark.parametrize(
    "fault",
    [httpx.ReadTimeout("slow"), httpx.Response(503, json={"detail": "Database is locked."}), httpx.Response(500)],
    ids=["read-timeout", "503", "500"],
)
def test_a_trigger_that_may_have_landed_is_ambiguous_and_not_sent_again(fault: httpx.Response | Exception) -> None:
    client, sent, sleeps = scripted(fault)
    with pytest.raises(AirflowAmbiguous) as caught:
        client.trigger_run("v", "r1", {"k": 1})
    assert (len(sent), sleeps, caught.value.path) == (1, [], "/api/v2/dags/v/dagRuns")
    assert sent[0].content == b'{"dag_run_id":"r1","logical_date":null,"conf":{"k":1}}'


def test_a_frozen_conf_is_sent_as_plain_json() -> None:
    client, sent, _ = scripted(httpx.Response(200, json=RUN))
    client.trigger_run("v", "r1", MappingProxyType({"k": (1, MappingProxyType({"a": "b"}))}))
    assert sent[0].content == b'{"dag_run_id":"r1","logical_date":null,"conf":{"k":[1,{"a":"b"}]}}'


def test_after_a_lost_answer_the_derived_run_id_finds_the_run_and_a_retry_adopts_it() -> None:
    fake = FakeAirflow()
    fake.scheduler_running = False
    fake.fault("POST", "/api/v2/dags/demo_orders_publish/dagRuns", lambda _r: httpx.ReadTimeout("lost"), after=True)
    client = AirflowClient(
        "http://fake-airflow", transport=fake.transport(), username="admin", password=Secret("admin")
    )
    with pytest.raises(AirflowAmbiguous):
        client.trigger_run("demo_orders_publish", "backfillctl__s__production__publish__k", {"n": 1})
    calls = record_calls(client)
    found = client.get_run("demo_orders_publish", "backfillctl__s__production__publish__k")
    assert found is not None
    run, created = client.trigger_run("demo_orders_publish", "backfillctl__s__production__publish__k", {"n": 1})
    assert (run, created) == (found, False)
    assert len(fake.triggered) == 1
    path = "/api/v2/dags/demo_orders_publish/dagRuns"
    assert calls == [("GET", f"{path}/backfillctl__s__production__publish__k"), ("POST", path),
                     ("GET", f"{path}/backfillctl__s__production__publish__k")]  # fmt: skip


def test_a_run_the_409_names_that_is_gone_again_is_the_conflict() -> None:
    client, sent, _ = scripted(
        httpx.Response(409, json={"detail": {"reason": "Unique constraint violation"}}),
        httpx.Response(404, json={"detail": "The DagRun with dag_id: `v` and run_id: `r1` was not found"}),
    )
    with pytest.raises(AirflowConflict) as caught:
        client.trigger_run("v", "r1", {})
    assert str(caught.value) == "POST /api/v2/dags/v/dagRuns -> 409 for run r1 of v, and GET finds no such run"
    assert [(r.method, r.url.path) for r in sent] == [
        ("POST", "/api/v2/dags/v/dagRuns"),
        ("GET", "/api/v2/dags/v/dagRuns/r1"),
    ]


def test_a_run_id_is_one_path_segment() -> None:
    client, sent, _ = scripted(httpx.Response(200, json=dict(RUN, dag_run_id="a/b:c")))
    assert client.get_run("v", "a/b:c") is not None
    assert sent[0].url.raw_path == b"/api/v2/dags/v/dagRuns/a%2Fb%3Ac"


@pytest.mark.parametrize(
    ("answer", "what"),
    [
        ([RUN], "the answer is not a JSON object but an array"),
        (dict(RUN, state="paused"), "state 'paused' is none of queued, running, success, failed"),
        (dict(RUN, state=None), "state None is none of queued, running, success, failed"),
        (dict(RUN, conf=[1]), "conf is an array, not an object"),
        (dict(RUN, conf="x"), "conf is a string, not an object"),
        (dict(RUN, dag_run_id=""), "dag_run_id is '', not a non-empty string"),
        ({k: v for k, v in RUN.items() if k != "dag_id"}, "dag_id is None, not a non-empty string"),
        (
            dict(RUN, start_date="2026-12-02T06:53:10"),
            "start_date '2026-12-02T06:53:10' is not a date-time with an offset",
        ),
        (dict(RUN, end_date="yesterday"), "end_date 'yesterday' is not a date-time with an offset"),
        (dict(RUN, queued_at=17), "queued_at 17 is not a date-time with an offset"),
    ],
    ids=["array", "state", "no-state", "conf-array", "conf-string", "empty-id", "no-dag", "naive", "text", "number"],
)
def test_an_odd_run_answer_is_a_clear_error(answer: object, what: str) -> None:
    client, _, _ = scripted(httpx.Response(200, json=answer))
    with pytest.raises(AirflowError) as caught:
        client.get_run("v", "r1")
    assert str(caught.value) == f"GET /api/v2/dags/v/dagRuns/r1: Airflow's answer is not a DAG run: {what}"


def test_a_null_conf_is_an_empty_one_and_times_keep_their_offset() -> None:
    client, _, _ = scripted(httpx.Response(200, json=dict(RUN, conf=None, start_date="2026-12-02T07:53:10+01:00")))
    run = client.get_run("v", "r1")
    assert run is not None
    assert (dict(run.conf), run.start_date, run.queued_at) == (
        {},
        datetime(2026, 12, 2, 6, 53, 10, tzinfo=UTC),
        datetime(2026, 12, 2, 6, 53, 10, 39294, tzinfo=UTC),
    )


def test_a_trigger_answered_with_another_run_id_is_refused() -> None:
    client, _, _ = scripted(httpx.Response(200, json=dict(RUN, dag_run_id="manual__2026-12-02T06:53:10+00:00")))
    with pytest.raises(AirflowError) as caught:
        client.trigger_run("v", "r1", {})
    assert str(caught.value) == (
        "POST /api/v2/dags/v/dagRuns: Airflow started run 'manual__2026-12-02T06:53:10+00:00' of v, not 'r1' of v"
    )


def test_task_result_asks_for_the_deserialized_value_and_refuses_an_answer_without_one() -> None:
    client, sent, _ = scripted(httpx.Response(200, json={"key": "return_value", "value": [1, 2]}),
                               httpx.Response(200, json={"key": "return_value"}))  # fmt: skip
    assert client.task_result("v", "r1", "result") == [1, 2]
    assert str(sent[0].url) == (
        "http://airflow.test/api/v2/dags/v/dagRuns/r1/taskInstances/result/xcomEntries/return_value?deserialize=true"
    )
    with pytest.raises(AirflowError) as caught:
        client.task_result("v", "r1", "result")
    assert str(caught.value) == (
        "GET /api/v2/dags/v/dagRuns/r1/taskInstances/result/xcomEntries/return_value: "
        "Airflow's answer is not an XCom entry (no value)"
    )
