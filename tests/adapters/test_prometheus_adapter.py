"""The Prometheus adapter's decoding and error translation, on answers a real Prometheus rarely gives (partial
answers, proxies, timeouts): httpx.MockTransport. The common answers are tested on a real one
(tests/adapters/prometheus)."""

from __future__ import annotations

import inspect
import json
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from controller.adapters.prometheus import PrometheusClient, PrometheusError, decode
from controller.core.model.analysis import Inconclusive, Sample
from controller.errors import ConfigError

URL = "https://reader:canary-pw@prom.example:9090/prefix"
SHOWN = "https://reader:***@prom.example:9090/prefix"
STAMP = 1772452800.5  # 2026-03-02T12:00:00.5Z


def client(answer: Callable[[httpx.Request], httpx.Response]) -> PrometheusClient:
    return PrometheusClient(URL, transport=httpx.MockTransport(answer))


def answering(status: int, body: Any, headers: dict[str, str] | None = None) -> PrometheusClient:
    text = body if isinstance(body, str) else json.dumps(body)
    return client(lambda _: httpx.Response(status, text=text, headers=headers))


def vector(*values: str, warnings: list[str] | None = None) -> dict[str, Any]:
    result = [{"metric": {"node": str(i)}, "value": [STAMP, v]} for i, v in enumerate(values)]
    body: dict[str, Any] = {"status": "success", "data": {"resultType": "vector", "result": result}}
    return body | ({"warnings": warnings} if warnings else {})


def test_the_request() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=vector("0.5"))

    found = client(answer).query("max(warehouse_cpu_ratio)")
    assert found == Sample(0.5, datetime(2026, 3, 2, 12, 0, 0, 500000, tzinfo=UTC))
    url = seen[0].url
    assert (url.host, url.port, url.raw_path) == (
        "prom.example",
        9090,
        b"/prefix/api/v1/query?query=max%28warehouse_cpu_ratio%29",
    )
    assert seen[0].headers["Authorization"].startswith("Basic ")  # the URL's credentials, sent as basic auth


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (
            vector("0.5", warnings=["remote read: store b\nunreachable"]),
            "partial answer: Prometheus warns remote read: store b unreachable",
        ),
        (vector("NaN"), "the value is NaN (not a number)"),
        (vector("-Inf"), "the value is -Inf"),
        (vector(), "the query returned no series (a stopped exporter, or a selector that matches nothing)"),
        (
            vector("1", "2"),
            "the query returned 2 series, one is needed ({node='0'}, {node='1'}); aggregate them, e.g. max(…)",
        ),
        (
            {"status": "success", "data": {"resultType": "vector", "result": [{"value": [STAMP, 5]}]}},
            'Prometheus\' answer has a value that is not a [time, "number"] pair',
        ),
        (
            {"status": "success", "data": {"resultType": "scalar", "result": ["x", "1"]}},
            'Prometheus\' answer has a value that is not a [time, "number"] pair',
        ),
        (
            {"status": "success", "data": {"resultType": "vector", "result": [{"value": [STAMP]}]}},
            'Prometheus\' answer has a value that is not a [time, "number"] pair',
        ),
        (
            {"status": "success", "data": {"resultType": "streams\x1b[31m"}},
            "Prometheus' answer is not an instant query's (resultType streams [31m)",
        ),
        ({"status": "success"}, "Prometheus' answer is not an instant query's (resultType None)"),
    ],
)
def test_answers_that_are_not_one_value(body: dict[str, Any], reason: str) -> None:
    assert answering(200, body).query("q") == Inconclusive(reason)


def test_a_scalar() -> None:
    found = decode({"status": "success", "data": {"resultType": "scalar", "result": [STAMP, "3"]}})
    assert found == Sample(3.0, datetime(2026, 3, 2, 12, 0, 0, 500000, tzinfo=UTC))


@pytest.mark.parametrize(
    ("status", "body", "reason"),
    [
        (
            422,
            {"status": "error", "errorType": "execution", "error": "query for http://u:pw@other:1 failed\nbadly"},
            "Prometheus answered 422 execution: query for http://u:***@other:1 failed badly",
        ),
        (
            503,
            {"status": "error", "errorType": "timeout", "error": "query timed out in expression evaluation"},
            "Prometheus answered 503 timeout: query timed out in expression evaluation",
        ),
        (200, {"status": "error", "error": "x" * 300}, "Prometheus answered 200 error: " + "x" * 199 + "…"),
        (502, "<html>bad gateway</html>", f"Prometheus {SHOWN} answered 502 without a Prometheus JSON body"),
        (307, "", f"Prometheus {SHOWN} answered 307 without a Prometheus JSON body"),
        (200, "[1, 2]", f"Prometheus {SHOWN} answered 200 without a Prometheus JSON body"),
    ],
)
def test_error_answers(status: int, body: Any, reason: str) -> None:
    headers = {"Location": "https://elsewhere.example/"} if status == 307 else None
    assert answering(status, body, headers).query("q") == Inconclusive(reason)


