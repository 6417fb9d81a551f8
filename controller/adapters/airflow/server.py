"""The server itself: its release and capabilities (read from `/api/v2/version` once), the preflight, its
health; and every API call, whose run filters are first checked against the capabilities (Airflow ignores a
query parameter it does not know and answers unfiltered: a wrong count, never an error).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from functools import partial
from typing import Any, TypeVar

from controller.adapters.airflow.decode import Malformed, decoded, each, field, objects, parse_time
from controller.adapters.airflow.transport import Transport
from controller.core.model.capabilities import (
    ALLOW_UNTESTED,
    NEWEST_READ,
    RUN_FILTERS,
    SUPPORTED,
    Capabilities,
    Support,
    has_filter,
    judge,
)
from controller.core.model.guards import SchedulerHealth
from controller.core.model.privilege import token_claims
from controller.errors import (
    AirflowAuthError,
    AirflowBadAnswer,
    AirflowError,
    AirflowInvalid,
    AirflowNotFound,
    AirflowUnavailable,
    AirflowVersionError,
)

log = logging.getLogger("controller.adapters.airflow")  # the name JSON log lines carry: the package's
PAGE = 100  # the server clamps larger limits to 100 silently
# one listing reads at most this many pages and entries (a server that pages without end stops there): far above
# a DAG's backfills or a range's runs (ten years of hourly runs are 876 pages)
MAX_PAGES = 1_000
MAX_ENTRIES = 100_000
T = TypeVar("T")
DAGS = "/api/v2/dags"
DAG_ORDER = {"order_by": "dag_id"}  # the DAG listing's order: every reader pages it alike
FIRST_DAG_PAGE = {**DAG_ORDER, "limit": PAGE, "offset": 0}
# how long the preflight's first page of the DAG listing may stand for the command's own read of it (served once)
PRIMED_FOR = 5.0


@dataclass(frozen=True)
class Primed:
    """The DAG listing's first page as the preflight read it, for the command's own first read of that page."""

    answer: Any
    at: float  # monotonic seconds


def unsupported_filters(caps: Capabilities, params: Mapping[str, Any]) -> list[str]:
    """The query parameters in `params` that the server would ignore (it answers unfiltered)."""
    return sorted(name for name in params if not has_filter(caps, name))


class Server:
    def __init__(self, transport: Transport, *, allow_untested: bool, capabilities: Capabilities | None) -> None:
        self.transport = transport
        self.allow_untested = allow_untested  # BACKFILLCTL_ALLOW_UNTESTED_AIRFLOW: a release newer than tested
        self._capabilities = capabilities  # read from /api/v2/version once (preflight, or the first need)
        self._primed: Primed | None = None
        self.clock: Callable[[], float] = time.monotonic  # how old a primed answer is

    def json(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: Mapping[str, Any] | None = None,
        idempotent: bool = False,
    ) -> Any:
        """One call's JSON answer; a run filter this release lacks is refused before anything is sent. The preflight's
        primed page answers the first GET of it (within `PRIMED_FOR`); any other method drops it unread."""
        if (primed := self._primed) is not None and (method != "GET" or _first_dag_page(path, params)):
            self._primed = None
            if method == "GET" and self._fresh(primed):
                return primed.answer
        if params and any(name in RUN_FILTERS for name in params) and (ignored := self._ignored(params)):
            raise AirflowVersionError(  # the server would ignore it and answer unfiltered: a wrong count
                f"{method} {path}: Airflow {self.capabilities.version} has no filter {', '.join(ignored)}",
                method=method,
                path=path,
            )
        return self.transport.json(method, path, json=json, params=params, idempotent=idempotent)

    def paginate(self, path: str, key: str, params: dict[str, Any], *, offset: int = 0) -> Iterator[Mapping[str, Any]]:
        """Every entry of a listing (each an object), page by page: `entries` without decoding them."""
        return self.entries(path, key, params, _as_is, offset=offset)

    def entries(
        self, path: str, key: str, params: dict[str, Any], decode: Callable[[Mapping[str, Any]], T], *, offset: int = 0
    ) -> Iterator[T]:
        """Every entry of a listing, page by page, `decode`d; one without end stops at `MAX_PAGES` or
        `MAX_ENTRIES`, and a malformed page or entry is `AirflowBadAnswer` (never a KeyError, never exit 3)."""
        for _ in range(MAX_PAGES):
            items, total = self.listing_page(path, key, {**params, "limit": PAGE, "offset": offset})
            if offset + len(items) > MAX_ENTRIES:
                raise _endless(path, f"more than {MAX_ENTRIES:,} entries")
            yield from decoded(partial(each, decode, key=key, start=offset), items, "GET", path)
            offset += len(items)
            if not items or (total is not None and offset >= total):
                return
        raise _endless(path, f"more than {MAX_PAGES:,} pages")

    def page(self, path: str, key: str, params: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], int]:
        """One page of a listing, its entries (objects) and `total_entries`, which a count needs: there and exact."""
        return decoded(partial(_counted, key=key), self.json("GET", path, params=params), "GET", path)

    def listing_page(
        self, path: str, key: str, params: Mapping[str, Any]
    ) -> tuple[list[Mapping[str, Any]], int | None]:
        """One page of a listing; `total_entries` may be absent or null where the release allows it (cursor
        pagination, 3.2.2: the listing then ends at an empty page)."""
        data = self.json("GET", path, params=params)
        nullable = isinstance(data, dict) and data.get("total_entries") is None and self.capabilities.cursor_pagination
        return decoded(partial(_listed, key=key, nullable=nullable), data, "GET", path)

    def _ignored(self, params: Mapping[str, Any]) -> list[str]:
        return unsupported_filters(self.capabilities, params)

    def version(self) -> str:
        """The release the server reports; one backfillctl does not support is refused here (see `judge`)."""
        return self._read_version()[0]

    def _read_version(self) -> tuple[str, Capabilities]:
        data = self.json("GET", "/api/v2/version")
        version = str(data.get("version", "")) if isinstance(data, dict) else ""
        if not version or not version.split(".", maxsplit=1)[0].isdigit() or int(version.split(".")[0]) < 3:
            raise AirflowVersionError(
                f"Airflow at {self.transport.shown_url} reports version {version or 'unknown'}; "
                "backfillctl needs Airflow 3",
                method="GET",
                path="/api/v2/version",
                hint="point BACKFILLCTL_AIRFLOW_URL at an Airflow 3 api-server",
            )
        capabilities = self._capabilities = self._judged(version)
        return version, capabilities

    @property
    def known_capabilities(self) -> Capabilities | None:
        """The capabilities if the version was read already (never a call)."""
        return self._capabilities

    @property
    def capabilities(self) -> Capabilities:
        """What this server's API has, from its version (read once)."""
        return self._capabilities if self._capabilities is not None else self._read_version()[1]

    def _judged(self, version: str) -> Capabilities:
        verdict, path = judge(version), "/api/v2/version"
        if verdict.capabilities is None:
            raise AirflowVersionError(
                verdict.message,
                method="GET",
                path=path,
                hint=f"use an Airflow {SUPPORTED} api-server (upgrade this one)",
            )
        if verdict.support is Support.UNTESTED and not self.allow_untested:
            raise AirflowVersionError(
                f"{verdict.message}; refusing to run against an untested release",
                method="GET",
                path=path,
                hint=f"set {ALLOW_UNTESTED}=1 to go on with the newest known release's API, or use Airflow {SUPPORTED}",
            )
        if verdict.support is Support.PREVIEW:
            log.warning("PREVIEW AIRFLOW LINE: %s", verdict.message)
        if verdict.support is Support.UNTESTED:
            log.warning(
                "UNTESTED AIRFLOW RELEASE (%s=1): %s; going on with the API of Airflow %s, the newest known",
                ALLOW_UNTESTED,
                verdict.message,
                NEWEST_READ,
            )
        return verdict.capabilities

    def token_claims(self) -> Mapping[str, Any] | None:
        """The claims of the token in use (after the preflight's login), read, not verified; None: no JWT."""
        token = self.transport.token
        return None if token is None else token_claims(token.reveal())

    def can_read_connections(self) -> bool | None:
        """Whether the identity may list connections (a read backfillctl never needs): True on 200, False on
        401/403, None when the answer says neither (least privilege: `controller/core/model/privilege.py`)."""
        try:
            self.json("GET", "/api/v2/connections", params={"limit": 1})
        except AirflowAuthError:
            return False
        except AirflowError:
            return None
        return True

    def preflight(self, *, lists_dags: bool = False) -> str:
        """One quick check before a command's work: the URL answers like Airflow 3, and the credentials work.

        Two attempts at most, so an unreachable host fails within about 15 s and a misconfiguration at once. The
        credentials are checked with a read of the DAG listing (a refusal says "refused the credentials"): for a
        command that `lists_dags`, its first page, kept for the command's own first read of it (one call, not two).
        """
        transport = self.transport
        saved, transport.backoff = transport.backoff, replace(transport.backoff, attempts=2)
        try:
            version = self._preflight_version()
            if lists_dags and self._primed_listing():
                return version
            if lists_dags:  # the page's two attempts are spent: the light check gets one
                transport.backoff = replace(transport.backoff, attempts=1)
            self.json("GET", DAGS, params={"limit": 1})
        finally:
            transport.backoff = saved
        return version

    def _primed_listing(self) -> bool:
        """The DAG listing's first page read and kept (`Primed`); False when Airflow failed to serve it (a timeout, a
        5xx): the light check decides instead, and the command reads (or does without) the page itself, as it would
        have. Any other answer (a refusal, a 404, a malformed page) fails the preflight as the light check would."""
        try:
            answer = self.json("GET", DAGS, params=FIRST_DAG_PAGE)
        except AirflowUnavailable as exc:
            log.info("the DAG listing's first page is unavailable (%s); checking the credentials on one", exc.message)
            return False
        self._primed = Primed(answer, self.clock())
        return True

    def first_dag_page_at_hand(self) -> bool:
        """Whether the preflight's first page of the DAG listing is at hand (its read costs no call)."""
        return self._primed is not None and self._fresh(self._primed)

    def _fresh(self, primed: Primed) -> bool:
        return self.clock() - primed.at <= PRIMED_FOR

    def _preflight_version(self) -> str:
        where = f"BACKFILLCTL_AIRFLOW_URL={self.transport.shown_url}"
        try:
            return self.version()
        except AirflowUnavailable as exc:
            if exc.status is None:
                raise AirflowUnavailable(
                    f"cannot reach Airflow at {where}: {exc.message}",
                    method=exc.method,
                    path=exc.path,
                    hint="is Airflow's api-server running, and is that its address?",
                ) from None
            raise _not_airflow(where, exc) from None
        except (AirflowNotFound, AirflowInvalid, AirflowBadAnswer) as exc:
            raise _not_airflow(where, exc) from None

    def health(self) -> dict[str, Any]:
        """`GET /api/v2/monitor/health` (no auth; always 200: the JSON tells the scheduler's status)."""
        data = self.json("GET", "/api/v2/monitor/health")
        return data if isinstance(data, dict) else {}

    def scheduler_health(self) -> SchedulerHealth:
        """The scheduler's status and heartbeat (the load guards' brake); an unreadable answer says why."""
        try:
            data = self.health()
            scheduler = data.get("scheduler")
            if not isinstance(scheduler, dict) or "status" not in scheduler:
                return SchedulerHealth(error="GET /api/v2/monitor/health: the answer has no scheduler status")
            beat = scheduler.get("latest_scheduler_heartbeat")
            return SchedulerHealth(scheduler["status"], parse_time(beat) if isinstance(beat, str) else None)
        except Malformed as exc:  # a heartbeat that is not a time
            return SchedulerHealth(error=f"bad heartbeat: {exc.message}")
        except AirflowError as exc:
            return SchedulerHealth(error=exc.message)


