"""Retry policy as pure functions: how long to wait, and what an outcome means (R12)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT"})


class Verdict(StrEnum):
    OK = "ok"
    RETRY = "retry"  # safe to send again after a delay
    PERMANENT = "permanent"  # retrying cannot help
    AMBIGUOUS = "ambiguous"  # a non-idempotent request may have taken effect: observe before retrying
    OBSERVE = "observe"  # a conflict: the world is not what we thought; re-read it


class Failure(StrEnum):
    """Transport failures, classified by whether the request can have reached the server."""

    NOT_SENT = "not-sent"  # connect error/timeout, pool timeout: nothing reached the server
    AFTER_SEND = "after-send"  # read/write timeout, dropped connection: it may have been processed


@dataclass(frozen=True, slots=True)
class Backoff:
    base: float = 0.5
    cap: float = 8.0
    jitter: float = 0.25  # fraction of the delay added at most
    attempts: int = 4

    def delay(self, attempt: int, unit_random: float, retry_after: float | None = None) -> float:
        """Delay before attempt `attempt + 1` (attempt counts from 1); `unit_random` in [0, 1)."""
        raw: float = min(self.cap, self.base * 2.0 ** (attempt - 1))
        delay = raw + raw * self.jitter * unit_random
        return max(delay, retry_after or 0.0)


def classify_status(method: str, status: int) -> Verdict:
    if status < 400:
        return Verdict.OK
    if status == 409:
        return Verdict.OBSERVE
    if status == 429:
        return Verdict.RETRY
    if status >= 500:
        return Verdict.RETRY if method.upper() in IDEMPOTENT else Verdict.AMBIGUOUS
    return Verdict.PERMANENT


def classify_failure(method: str, failure: Failure) -> Verdict:
    if failure is Failure.NOT_SENT or method.upper() in IDEMPOTENT:
        return Verdict.RETRY
    return Verdict.AMBIGUOUS
