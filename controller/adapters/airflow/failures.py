"""What a failed exchange with Airflow says (httpx's exceptions and error answers as `controller.errors`): the
error class the one retry table gives it (`core.rules.retrying.classify`), Airflow's detail cut short and made
plain, and the hint that tells the user what to check. Never a header or a token (`transport.py` redacts first).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import httpx

from controller.adapters.answers import AnswerUnreadable, decode_json
from controller.core.documents.escaping import plain
from controller.core.documents.storable import storable_text
from controller.core.rules.retrying import Failure, Request, Verdict, classify, outcome_of, request_kind
from controller.errors import (
    AirflowAmbiguous,
    AirflowAuthError,
    AirflowBadAnswer,
    AirflowConflict,
    AirflowError,
    AirflowInvalid,
    AirflowNotFound,
    AirflowUnavailable,
    truncate,
)

_STATUS_ERRORS: dict[int, type[AirflowError]] = {
    400: AirflowInvalid,
    401: AirflowAuthError,
    403: AirflowAuthError,
    404: AirflowNotFound,
    409: AirflowConflict,
    422: AirflowInvalid,
}


def printable(text: str, limit: int) -> str:
    """Outside text cut short, every character outside printable ASCII as `?` (no line breaks, no escapes)."""
    return re.sub(r"[^\x20-\x7e]", "?", text[:limit]) + ("..." if len(text) > limit else "")


def shape(data: Any) -> str:
    """A JSON value by its shape: an object's keys and the types of their values, never a value."""
    if isinstance(data, dict):
        keys = ", ".join(f"{printable(str(k), 40)}: {_json_type(v)}" for k, v in list(data.items())[:8])
        return f"a JSON object {{{keys}}}"
    return f"a JSON {_json_type(data)}"


def _json_type(value: Any) -> str:
    kinds: tuple[tuple[type | tuple[type, ...], str], ...] = (
        (dict, "object"), (list, "array"), (str, "string"), (bool, "boolean"), ((int, float), "number")
    )  # fmt: skip
    return next((name for kind, name in kinds if isinstance(value, kind)), "null")


def detail_of(response: httpx.Response, limit: int | None = 256) -> str:
    """Airflow's `detail` (a string, or a list of pydantic errors), else the body, cut to `limit` chars."""
    try:
        data = decode_json(response.content)
    except AnswerUnreadable:
        data = None
    detail = data.get("detail", response.text) if isinstance(data, dict) else response.text[:_SCANNED]
    if isinstance(detail, list):
        detail = "; ".join(_problem(d) for d in detail)
    # server text goes into messages, logs, pages, the audit and CI output: one line, storable, no escapes
    detail = plain(storable_text(str(detail)[:_SCANNED]))
    return detail if limit is None else truncate(detail, limit)


def status_error(
    method: str,
    path: str,
    response: httpx.Response,
    redact: Callable[[str], str] = lambda text: text,
    kind: Request | None = None,
) -> AirflowError:
    """The error for an unsuccessful answer; its class follows the one retry table (`classify`)."""
    status, detail = response.status_code, truncate(redact(detail_of(response, limit=None)))
    verdict = classify(kind or request_kind(method), outcome_of(status))
    cls = _STATUS_ERRORS.get(status, AirflowInvalid) if verdict is Verdict.PERMANENT else _VERDICT_ERRORS[verdict]
    return cls(
        f"{method} {path} -> {status}: {detail}",
        method=method,
        path=path,
        status=status,
        detail=detail,
        hint=HINTS.get(status),
    )


def _problem(item: Any) -> str:
    """One of pydantic's errors (`{loc, msg}`) as `body.dag_run_conf: Input should be …`."""
    if not isinstance(item, dict):
        return str(item)
    loc = item.get("loc")
    return f"{'.'.join(map(str, loc if isinstance(loc, list) else []))}: {item.get('msg')}"