def _counted(data: Any, key: str) -> tuple[list[Mapping[str, Any]], int]:
    return objects(data, key), _count(field(data, "total_entries", int, "a count"))


def _listed(data: Any, key: str, nullable: bool) -> tuple[list[Mapping[str, Any]], int | None]:
    if not nullable:
        return _counted(data, key)
    total = field(data, "total_entries", int, "a count", required=False)
    return objects(data, key), None if total is None else _count(total)


def _count(total: int) -> int:
    if total < 0:
        raise Malformed(f"total_entries is {total}, not a count")
    return total


def _as_is(item: Mapping[str, Any]) -> Mapping[str, Any]:
    return item


def _endless(path: str, what: str) -> AirflowBadAnswer:
    return AirflowBadAnswer(
        f"GET {path}: the listing has {what}; backfillctl reads no more of it",
        method="GET",
        path=path,
        hint="is BACKFILLCTL_AIRFLOW_URL an Airflow 3 api-server? its listings end (total_entries)",
    )


def _not_airflow(where: str, exc: AirflowError) -> AirflowError:
    return AirflowVersionError(
        f"{where} does not answer like Airflow 3's API: GET /api/v2/version -> {exc.status}",
        method="GET",
        path="/api/v2/version",
        status=exc.status,
        hint="set it to the Airflow api-server's base address (scheme, host and port, no path)",
    )


def _first_dag_page(path: str, params: Mapping[str, Any] | None) -> bool:
    return path == DAGS and dict(params or {}) == FIRST_DAG_PAGE
