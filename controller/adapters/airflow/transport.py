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
import ssl
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypedDict
from urllib.parse import urlsplit

import httpx

from controller.adapters.airflow.failures import (
    HINTS,
    HTTPX_ERRORS,
    LATE_HINT,
    URL_HINT,
    printable,
    shape,
    status_error,
    translate_any,
    unread,
)
from controller.adapters.answers import (
    ACCEPT_ENCODING,
    AnswerLate,
    AnswerRefused,
    AnswerUnreadable,
    decode_json,
    read_body,
    timeout_until,
)
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
    AirflowAuthError,
    AirflowError,
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
_BODY_HEADERS = ("content-encoding", "content-length", "transfer-encoding")  # of the body as sent, not as read
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


def tls_for(base_url: str) -> ssl.SSLContext | bool:
    """What verifies TLS for `base_url`: the system's CA bundle for https. An http URL makes no TLS connection (every
    request is relative to it, no redirect is followed), so it gets a context that trusts nothing: one that would be
    made fails closed, and no bundle is loaded (~40 ms a start)."""
    if urlsplit(base_url).scheme.lower() == "http":
        return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    return True


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
                verify=tls_for(self.base_url),
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
            raise unread(method, path, f"{refused} ({printable(shown, 60)})", kind, response.status_code) from None

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
        except (*HTTPX_ERRORS, AnswerRefused) as exc:
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
            if self._token is None and self._username is not None and self._password is not None:
                self._token = self._login(self._username, self._password)
        return {} if self._token is None else {"Authorization": f"Bearer {self._token.reveal()}"}

    def _login(self, username: str, password: Secret) -> Secret:
        path = "/auth/token"
        try:
            body = {"username": username, "password": password.reveal()}
            response = self._exchange(self.http.build_request("POST", path, json=body))
        except HTTPX_ERRORS as exc:
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
            kind = printable(response.headers.get("content-type", "no content type"), 60)
            text = printable(self._redact(response.text), 80)
            raise self._login_answer(response, f"with a body that is not JSON ({kind}): {text!r}") from None
        token = data.get("access_token") if isinstance(data, dict) else None
        if not isinstance(token, str) or not token:
            raise self._login_answer(response, f"without an access token: {shape(data)}")
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
            text, fix, hint = "wants credentials", HINTS[401], said
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
