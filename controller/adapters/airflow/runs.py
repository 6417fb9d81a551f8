"""The DAG-run endpoints, read at a cost that does not grow with a backfill's size where it can: a page of runs,
or counts by state from `total_entries`, the failures, and the latest finished runs for the mean duration."""

from __future__ import annotations

from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Any

from controller.adapters.airflow.decode import dag_run_from_json, decoded, each
from controller.adapters.airflow.server import PAGE, Server
from controller.core.model.airflow import DagRun, RunSummary, summarise, summary_from_counts
from controller.core.model.spec import format_utc

PAIR = 2 * PAGE  # a range up to this many runs is read whole (two pages) rather than counted (5 reads, 3 rounds)
CODE_RUNS = 1000  # a create's range read whole up to this many runs (10 pages): the plan's code in range
IN_FLIGHT = ("queued", "running")  # a run in these states makes Airflow skip its date in a new backfill
# runs that started and ended: Airflow's start/end date filters let nulls through and it ignores a bound of 0
# (it tests the bound's truth), so a microsecond it is
FINISHED_AFTER_START = {"duration_gte": "0.000001"}


@dataclass(frozen=True, slots=True)
class RangeRead:
    counted: int  # runs in the kept states
    flying: list[DagRun]  # queued or running runs (a page of them)
    in_flight: int  # how many runs are queued or running
    runs: tuple[DagRun, ...] | None = None  # every run of the range (None: more than `CODE_RUNS`, not read)


def _range_params(
    from_date: datetime, to_date: datetime, *, partitioned: bool = False, backfill_only: bool = True
) -> dict[str, Any]:
    """The one DAG-runs range query: by logical date, or by partition date for a partitioned DAG (whose
    runs have no logical date; a reprocessed partition has several runs, oldest first)."""
    field, order = ("partition_date", "id") if partitioned else ("logical_date", "logical_date")
    params = {f"{field}_gte": format_utc(from_date), f"{field}_lte": format_utc(to_date), "order_by": order}
    return {"run_type": "backfill", **params} if backfill_only else params


def _with_type(item: Mapping[str, Any]) -> tuple[DagRun, str]:
    return dag_run_from_json(item), str(item.get("run_type"))


def _known(value: int) -> Future[int]:
    done: Future[int] = Future()
    done.set_result(value)
    return done


