"""The controller's own exception tree and the one table of exit codes.

Every layer raises these; adapters translate their library's exceptions into them, and the CLI's single
top-level handler maps them to exit codes.  Messages never contain secrets: adapters build them from
method, path, status and a truncated server detail only.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes: the one table (the README lists it)."""

    OK = 0
    ERROR = 1
    USAGE = 2
    UNEXPECTED = 3
    CHANGES = 4
    REFUSED = 5
    INTERRUPTED = 130


DETAIL_LIMIT = 256


def truncate(text: str, limit: int = DETAIL_LIMIT) -> str:
    """Cut a server- or user-supplied text to `limit` characters, marking the cut."""
    return text if len(text) <= limit else text[: limit - 1] + "…"


class ControllerError(Exception):
    """Root of every error the controller raises on purpose."""

    exit_code: ExitCode = ExitCode.ERROR

    def __init__(self, message: str, *, hint: str | None = None, details: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.details = details  # one line each, printed indented under the message (each made one line)


class ConfigError(ControllerError):
    """Settings (environment, flags) are missing or malformed."""


class UsageError(ControllerError):
    """A command-line value is wrong (same exit code as click's usage errors)."""

    exit_code = ExitCode.USAGE


class ScopeConflict(ControllerError):
    """Issue 44: this reconciler's scope overlaps another Airflow login's recorded in the same store."""

    exit_code = ExitCode.USAGE


class InvalidSpecs(ControllerError):
    """Validation found errors; the diagnostics were already rendered."""


class Refused(ControllerError):
    """The controller refused to act: unsafe or stale plan, lock held."""

    exit_code = ExitCode.REFUSED


class LockHeld(Refused):
    """Another reconciler holds the store's lease."""


class StalePlan(Refused):
    """`--plan-checksum` does not match the plan computed now."""


class StoreError(ControllerError):
    """The audit/state store failed (open, migrate, write)."""


class StoreMissing(StoreError):
    """A read-only command found no store where the URL points: nothing was reconciled there yet."""


class StoreUnavailable(StoreError):
    """The store's database could not be reached, or the connection to it dropped mid-transaction (which then
    rolled back): a reconcile pass ends cleanly, and `--watch` retries."""


class GitError(ControllerError):
    """Reading git history failed (missing ref, shallow clone, not a repository)."""


class ShallowClone(GitError):
    """The specs checkout is a shallow clone: the commits that added the spec files (queue order) and the last
    reconciled commit (the gate) may be missing, so reconcile, plan and status refuse it (a usage mistake)."""

    exit_code = ExitCode.USAGE


class AirflowError(ControllerError):
    """Root of Airflow REST errors; carries method, path, status and a truncated detail."""

    def __init__(
        self,
        message: str,
        *,
        method: str = "",
        path: str = "",
        status: int | None = None,
        detail: str = "",
        hint: str | None = None,
    ) -> None:
        super().__init__(message, hint=hint)
        self.method = method
        self.path = path
        self.status = status
        self.detail = truncate(detail)


class AirflowAuthError(AirflowError):
    """401/403: credentials missing, wrong or not allowed."""


class AirflowNotFound(AirflowError):
    """404."""


class AirflowConflict(AirflowError):
    """409: another backfill is active, or the backfill is already completed."""


class AirflowInvalid(AirflowError):
    """400/422: Airflow rejected the request; retrying cannot help."""


class AirflowUnavailable(AirflowError):
    """5xx or a transport failure on a request that certainly had no effect (or is safe to repeat)."""


class AirflowAmbiguous(AirflowError):
    """A mutating request may have taken effect (timeout after send, 5xx): observe before retrying."""


class AirflowBadAnswer(AirflowError):
    """An answer backfillctl does not read: over its size cap, not JSON, nested too deep, or not the shape the API
    declares (a field missing or of another type, a listing without end). Asking again gets the same answer."""


class AirflowVersionError(AirflowError):
    """The server is not Airflow 3."""


class Stopped(Refused):
    """An emergency stop holds the spec: an intent to create or unpause it is refused in its transaction (exit 5)."""
