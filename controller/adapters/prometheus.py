"""Prometheus instant queries (httpx) for the analysis of downstream systems.

`PrometheusClient.query` sends `GET {url}/api/v1/query?query=…` with a few seconds' timeout and turns the answer
into an observation: a `Sample`, or `Inconclusive` with a reason a human can read. A failure to ask (connection
refused, timeout, an error status, an answer that is not Prometheus') is inconclusive too, never an exception: the
pass goes on and the analysis fails closed after its `pause_after`. Inside, httpx's exceptions and error answers
become `PrometheusError`; its text names the URL only as `redact_url` shows it, and Prometheus' own error text is
made one plain line and cut (it is outside text: it goes into plans, logs and the audit).

An answer is bounded (`controller.adapters.answers`): the whole of it within the timeout (not per read), at most
`ANSWER_CAP` bytes once inflated, JSON no deeper than `MAX_DEPTH`; a value must be a number as Prometheus writes
it (`sample_value`). Anything else is inconclusive, with the reason.
"""

from __future__ import annotations

import math
import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import httpx

from controller.adapters.answers import (
    ACCEPT_ENCODING,
    AnswerLate,
    AnswerRefused,
    AnswerTooDeep,
    AnswerUnreadable,
    decode_json,
    read_body,
    timeout_until,
)
from controller.core.documents.escaping import plain
from controller.core.model.analysis import (
    Inconclusive,
    Observation,
    Series,
    observe_series,
    observe_value,
    sample_value,
)
from controller.core.model.secret import redact_url, redact_urls, url_problem
from controller.errors import ConfigError, ControllerError, truncate

QUERY_PATH = "/api/v1/query"
TIMEOUT_S = 5.0
CONNECT_TIMEOUT_S = 2.0
DETAIL_LIMIT = 200
ANSWER_CAP = 2**20  # bytes of one answer, inflated: an instant query's one value is a few hundred
URL_HINT = "set it to Prometheus' base URL with its scheme, e.g. http://prometheus:9090"


class PrometheusError(ControllerError):
    """Prometheus could not be asked, or answered with an error (the reason is safe to show)."""


class PrometheusClient:
    """One Prometheus, asked one instant query at a time; `calls` counts the queries sent."""

    def __init__(
        self, base_url: str, *, timeout: float = TIMEOUT_S, transport: httpx.BaseTransport | None = None
    ) -> None:
        self.shown_url = redact_url(base_url.rstrip("/"))  # the one form of the URL any message carries
        try:
            self._http = httpx.Client(
                base_url=base_url.rstrip("/"),
                transport=transport,
                follow_redirects=False,  # a redirect could carry the URL's credentials to another host
                timeout=httpx.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT_S)),
                headers={"Accept": "application/json", "Accept-Encoding": ACCEPT_ENCODING, "User-Agent": "backfillctl"},
            )
            self._http.build_request("GET", QUERY_PATH)
        except (httpx.InvalidURL, ValueError):  # never httpx's text: it quotes the part it could not parse
            raise ConfigError(f"Prometheus URL {self.shown_url!r} is not a valid URL", hint=URL_HINT) from None
        self.calls, self._timeout = 0, timeout

    def __repr__(self) -> str:
        return f"PrometheusClient({self.shown_url!r})"

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> PrometheusClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def query(self, query: str) -> Observation:
        """The query's one value now, or why it cannot be had."""
        try:
            return decode(self.answer(query))
        except PrometheusError as error:
            return Inconclusive(error.message)

    def answer(self, query: str) -> Any:
        """The decoded JSON of a successful answer; every failure as `PrometheusError`."""
        self.calls += 1
        try:
            status, body = self._exchange(query)
        except httpx.TimeoutException as exc:
            late = f"did not answer within {self._timeout:g}s ({type(exc).__name__})"
            raise PrometheusError(f"Prometheus {self.shown_url} {late}") from None
        except (
            httpx.HTTPError,
            httpx.InvalidURL,
            httpx.StreamError,
            httpx.CookieConflict,
        ) as exc:  # never str(exc): it may hold the URL
            raise PrometheusError(f"Prometheus {self.shown_url} unreachable ({type(exc).__name__})") from None
        except AnswerLate:
            late = f"did not answer within {self._timeout:g}s (the whole answer, not one read)"
            raise PrometheusError(f"Prometheus {self.shown_url} {late}") from None
        except AnswerRefused as refused:
            raise PrometheusError(f"Prometheus {self.shown_url} answered: {refused}") from None
        return self._payload(status, body)

    def _exchange(self, query: str) -> tuple[int, bytes]:
        """The status and the whole body, read within the deadline (`timeout` from now) and the cap."""
        deadline = time.monotonic() + self._timeout
        request = self._http.build_request("GET", QUERY_PATH, params={"query": query})
        request.extensions["timeout"] = timeout_until(deadline, CONNECT_TIMEOUT_S).as_dict()
        response = self._http.send(request, stream=True)
        try:
            return response.status_code, read_body(response, deadline=deadline, cap=ANSWER_CAP)
        finally:
            response.close()

    def _payload(self, status: int, body: bytes) -> Any:
        try:
            payload = decode_json(body)
        except AnswerTooDeep as deep:
            raise PrometheusError(f"Prometheus {self.shown_url} answered {status}: {deep}") from None
        except AnswerUnreadable:
            payload = None
        if not isinstance(payload, Mapping):
            raise PrometheusError(f"Prometheus {self.shown_url} answered {status} without a Prometheus JSON body")
        if payload.get("status") != "success" or status != 200:
            kind = plain(truncate(str(payload.get("errorType") or "error"), 40))
            raise PrometheusError(f"Prometheus answered {status} {kind}: {_outside(payload.get('error'))}")
        return payload