class Runs:
    def __init__(self, server: Server) -> None:
        self._server = server

    def dag_runs(
        self, dag_id: str, from_date: datetime, to_date: datetime, *, partitioned: bool = False
    ) -> list[DagRun]:
        """Backfill runs in the range (see `_range_params`)."""
        params = _range_params(from_date, to_date, partitioned=partitioned)
        return list(self._server.entries(f"/api/v2/dags/{dag_id}/dagRuns", "dag_runs", params, dag_run_from_json))

    def dag_runs_if_within(
        self, dag_id: str, from_date: datetime, to_date: datetime, *, partitioned: bool, pages: int
    ) -> list[DagRun] | None:
        """The backfill runs in the range if they fit in `pages` pages (the first call tells), else None."""
        path, params = f"/api/v2/dags/{dag_id}/dagRuns", _range_params(from_date, to_date, partitioned=partitioned)
        first, total = self._runs_page(path, {**params, "offset": 0})
        if -(-total // PAGE) > pages:
            return None
        if total <= PAGE:
            return first
        return first + list(self._server.entries(path, "dag_runs", params, dag_run_from_json, offset=len(first)))

    def run_summary(
        self,
        dag_id: str,
        from_date: datetime,
        to_date: datetime,
        *,
        page: tuple[list[DagRun], int] | None = None,
        expected: int | None = None,
    ) -> RunSummary:
        """A backfill's runs by state at a cost that does not grow with its size (logical-date DAGs).

        Up to one page of runs: that page (1 call); up to two: both pages (2 calls, side by side when `expected`
        says so). More: the queued and running counts from `total_entries`
        of state-filtered queries (`limit=1`), the failed runs (paginated over failures only), the latest
        finished page for the mean duration, and success as what is left of the range's total — 5
        calls for a year of hourly runs instead of 88 pages (6 when over a hundred runs failed: the failed
        dates shown are then the first hundred). `expected`, the runs the backfill made when known: beyond a
        page, the total is counted beside the other reads (its first page would only say it is beyond one).
        """
        path, params = f"/api/v2/dags/{dag_id}/dagRuns", _range_params(from_date, to_date)
        if page is None and expected is not None and expected > PAGE:
            return self._counted(path, params, total=None) if expected > PAIR else self._pair(path, params)
        first, total = page or self._runs_page(path, {**params, "offset": 0})  # `page`: the first one, already read
        if total <= len(first):
            return summarise(first)
        if total <= PAIR:
            return self._rest(path, params, first, total)
        return self._counted(path, params, total=total)

    def _pair(self, path: str, params: dict[str, Any]) -> RunSummary:
        """Both pages of a range recorded at up to two pages, read side by side (1 round, not the 3 of counting)."""
        with ThreadPoolExecutor(max_workers=2, thread_name_prefix="pair") as pool:
            first, second = (pool.submit(self._runs_page, path, {**params, "offset": at}) for at in (0, PAGE))
            (runs, total), (more, again) = first.result(), second.result()
        whole = runs + more
        # a run made or removed between the two reads shifts the pages: count instead
        return summarise(whole) if total == again == len(whole) else self._counted(path, params, total=None)

    def _rest(self, path: str, params: dict[str, Any], first: list[DagRun], total: int) -> RunSummary:
        """The range's second page beside its first (1 call more, where counting costs 4)."""
        more, again = self._runs_page(path, {**params, "offset": len(first)})
        whole = first + more
        return summarise(whole) if again == total == len(whole) else self._counted(path, params, total=None)

    def runs_or_summary(self, dag_id: str, from_date: datetime, to_date: datetime) -> list[DagRun] | RunSummary:
        """The backfill runs in the range when one page holds them (1 call: a running backfill's own runs are
        then told apart), else their counts by state as `run_summary` makes them (no call more than it)."""
        path, params = f"/api/v2/dags/{dag_id}/dagRuns", _range_params(from_date, to_date)
        page = self._runs_page(path, {**params, "offset": 0})
        return page[0] if page[1] <= len(page[0]) else self.run_summary(dag_id, from_date, to_date, page=page)

    def _counted(self, path: str, params: dict[str, Any], *, total: int | None) -> RunSummary:
        """The summary from counts by state (`total`: the range's runs, counted here when None)."""
        # the latest runs that ran (never-started ones have no end date, and PostgreSQL sorts nulls first);
        # before 3.2.0 there is no duration filter: the mean is of the page's runs that ran (summarise skips
        # the others), a smaller sample when runs cancelled while queued sort first
        recent_params = {**params, "state": ["success", "failed"], **self._started(), "order_by": "-end_date"}
        with ThreadPoolExecutor(max_workers=5, thread_name_prefix="summary") as pool:  # independent reads: overlap them
            counted = {
                state: pool.submit(self._count, path, {**params, "state": state}) for state in ("queued", "running")
            }
            failing, latest = (
                pool.submit(self._failures, path, params),
                pool.submit(self._runs_page, path, recent_params),
            )
            every = pool.submit(self._count, path, params) if total is None else _known(total)
            counts = {state: future.result() for state, future in counted.items()}
            (failed, failures, never_started), (recent, _) = failing.result(), latest.result()
            whole = every.result()
        # a run that changed state between these calls is counted once, never below zero
        counts |= {"failed": failures, "success": max(0, whole - sum(counts.values()) - failures)}
        return summary_from_counts(counts, failed, recent, never_started=never_started)

    def _failures(self, path: str, params: dict[str, Any]) -> tuple[list[DagRun], int, int | None]:
        """The failed runs to show (at most a page of them), how many failed, and how many of those never
        started (None: count them in the runs shown). Beyond a page, the started failures are counted and
        their first page shown, so thousands of failures cost two calls, not one per hundred."""
        first, failures = self._runs_page(path, {**params, "state": "failed"})
        if failures <= len(first):
            return first, failures, None
        if not self._server.capabilities.duration_filter:  # no filter for "started": every failed run is read and
            # counted here, one call per hundred failures instead of one (before Airflow 3.2.0)
            failed = {**params, "state": "failed"}
            every = first + list(self._server.entries(path, "dag_runs", failed, dag_run_from_json, offset=len(first)))
            started_runs = [r for r in every if r.start_date is not None]
            return started_runs[:PAGE], len(every), len(every) - len(started_runs)
        shown, started = self._runs_page(path, {**params, "state": "failed", **FINISHED_AFTER_START})
        return shown, failures, max(0, failures - started)

    def _started(self) -> dict[str, str]:
        """The filter for runs that started and ended, where the server has it (3.2.0)."""
        return FINISHED_AFTER_START if self._server.capabilities.duration_filter else {}

    def queued_runs(self, dag_id: str, from_date: datetime, to_date: datetime) -> tuple[int, datetime | None]:
        """How many backfill runs in the range are queued, and the oldest queue time among the first page of
        them by id (a backfill queues its runs together): one call, whatever the range."""
        path, params = f"/api/v2/dags/{dag_id}/dagRuns", _range_params(from_date, to_date)
        queued, total = self._runs_page(path, {**params, "state": "queued", "order_by": "id"})
        return total, min((r.queued_at for r in queued if r.queued_at is not None), default=None)

    def newest_runs(self, dag_id: str, from_date: datetime, to_date: datetime, *, partitioned: bool) -> list[DagRun]:
        """One page of the backfill runs in the range, newest first (a backfill's creator is read from the runs its
        create made: the newest ones unless a later backfill made more)."""
        path = f"/api/v2/dags/{dag_id}/dagRuns"
        params = {**_range_params(from_date, to_date, partitioned=partitioned), "order_by": "-id"}
        return self._runs_page(path, params)[0]

    def _runs_page(self, path: str, params: dict[str, Any]) -> tuple[list[DagRun], int]:
        """One page of DAG runs, and how many the query matches in all."""
        items, total = self._server.page(path, "dag_runs", {**params, "limit": PAGE})
        runs = decoded(partial(each, dag_run_from_json, key="dag_runs"), items, "GET", path)
        return runs, total

    def _count(self, path: str, params: dict[str, Any]) -> int:
        return self._server.page(path, "dag_runs", {**params, "limit": 1})[1]

    def range_runs(
        self, dag_id: str, from_date: datetime, to_date: datetime, *, kept: tuple[str, ...], partitioned: bool = False
    ) -> tuple[int, list[DagRun], int]:
        """`range_read` without the runs."""
        read = self.range_read(dag_id, from_date, to_date, kept=kept, partitioned=partitioned)
        return read.counted, read.flying, read.in_flight

    def range_read(
        self, dag_id: str, from_date: datetime, to_date: datetime, *, kept: tuple[str, ...], partitioned: bool = False
    ) -> RangeRead:
        """Runs of any type in the range, for a spec still to be created: how many are in the `kept` states (the
        finished runs its reprocess rule leaves alone), the queued or running ones Airflow will skip (the first
        page of them) and how many those are, and every run when at most `CODE_RUNS` (the plan's code in range).
        One call a page up to `CODE_RUNS` runs, else three."""
        path = f"/api/v2/dags/{dag_id}/dagRuns"
        params = _range_params(from_date, to_date, partitioned=partitioned, backfill_only=False)
        runs, total = self._runs_page(path, {**params, "offset": 0})
        if len(runs) < total <= CODE_RUNS and not partitioned:
            runs += self._server.entries(path, "dag_runs", params, dag_run_from_json, offset=len(runs))
        if total <= len(runs):
            flying = [r for r in runs if r.state in IN_FLIGHT]
            return RangeRead(sum(1 for r in runs if r.state in kept), flying, len(flying), tuple(runs))
        counted = self._count(path, {**params, "state": list(kept)}) if kept else 0
        page, in_flight = self._runs_page(path, {**params, "state": list(IN_FLIGHT)})
        return RangeRead(counted, [r for r in page if r.state in IN_FLIGHT], in_flight)

    def runs_with_types(
        self, dag_id: str, from_date: datetime, to_date: datetime, *, partitioned: bool = False
    ) -> list[tuple[DagRun, str]]:
        """Every run in the range (any run type), with its run type: the report's heat map."""
        params = _range_params(from_date, to_date, partitioned=partitioned, backfill_only=False)
        return list(self._server.entries(f"/api/v2/dags/{dag_id}/dagRuns", "dag_runs", params, _with_type))

    # --- plumbing ------------------------------------------------------------------------------------
