"""Retry policy as pure functions: how long to wait, and what an outcome means.

One table (`RULES`) says, for each kind of request and each kind of outcome, whether to retry, give up,
observe, or treat the result as ambiguous; the client and the reconciler both read it through `classify`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Verdict(StrEnum):
    OK = "ok"
    RETRY = "retry"  # safe to send again after a delay
    PERMANENT = "permanent"  # retrying cannot help
    AMBIGUOUS = "ambiguous"  # a non-idempotent request may have taken effect: observe before retrying
    OBSERVE = "observe"  # a conflict: the world is not what we thought; re-read it


class Failure(StrEnum):
    """Transport failures, classified by whether the request can have reached the server."""

    CONFIG = "config"  # no scheme, unsupported protocol, malformed URL: nothing can ever be sent
    NOT_SENT = "not-sent"  # connect error/timeout, pool timeout: nothing reached the server
    AFTER_SEND = "after-send"  # read/write timeout, dropped connection: it may have been processed


class Request(StrEnum):
    """What a request does to the server, which decides whether repeating it is safe."""

    READ = "read"  # GET, and POST /backfills/dry_run: no effect
    UPDATE = "update"  # PUT pause/unpause/cancel: repeating it gives the same result
    CREATE = "create"  # POST /backfills: each one that lands creates a backfill


class Outcome(StrEnum):
    SERVER_ERROR = "5xx"
    RATE_LIMITED = "429"
    CONFLICT = "409"
    CLIENT_ERROR = "4xx"  # 400, 401, 403, 404, 422, …


RULES: dict[tuple[Request, Outcome | Failure], Verdict] = {
    **{(r, Failure.CONFIG): Verdict.PERMANENT for r in Request},
    **{(r, Failure.NOT_SENT): Verdict.RETRY for r in Request},
    **{(r, Outcome.RATE_LIMITED): Verdict.RETRY for r in Request},
    **{(r, Outcome.CONFLICT): Verdict.OBSERVE for r in Request},
    **{(r, Outcome.CLIENT_ERROR): Verdict.PERMANENT for r in Request},
    (Request.READ, Failure.AFTER_SEND): Verdict.RETRY,
    (Request.UPDATE, Failure.AFTER_SEND): Verdict.RETRY,
    (Request.CREATE, Failure.AFTER_SEND): Verdict.AMBIGUOUS,
    (Request.READ, Outcome.SERVER_ERROR): Verdict.RETRY,
    (Request.UPDATE, Outcome.SERVER_ERROR): Verdict.RETRY,
    (Request.CREATE, Outcome.SERVER_ERROR): Verdict.AMBIGUOUS,
}


def request_kind(method: str, *, idempotent: bool = False) -> Request:
    """GET/HEAD/OPTIONS (and POSTs the caller marks idempotent, like a dry run) read; PUT updates."""
    upper = method.upper()
    if idempotent or upper in ("GET", "HEAD", "OPTIONS"):
        return Request.READ
    return Request.UPDATE if upper in ("PUT", "DELETE") else Request.CREATE


def outcome_of(status: int) -> Outcome | None:
    if status < 400:
        return None
    if status == 409:
        return Outcome.CONFLICT
    if status == 429:
        return Outcome.RATE_LIMITED
    return Outcome.SERVER_ERROR if status >= 500 else Outcome.CLIENT_ERROR


def classify(request: Request, what: Outcome | Failure | None) -> Verdict:
    return Verdict.OK if what is None else RULES[request, what]


@dataclass(frozen=True, slots=True)
class Backoff:
    base: float = 0.5
    cap: float = 8.0
    jitter: float = 0.25  # fraction of the delay added at most
    attempts: int = 4

    def delay(self, attempt: int, unit_random: float, retry_after: float | None = None) -> float:
        """Delay before attempt `attempt + 1` (attempt counts from 1); `unit_random` in [0, 1); a server's
        `retry_after` is waited when it is longer, up to RETRY_AFTER_LIMIT (`waits_too_long` says when it is not)."""
        raw: float = min(self.cap, self.base * 2.0 ** (attempt - 1))
        delay = raw + raw * self.jitter * unit_random
        asked = retry_after if retry_after is not None and 0.0 <= retry_after <= RETRY_AFTER_LIMIT else 0.0
        return max(delay, asked)


RETRY_AFTER_LIMIT = 60.0  # seconds: a longer Retry-After is not waited within a pass (the next pass asks again)


def waits_too_long(retry_after: float | None) -> bool:
    """A server's Retry-After a pass does not wait: longer than RETRY_AFTER_LIMIT (`inf` too; a negative one or
    `nan` is no wait at all, and the backoff's own delay applies)."""
    return retry_after is not None and retry_after > RETRY_AFTER_LIMIT
