"""Each backfill's own runs by state, for the observation: counted by state over a range (a few calls, whatever
its size) or read and told apart by date and queue time (`core.plan.ownership`), several backfills of one DAG in
one read of their whole range when that takes fewer pages.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime

from controller.adapters.airflow import AirflowClient
from controller.core.model.airflow import Backfill, DagRun, RunSummary, slot_counts, summarise
from controller.core.model.binding import Binding, CreateFacts
from controller.core.plan.ownership import DagHistory, Owned, own_runs
from controller.core.rules.schedules import runs_of, runs_within

BATCH_FROM = 2  # more backfills than this on one DAG: try one read of their whole range first


class SummaryReader:
    def __init__(self, client: AirflowClient) -> None:
        self.client = client

    def summaries(
        self,
        dag_id: str,
        wanted: Sequence[Backfill],
        listed: Sequence[Backfill],
        bindings: Mapping[str, Binding],
        owners: Mapping[int, str],
        *,
        partitioned: bool,
    ) -> tuple[dict[int, RunSummary], dict[int, Owned]]:
        """Each backfill's own runs by state. A running backfill whose dates are its whole range is counted by
        state (a few calls, whatever its size); the others' runs are read and told apart by date and queue
        time: a finished backfill once (its outcome is then stored), one still running while a page holds its
        range, an unbound one once (its dates are recovered for its adoption)."""
        recorded = recorded_dates(bindings)
        counted = [b for b in wanted if _counted(b, recorded, partitioned=partitioned)]
        runs = self._counts(dag_id, counted, recorded, partitioned=partitioned)
        read = [b for b in wanted if b not in counted]
        owned: dict[int, Owned] = {}
        shared = self._batch(dag_id, read, partitioned=partitioned)
        history = None if shared is None else DagHistory.of(shared, listed)  # ordered once for every backfill
        for backfill in read:
            facts = recorded.get(backfill.id)
            if history is not None:
                found: Owned | RunSummary = history.own(backfill, _dates(facts), owners)
            else:
                found = self._own(backfill, facts, listed, owners, partitioned=partitioned)
            if isinstance(found, Owned):
                owned[backfill.id], runs[backfill.id] = found, found.summary
            else:
                runs[backfill.id] = found
        if self.client.capabilities.backfill_slots and not partitioned:
            for backfill in wanted:
                self._from_slots(backfill, runs, owned)
        return runs, owned

    def _from_slots(self, backfill: Backfill, runs: dict[int, RunSummary], owned: dict[int, Owned]) -> None:
        """Where Airflow lists the backfill's slots (3.4): its runs by state and its skipped slots with Airflow's
        reasons come from them, exact, instead of from dates and queue times. What slots do not tell (start and
        end dates: the mean duration, failures that never started; re-runs since) stays from the runs read.
        A running backfill is read this way while one page holds its slots (counted by state beyond: a few
        calls, where slots would take one call per hundred); a finished one whole, once."""
        slots = self.client.backfill_slots(backfill.id, pages=None if not backfill.active else 1)
        if slots is None:
            return
        counts, skipped = slot_counts(slots)
        before = runs[backfill.id]
        # a date re-run since shows that run's state in its slot: the reconstructed outcome keeps what this
        # backfill's own run did there
        summary = replace(before, skipped=skipped) if before.reruns else replace(before, counts=counts, skipped=skipped)
        runs[backfill.id] = summary
        if backfill.id in owned:
            owned[backfill.id] = replace(owned[backfill.id], summary=summary)

    def _batch(self, dag_id: str, backfills: Sequence[Backfill], *, partitioned: bool) -> list[DagRun] | None:
        """Many backfills' runs (specs adopted after a lost store) as one read of their whole range, when that
        takes fewer pages than one read each (None: read each on its own)."""
        if len(backfills) <= BATCH_FROM:
            return None
        low, high = min(b.from_date for b in backfills), max(b.to_date for b in backfills)
        return self.client.dag_runs_if_within(dag_id, low, high, partitioned=partitioned, pages=len(backfills))

    def _own(
        self,
        backfill: Backfill,
        facts: CreateFacts | None,
        listed: Sequence[Backfill],
        owners: Mapping[int, str],
        *,
        partitioned: bool,
    ) -> Owned | RunSummary:
        """The backfill's own runs; a running one whose range holds more than a page of runs is counted over the
        range of its dates instead (its progress only: its outcome is read run by run once it finished)."""
        dates = _dates(facts)
        low, high = (min(dates), max(dates)) if dates else (backfill.from_date, backfill.to_date)
        client = self.client
        if backfill.active and not partitioned:
            runs = client.runs_or_summary(backfill.dag_id, low, high)
            if isinstance(runs, RunSummary):
                return runs
        else:
            runs = client.dag_runs(backfill.dag_id, low, high, partitioned=partitioned)
        return own_runs(backfill, dates, runs, listed, owners)

    def _counts(
        self,
        dag_id: str,
        backfills: Sequence[Backfill],
        recorded: Mapping[int, CreateFacts | None],
        *,
        partitioned: bool,
    ) -> dict[int, RunSummary]:
        """Each backfill's runs by state. Several backfills on a DAG (specs adopted after a lost store) are
        read as one range when that takes fewer pages than one read each, and told apart in memory."""
        if len(backfills) > BATCH_FROM:
            low, high = min(b.from_date for b in backfills), max(b.to_date for b in backfills)
            runs = self.client.dag_runs_if_within(dag_id, low, high, partitioned=partitioned, pages=len(backfills))
            if runs is not None:
                return {b.id: summarise(runs_within(b, runs, partitioned=partitioned)) for b in backfills}
        return {b.id: self._summary(b, recorded.get(b.id), partitioned=partitioned) for b in backfills}

    def _summary(self, backfill: Backfill, facts: CreateFacts | None, *, partitioned: bool) -> RunSummary:
        """The backfill's runs by state. A partitioned DAG's range can hold runs of earlier backfills beside
        this one's (reprocessing creates new runs), so only the runs this backfill created are counted."""
        if not partitioned:
            expected = None if facts is None else facts.run_count
            return self.client.run_summary(backfill.dag_id, backfill.from_date, backfill.to_date, expected=expected)
        runs = self.client.dag_runs(backfill.dag_id, backfill.from_date, backfill.to_date, partitioned=True)
        return summarise(runs_of(backfill, runs))


def recorded_dates(bindings: Mapping[str, Binding]) -> dict[int, CreateFacts | None]:
    """Backfill id → the dates its spec recorded for it (None: bound, none recorded): a chunk's own dates, or
    a spec's create facts."""
    found: dict[int, CreateFacts | None] = {}
    for binding in bindings.values():
        if binding.progress is not None:
            chunks = binding.progress.chunks
            found |= {c.backfill_id: None if c.dates is None else CreateFacts(dates=c.dates) for c in chunks}
        elif binding.backfill_id is not None:
            created = binding.created
            found[binding.backfill_id] = created if created is not None and created.dates is not None else None
    return found


def _dates(facts: CreateFacts | None) -> list[datetime] | None:
    return None if facts is None else facts.own_dates


def _counted(backfill: Backfill, recorded: Mapping[int, CreateFacts | None], *, partitioned: bool) -> bool:
    """Counted by state over its range (no run read): a running logical-date backfill whose recorded dates are
    its whole range, or bound without recorded dates (a binding older than them)."""
    if partitioned or not backfill.active or backfill.id not in recorded:
        return False
    facts = recorded[backfill.id]
    return facts is None or facts.whole_range