def decode(payload: Mapping[str, Any]) -> Observation:
    """A successful instant-query answer as an observation (a partial one, or one that is not one value, is
    inconclusive)."""
    warnings = payload.get("warnings")
    if warnings:
        first = warnings[0] if isinstance(warnings, list) else warnings
        return Inconclusive(f"partial answer: Prometheus warns {_outside(first)}")
    data = payload.get("data")
    kind = data.get("resultType") if isinstance(data, Mapping) else None
    result = data.get("result") if isinstance(data, Mapping) else None
    if kind in ("vector", "scalar"):
        return _observed(kind, result)
    if kind in ("matrix", "string"):
        return Inconclusive(f"the query answers a {kind}, not one instant value; write an instant query")
    return Inconclusive(f"Prometheus' answer is not an instant query's (resultType {_outside(kind)})")


def _observed(kind: str, result: Any) -> Observation:
    """A vector's one series or a scalar; a value that is not a `[time, "number"]` pair is inconclusive."""
    try:
        if kind == "scalar":
            return observe_value(*_point(result))
        if isinstance(result, list):
            return observe_series([_series(item) for item in result])
    except _NotANumber as odd:
        return Inconclusive(f"Prometheus' answer has a value that is not a number as Prometheus writes one: {odd}")
    except (TypeError, ValueError, KeyError, IndexError, AttributeError, OverflowError, OSError):
        pass  # OverflowError, OSError: a time outside the platform's range
    return Inconclusive('Prometheus\' answer has a value that is not a [time, "number"] pair')


def _series(item: Mapping[str, Any]) -> Series:
    labels = tuple(sorted((str(k), str(v)) for k, v in item.get("metric", {}).items()))
    value, stamp = _point(item["value"])
    return Series(labels, value, stamp)


class _NotANumber(ValueError):
    """A sample's value string that Prometheus' number grammar does not hold (its text: the value, escaped)."""


def _point(pair: Any) -> tuple[float, datetime]:
    """A `[time, "value"]` pair: the time a JSON number of seconds, the value a string in Prometheus' grammar."""
    stamp, text = pair
    if not isinstance(text, str) or isinstance(stamp, bool) or not isinstance(stamp, int | float):
        raise ValueError("not a point")
    value = sample_value(text)
    if value is None:
        raise _NotANumber(repr(_outside(text)[:40]))
    if not math.isfinite(stamp):
        raise ValueError("not a time")
    return value, datetime.fromtimestamp(stamp, UTC)


def _outside(text: object) -> str:
    return truncate(plain(redact_urls(str(text))), DETAIL_LIMIT)


def client_from_env(url_env: str, environ: Mapping[str, str], *, timeout: float = TIMEOUT_S) -> PrometheusClient:
    """The client for the Prometheus whose URL the environment variable `url_env` holds."""
    url = environ.get(url_env, "").strip()
    if not url:
        raise ConfigError(f"{url_env} is not set", hint=f"{URL_HINT} (the policy's analysis names {url_env})")
    problem = url_problem(url, ("http", "https"))
    if problem is not None:
        raise ConfigError(f"{url_env} {problem}", hint=URL_HINT)
    return PrometheusClient(url, timeout=timeout)