def test_the_error_behind_an_inconclusive_answer() -> None:
    with pytest.raises(PrometheusError, match=r"^Prometheus answered 400 bad_data: parse error$"):
        answering(400, {"status": "error", "errorType": "bad_data", "error": "parse error"}).answer("max(")


def every_httpx_error() -> list[type[Exception]]:
    return [obj for _, obj in inspect.getmembers(httpx) if inspect.isclass(obj) and issubclass(obj, Exception)]


def construct(kind: type[Exception], request: httpx.Request) -> Exception:
    if issubclass(kind, httpx.HTTPStatusError):
        return kind(f"failed for {URL}", request=request, response=httpx.Response(500))
    if issubclass(kind, httpx.RequestError):
        return kind(f"failed for {URL}", request=request)
    try:
        return kind(f"failed for {URL}")
    except TypeError:
        return kind()


@pytest.mark.parametrize("kind", every_httpx_error(), ids=lambda k: k.__name__)
def test_every_httpx_exception_is_inconclusive_without_its_text(kind: type[Exception]) -> None:
    def fail(request: httpx.Request) -> httpx.Response:
        raise construct(kind, request)

    found = client(fail).query("q")
    assert isinstance(found, Inconclusive)
    late = issubclass(kind, httpx.TimeoutException)
    assert found.reason == f"Prometheus {SHOWN} " + (
        f"did not answer within 5s ({kind.__name__})" if late else f"unreachable ({kind.__name__})"
    )


def test_every_httpx_exception_class_is_seen() -> None:
    assert len(every_httpx_error()) >= 25


def test_a_url_httpx_cannot_use_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match=r"^Prometheus URL 'http://\[::1' is not a valid URL$"):
        PrometheusClient("http://[::1")


def test_calls_are_counted() -> None:
    c = answering(200, vector("1"))
    c.query("a")
    c.query("b")
    assert c.calls == 2
    assert repr(c) == f"PrometheusClient({SHOWN!r})"


@pytest.mark.parametrize("value", ["1_0", " 1", "1 ", "infinity", "inf", "nan", "0x1p-2", "١"])
def test_a_value_only_python_reads_as_a_number_is_inconclusive(value: str) -> None:
    found = answering(200, vector(value)).query("q")
    assert found == Inconclusive(
        f"Prometheus' answer has a value that is not a number as Prometheus writes one: {value!r}"
    )


@pytest.mark.parametrize(("value", "expected"), [("0.75", 0.75), ("1e+06", 1e6), ("-3", -3.0), (".5", 0.5)])
def test_values_in_prometheus_grammar_are_read(value: str, expected: float) -> None:
    found = answering(200, vector(value)).query("q")
    assert isinstance(found, Sample)
    assert found.value == expected


@pytest.mark.parametrize("stamp", ["1772452800.5", True, None, 1e300])
def test_a_time_that_is_not_a_number_of_seconds_is_inconclusive(stamp: Any) -> None:
    body = {"status": "success", "data": {"resultType": "vector", "result": [{"value": [stamp, "1"]}]}}
    found = answering(200, body).query("q")
    assert found == Inconclusive('Prometheus\' answer has a value that is not a [time, "number"] pair')


def test_outside_text_in_an_error_answer_is_escaped() -> None:
    body = '{"status": "error", "errorType": "bad_data\\ud800", "error": "parse \\ud800 error\\u0000"}'
    found = answering(400, body).query("q")
    assert found == Inconclusive("Prometheus answered 400 bad_data\\ud800: parse \\ud800 error\\u0000")
    assert isinstance(found, Inconclusive)
    found.reason.encode("utf-8")


def test_json_that_is_not_rfc_8259_is_not_an_answer() -> None:
    for text in ('{"status": "success", "data": NaN}', '{"status": "success", "x": 1e999}', "\xff"):
        assert answering(200, text).query("q") == Inconclusive(
            f"Prometheus {SHOWN} answered 200 without a Prometheus JSON body"
        )
