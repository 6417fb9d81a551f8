"""HTTP to one Airflow API server (httpx): the connection, retries with backoff, and the auth token.

Owns httpx: every httpx exception and every error status becomes a `controller.errors.AirflowError`
subclass carrying method, path, status and Airflow's detail cut to 256 characters, never a header or a
token.  Reads and connect failures are retried with capped exponential backoff and jitter; a POST that
may have reached the server (timeout after send, 5xx) raises `AirflowAmbiguous` so the caller observes
before trying again.  With a user name and password, a token comes from `POST /auth/token`, and again
once when the server refuses it.

Every answer is bounded (`controller.adapters.answers`): the whole of it must arrive within `timeout` seconds of
the request (not per read), it is at most `ANSWER_CAP` bytes once inflated, and JSON no deeper than `MAX_DEPTH`.
An answer that breaks a bound, or is not JSON, is `AirflowBadAnswer` (a late one is retried as a timeout); for a
create it is a lost answer, `AirflowAmbiguous`, as the retry table has a failure after sending.
"""

from __future__ import annotations

import contextlib
import logging
import random
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypedDict

import httpx

from controller.adapters.answers import (
    ACCEPT_ENCODING,
    AnswerLate,
    AnswerRefused,
    AnswerUnreadable,
    decode_json,
    read_body,
    timeout_until,
)
from controller.core.documents.escaping import plain
from controller.core.documents.storable import storable_text
from controller.core.model.secret import Secret, header_problem, redact_url
from controller.core.rules.retrying import (
    RETRY_AFTER_LIMIT,
    Backoff,
    Failure,
    Request,
    Verdict,
    classify,
    outcome_of,
    request_kind,
    waits_too_long,
)
from controller.errors import (
    AirflowAmbiguous,
    AirflowAuthError,
    AirflowBadAnswer,
    AirflowConflict,
    AirflowError,
    AirflowInvalid,
    AirflowNotFound,
    AirflowUnavailable,
    ConfigError,
    truncate,
)

log = logging.getLogger("controller.adapters.airflow")  # the name JSON log lines carry: the package's
# requests that scan Airflow's metadata database (a dry run reads every run of its range): one at a time, whatever
# the bound of the others
SCANS = frozenset({"/api/v2/backfills/dry_run"})
# the most bytes one answer may have once inflated: 300 times a full page of DAG runs with their confs (~100 KiB)
ANSWER_CAP = 32 * 2**20
CONNECT_TIMEOUT_S = 5.0
_STATUS_ERRORS: dict[int, type[AirflowError]] = {
    400: AirflowInvalid,
    401: AirflowAuthError,
    403: AirflowAuthError,
    404: AirflowNotFound,
    409: AirflowConflict,
    422: AirflowInvalid,
}
Sleep = Callable[[float], None]
Observer = Callable[[str, str, int | None], None]  # (method, path, status or None for no answer): metrics


class Connection(TypedDict, total=False):
    """How to reach and talk to one API server: a `Transport`'s options, which an `AirflowClient` passes on."""

    token: Secret | None
    username: str | None
    password: Secret | None
    transport: httpx.BaseTransport | None  # a fake's (httpx.MockTransport) in tests
    timeout: float
    backoff: Backoff | None
    sleep: Sleep
    rng: Callable[[], float]
    max_concurrency: int  # requests in flight at once (BACKFILLCTL_AIRFLOW_MAX_CONCURRENCY)