def unread(method: str, path: str, why: str, kind: Request, status: int | None) -> AirflowError:
    """An answer not read (over the cap, not JSON, too deep, not the API's shape): for a create, a lost answer
    (it may have landed: observe, never send again blindly); else a bad answer, which asking again repeats."""
    text = f"{method} {path}" + ("" if status is None else f" -> {status}") + f": {why}"
    if classify(kind, Failure.AFTER_SEND) is Verdict.AMBIGUOUS:
        return AirflowAmbiguous(
            text + " (the request may have been processed)", method=method, path=path, status=status
        )
    return AirflowBadAnswer(text, method=method, path=path, status=status, hint=BAD_ANSWER_HINT)


_VERDICT_ERRORS: dict[Verdict, type[AirflowError]] = {
    Verdict.OK: AirflowError,
    Verdict.RETRY: AirflowUnavailable,
    Verdict.AMBIGUOUS: AirflowAmbiguous,
    Verdict.OBSERVE: AirflowConflict,
}


HINTS = {
    401: "set BACKFILLCTL_AIRFLOW_TOKEN, or BACKFILLCTL_AIRFLOW_USERNAME and BACKFILLCTL_AIRFLOW_PASSWORD",
    403: "the token is invalid for this server or lacks permission; get a new one",
}


_SCANNED = 65_536  # characters of an error answer read for its detail (at most 256 of them are shown)
LATE_HINT = "is Airflow's api-server overloaded, or a proxy slow? BACKFILLCTL_AIRFLOW_TIMEOUT sets the seconds"
BAD_ANSWER_HINT = "is BACKFILLCTL_AIRFLOW_URL the Airflow 3 api-server's own address (not a proxy or another service)?"
_CONFIG_FAILURES = (httpx.UnsupportedProtocol, httpx.InvalidURL, httpx.LocalProtocolError)
_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.ProxyError)
URL_HINT = "set BACKFILLCTL_AIRFLOW_URL to the API server's address with its scheme, e.g. http://127.0.0.1:8080"
HEADER_HINT = "set BACKFILLCTL_AIRFLOW_TOKEN to the token alone: one line of ASCII characters"


def failure_of(exc: Exception) -> Failure:
    if isinstance(exc, _CONFIG_FAILURES):
        return Failure.CONFIG
    return Failure.NOT_SENT if isinstance(exc, _NOT_SENT) else Failure.AFTER_SEND


def transport_error(method: str, path: str, exc: httpx.HTTPError, kind: Request) -> AirflowError:
    """Map an httpx exception: not sent → unavailable (retryable); maybe processed → ambiguous for a create."""
    failure = failure_of(exc)
    text = f"{method} {path} failed: {type(exc).__name__}"
    if isinstance(exc, httpx.LocalProtocolError):  # never str(exc): it quotes the header, token and all
        return AirflowError(f"{text}: a header value cannot be sent", method=method, path=path, hint=HEADER_HINT)
    if failure is Failure.CONFIG:
        return AirflowError(f"{text}: {truncate(str(exc), 120)}", method=method, path=path, hint=URL_HINT)
    if classify(kind, failure) is Verdict.AMBIGUOUS:
        return AirflowAmbiguous(text + " (the request may have been processed)", method=method, path=path)
    return AirflowUnavailable(text, method=method, path=path, hint="is Airflow's api-server running and reachable?")


HTTPX_ERRORS = (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, httpx.CookieConflict)


def translate_any(method: str, path: str, exc: Exception, kind: Request | None = None) -> AirflowError:
    """Every exception httpx can raise, as ours (the meta-test checks each httpx exception class)."""
    if isinstance(exc, httpx.HTTPError):
        return transport_error(method, path, exc, kind or request_kind(method))
    hint = URL_HINT if isinstance(exc, httpx.InvalidURL) else None
    return AirflowError(f"{method} {path} failed: {type(exc).__name__}", method=method, path=path, hint=hint)