class Transport:
    """Requests to one API server; `observer` (if set) sees each one sent, with its answer's status."""

    def __init__(
        self,
        base_url: str,
        *,
        token: Secret | None = None,
        username: str | None = None,
        password: Secret | None = None,
        transport: httpx.BaseTransport | None = None,
        timeout: float = 30.0,
        backoff: Backoff | None = None,
        sleep: Sleep = time.sleep,
        rng: Callable[[], float] = random.random,
        max_concurrency: int,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.shown_url = redact_url(self.base_url)  # the one form of the URL any message carries
        self._token, self._username, self._password = token, username, password
        self._static_token = token is not None
        self.backoff, self._sleep, self._rng = backoff or Backoff(), sleep, rng
        try:
            self.http = httpx.Client(
                base_url=self.base_url,
                transport=transport,
                follow_redirects=False,
                timeout=httpx.Timeout(timeout, connect=CONNECT_TIMEOUT_S),
                headers={"Accept": "application/json", "Accept-Encoding": ACCEPT_ENCODING},
            )
            self.http.build_request("GET", "/")  # a host IDNA cannot encode fails here, not at the first call
        except (httpx.InvalidURL, ValueError):  # never httpx's text: it quotes the part it could not parse
            raise ConfigError(f"BACKFILLCTL_AIRFLOW_URL={self.shown_url!r} is not a valid URL", hint=URL_HINT) from None
        self.timeout = timeout  # seconds for the whole of one answer: the deadline of each request
        self._login_lock = threading.Lock()
        # requests at once, whatever the callers' pools (BACKFILLCTL_AIRFLOW_MAX_CONCURRENCY): a managed server's limit
        self._slots = threading.BoundedSemaphore(max_concurrency)
        self._scans = threading.BoundedSemaphore(1)
        self.observer: Observer | None = None

    def close(self) -> None:
        self.http.close()

    @property
    def token(self) -> Secret | None:
        """The bearer token in use (None before the login, or without credentials)."""
        return self._token

    def json(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        idempotent: bool = False,
    ) -> Any:
        """The decoded JSON answer of a successful request (after retries); an error answer raises."""
        response = self._send(method, path, json=json, params=params, idempotent=idempotent)
        try:
            return decode_json(response.content)
        except AnswerUnreadable as refused:
            kind = request_kind(method, idempotent=idempotent)
            shown = truncate(response.headers.get("content-type", "no content type"), 60)
            raise unread(method, path, f"{refused} ({_printable(shown, 60)})", kind, response.status_code) from None

    def _send(
        self, method: str, path: str, *, json: Any, params: Mapping[str, Any] | None, idempotent: bool
    ) -> httpx.Response:
        kind = request_kind(method, idempotent=idempotent)
        reauthenticated = False
        for attempt in range(1, self.backoff.attempts + 1):
            response, error = self._attempt(method, path, json, params, kind)
            if (
                response is not None
                and response.status_code in (401, 403)
                and self._can_login()
                and not reauthenticated
            ):
                self._token, reauthenticated = None, True
                response, error = self._attempt(method, path, json, params, kind)
            verdict = Verdict.RETRY
            if response is not None:
                verdict = classify(kind, outcome_of(response.status_code))
                if verdict is Verdict.OK:
                    return response
                error = self._refused(status_error(method, path, response, self._redact, kind))
            elif not isinstance(error, AirflowUnavailable):  # the table chose the class: only this one retries
                verdict = Verdict.PERMANENT
            if error is None or verdict is not Verdict.RETRY or attempt == self.backoff.attempts:
                raise error or AirflowError(f"{method} {path}: no answer", method=method, path=path)
            asked = _retry_after(response)
            if waits_too_long(asked):
                raise _not_waited(error, asked)
            delay = self.backoff.delay(attempt, self._rng(), asked)
            log.warning(
                "attempt #%d/%d failed; will retry in %.1fs: %s", attempt, self.backoff.attempts, delay, error.message
            )
            self._sleep(delay)
        raise AirflowError(f"{method} {path}: no attempt made", method=method, path=path)  # attempts < 1

    def _attempt(
        self, method: str, path: str, json: Any, params: Mapping[str, Any] | None, kind: Request
    ) -> tuple[httpx.Response | None, AirflowError | None]:
        heads: list[int] = []  # the answer's status, once its head arrived (the observer sees each request once)

        def head(status: int) -> None:
            heads.append(status)
            if self.observer is not None:
                self.observer(method, path, status)

        try:
            headers = self._auth_headers()
            with self._scans if path in SCANS else contextlib.nullcontext(), self._slots:
                request = self.http.build_request(method, path, json=json, params=params, headers=headers)
                response = self._exchange(request, head)
        except (*_HTTPX_ERRORS, AnswerRefused) as exc:
            if not heads and self.observer is not None:
                self.observer(method, path, None)
            if isinstance(exc, AnswerRefused):
                return None, self._unanswered(method, path, exc, kind, heads)
            return None, translate_any(method, path, exc, kind)
        if response.is_redirect:
            raise AirflowError(
                f"{method} {path} -> {response.status_code}: unexpected redirect (not followed)",
                method=method,
                path=path,
                status=response.status_code,
                hint="BACKFILLCTL_AIRFLOW_URL must be the API server's own address",
            )
        return response, None

    def _exchange(self, request: httpx.Request, head: Callable[[int], None] = lambda _status: None) -> httpx.Response:
        """Send `request` and read its whole answer within the deadline (`timeout` seconds from now) and the cap;
        `head` sees the status as soon as it arrives."""
        deadline = time.monotonic() + self.timeout
        request.extensions["timeout"] = timeout_until(deadline, CONNECT_TIMEOUT_S).as_dict()
        response = self.http.send(request, stream=True)
        try:
            head(response.status_code)
            body = read_body(response, deadline=deadline, cap=ANSWER_CAP)
        finally:
            response.close()
        headers = [(k, v) for k, v in response.headers.multi_items() if k.lower() not in _BODY_HEADERS]
        return httpx.Response(response.status_code, headers=headers, content=body, request=request)

    def _unanswered(
        self, method: str, path: str, refused: AnswerRefused, kind: Request, heads: list[int]
    ) -> AirflowError:
        """An answer not read whole: a late one as a timeout, a refused one by the retry table's failure after send."""
        status, why = (heads[0] if heads else None), str(refused)
        if isinstance(refused, AnswerLate):
            why = f"no whole answer within {self.timeout:g}s"
            if classify(kind, Failure.AFTER_SEND) is Verdict.RETRY:
                return AirflowUnavailable(f"{method} {path}: {why}", method=method, path=path, hint=LATE_HINT)
        return unread(method, path, why, kind, status)

    def _redact(self, text: str) -> str:
        """Remove our secrets, and anything that looks like a bearer token, from server-supplied text."""
        for secret in (self._token, self._password):
            if secret is not None and secret.reveal():
                text = text.replace(secret.reveal(), "[secure]")
        return _JWT.sub("[secure]", _BEARER.sub("Bearer [secure]", text))

    def _can_login(self) -> bool:
        return self._username is not None and self._password is not None

    def _auth_headers(self) -> dict[str, str]:
        with self._login_lock:  # observation runs in a small pool: one login for all of its threads
            if self._token is None and self._can_login():
                self._token = self._login()
        return {} if self._token is None else {"Authorization": f"Bearer {self._token.reveal()}"}

    def _login(self) -> Secret:
        assert self._password is not None
        path = "/auth/token"
        try:
            body = {"username": self._username, "password": self._password.reveal()}
            response = self._exchange(self.http.build_request("POST", path, json=body))
        except _HTTPX_ERRORS as exc:
            raise translate_any("POST", path, exc, Request.READ) from None
        except AnswerRefused as refused:
            raise self._unanswered("POST", path, refused, Request.READ, []) from None
        if response.status_code != 201:
            raise self._refused(status_error("POST", path, response, self._redact, Request.READ))
        return self._access_token(response)

    def _access_token(self, response: httpx.Response) -> Secret:
        """The token of a 201 from `POST /auth/token`; any other answer is said (its shape, never a token)."""
        try:
            data = decode_json(response.content)
        except AnswerUnreadable:
            kind = _printable(response.headers.get("content-type", "no content type"), 60)
            text = _printable(self._redact(response.text), 80)
            raise self._login_answer(response, f"with a body that is not JSON ({kind}): {text!r}") from None
        token = data.get("access_token") if isinstance(data, dict) else None
        if not isinstance(token, str) or not token:
            raise self._login_answer(response, f"without an access token: {_shape(data)}")
        problem = header_problem(token)
        if problem is not None:
            raise self._login_answer(response, f"with an access token that {problem}")
        return Secret(token)

    def _login_answer(self, response: httpx.Response, what: str) -> AirflowError:
        return AirflowError(
            f"Airflow at {self.shown_url} answered POST /auth/token -> {response.status_code} {what}",
            method="POST",
            path="/auth/token",
            status=response.status_code,
            hint="BACKFILLCTL_AIRFLOW_URL must be the Airflow 3 api-server's own address (not a proxy's login page)",
        )

    def _refused(self, error: AirflowError) -> AirflowError:
        """A 401/403 said as what it is: Airflow refused these credentials; the variables to check, no value."""
        if not isinstance(error, AirflowAuthError):
            return error
        said = f"Airflow said: {error.detail}" if error.detail else "Airflow gave no reason"
        if self._can_login():
            text, hint = "refused the credentials", said
            fix = "check BACKFILLCTL_AIRFLOW_USERNAME/PASSWORD"
        elif self._static_token:
            text, fix = "refused the credentials", "check BACKFILLCTL_AIRFLOW_TOKEN"
            hint = f"{said}; a token expires: with BACKFILLCTL_AIRFLOW_USERNAME/PASSWORD backfillctl gets a new one"
        else:
            text, fix, hint = "wants credentials", _HINTS[401], said
        return AirflowAuthError(
            f"Airflow at {self.shown_url} {text} ({error.method} {error.path} -> {error.status}): {fix}",
            method=error.method,
            path=error.path,
            status=error.status,
            detail=error.detail,
            hint=hint,
        )


def _not_waited(error: AirflowError, asked: float | None) -> AirflowError:
    """The error, saying that the server's Retry-After is longer than a pass waits (the next pass asks again)."""
    message = (
        f"{error.message}; Airflow asks to be asked again in {asked:.0f} s, longer than a pass waits "
        f"({RETRY_AFTER_LIMIT:.0f} s): the next pass asks again"
    )
    return type(error)(
        message, method=error.method, path=error.path, status=error.status, detail=error.detail, hint=error.hint
    )


def _retry_after(response: httpx.Response | None) -> float | None:
    value = None if response is None else response.headers.get("Retry-After")
    try:
        return None if value is None else float(value)
    except ValueError:
        return None


_BEARER = re.compile(r"(?i)bearer\s+[A-Za-z0-9._~+/=-]+")


_JWT = re.compile(r"eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*")


def _printable(text: str, limit: int) -> str:
    """Outside text cut short, every character outside printable ASCII as `?` (no line breaks, no escapes)."""
    return re.sub(r"[^\x20-\x7e]", "?", text[:limit]) + ("..." if len(text) > limit else "")


def _shape(data: Any) -> str:
    """A JSON value by its shape: an object's keys and the types of their values, never a value."""
    if isinstance(data, dict):
        keys = ", ".join(f"{_printable(str(k), 40)}: {_json_type(v)}" for k, v in list(data.items())[:8])
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
        hint=_HINTS.get(status),
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


_HINTS = {
    401: "set BACKFILLCTL_AIRFLOW_TOKEN, or BACKFILLCTL_AIRFLOW_USERNAME and BACKFILLCTL_AIRFLOW_PASSWORD",
    403: "the token is invalid for this server or lacks permission; get a new one",
}


_SCANNED = 65_536  # characters of an error answer read for its detail (at most 256 of them are shown)
_BODY_HEADERS = ("content-encoding", "content-length", "transfer-encoding")  # of the body as sent, not as read
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


_HTTPX_ERRORS = (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError, httpx.CookieConflict)


def translate_any(method: str, path: str, exc: Exception, kind: Request | None = None) -> AirflowError:
    """Every exception httpx can raise, as ours (the meta-test checks each httpx exception class)."""
    if isinstance(exc, httpx.HTTPError):
        return transport_error(method, path, exc, kind or request_kind(method))
    hint = URL_HINT if isinstance(exc, httpx.InvalidURL) else None
    return AirflowError(f"{method} {path} failed: {type(exc).__name__}", method=method, path=path, hint=hint)
