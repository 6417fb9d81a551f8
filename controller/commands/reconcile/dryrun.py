"""Dry runs: what a create would make, asked of Airflow before it is made (a spec's, or a chunked spec's next
chunk's), with the one read of the range that counts the runs the reprocess rule keeps and lists those in flight.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from controller.adapters.airflow import AirflowClient
from controller.adapters.airflow.runs import RangeRead
from controller.commands.runtime.concurrency import alongside
from controller.core.model.airflow import BackfillRequest, PlannedRun
from controller.core.model.chunks import Progress
from controller.core.model.policy import Policy
from controller.core.model.spec import BackfillSpec, ReprocessBehavior
from controller.core.plan.world import DagObservation, DryRun, run_label
from controller.core.rules.chunks import next_size, remaining, take
from controller.core.rules.code_history import code_in_range
from controller.core.rules.run_density import runs_a_day_at_most
from controller.core.rules.schedules import partition_range
from controller.core.rules.selection import Selection, in_flight, select
from controller.errors import AirflowError

# the finished runs a reprocess rule leaves alone (in flight ones are skipped by every rule)
KEPT = {ReprocessBehavior.NONE: ("success", "failed"), ReprocessBehavior.FAILED: ("success",)}


def is_partitioned(observation: DagObservation | None) -> bool:
    return observation is not None and observation.info is not None and observation.info.partitioned


def runs_a_day(observation: DagObservation | None) -> float | None:
    """The DAG's most runs a day by its timetable (None: not known): the size of a dry run's first part."""
    info = None if observation is None else observation.info
    return None if info is None or info.schedule is None else runs_a_day_at_most(info.schedule.summary)


class DryRunner:
    def __init__(self, client: AirflowClient) -> None:
        self.client = client

    def dry_run(self, spec: BackfillSpec, observations: Mapping[str, DagObservation]) -> DryRun:
        """Runs the create would make; runs in range; and the queued or running runs Airflow will skip.

        Beside the dry run, one read of the range (three past a page of runs) counts the finished runs the
        reprocess rule keeps, so runs in range need no second dry run, and lists the runs in flight. A
        partitioned DAG's partitions can hold several runs each: a dry run with `completed` counts them."""
        observed = observations.get(spec.dag_id)
        partitioned = is_partitioned(observed)
        completed = spec.reprocess_behavior is ReprocessBehavior.COMPLETED
        kept = () if completed or partitioned else KEPT[spec.reprocess_behavior]
        try:
            (planned, in_range), read = alongside(  # independent calls: the range is read during the dry run
                lambda: self._planned(spec, everything=partitioned and not completed, rate=runs_a_day(observed)),
                lambda: self._range(spec, kept, partitioned=partitioned),
            )
        except AirflowError as exc:
            return DryRun(error=exc.detail or exc.message)
        if read is None:
            return DryRun(tuple(p.date for p in planned), in_range, partitions=partition_range(planned), in_flight=None)
        intervals = in_range + read.counted
        return DryRun(
            tuple(p.date for p in planned),
            intervals,
            partitions=partition_range(planned),
            in_flight=tuple(sorted((run_label(r), r.state) for r in read.flying)),
            in_flight_more=read.in_flight - len(read.flying),
            code=code_in_range(read.runs, intervals) if read.runs and not partitioned else None,  # none: nothing ran
            selection=self._selection(spec, planned, read),
        )

    @staticmethod
    def _selection(spec: BackfillSpec, planned: list[PlannedRun], read: RangeRead) -> Selection | None:
        """A `select` spec's selection from the dry run's intervals (with `completed`: every one in range) and
        every run in range (None: no select, or the runs were not read whole)."""
        if spec.select is None or read.runs is None:
            return None
        return select((*(p.date for p in planned), *in_flight(read.runs)), read.runs, spec.select)

    def _planned(self, spec: BackfillSpec, *, everything: bool, rate: float | None) -> tuple[list[PlannedRun], int]:
        """The dry run's runs (a partitioned DAG's too: by partition date), and the runs in range it counts:
        with `everything`, those of a second dry run with `completed` (a partition can hold several runs)."""
        planned = self.client.planned_runs_in_parts(BackfillRequest.from_spec(spec), runs_a_day=rate)
        if not everything:
            return planned, len(planned)
        every = self.client.planned_runs_in_parts(
            BackfillRequest.from_spec(spec, reprocess="completed"), runs_a_day=rate
        )
        return planned, len(every)

    def next_chunk(
        self, spec: BackfillSpec, progress: Progress, policy: Policy, observation: DagObservation | None = None
    ) -> DryRun:
        """The next chunk's runs: a dry run of what is left of the range, from its start (its end when the
        spec runs backwards), stopped once the chunk is full (a chunk's dry run never spans the whole range)."""
        left = remaining(spec, progress)
        if left is None:
            return DryRun()
        size = next_size(spec, policy, progress)
        request = replace(BackfillRequest.from_spec(spec), from_date=left[0], to_date=left[1])
        try:
            planned = self.client.planned_runs_in_parts(
                request, limit=size, backwards=spec.run_backwards, runs_a_day=runs_a_day(observation)
            )
        except AirflowError as exc:
            return DryRun(error=exc.detail or exc.message)
        dates = take([p.date for p in planned], size, backwards=spec.run_backwards)
        return DryRun(tuple(dates))

    def _range(self, spec: BackfillSpec, kept: tuple[str, ...], *, partitioned: bool) -> RangeRead | None:
        """The range read; None when it fails and only the in-flight line needed it (the plan says it is not
        known); a failure that leaves runs in range uncounted is the dry run's error."""
        try:
            return self.client.range_read(spec.dag_id, spec.from_date, spec.to_date, kept=kept, partitioned=partitioned)
        except AirflowError:
            if kept:
                raise
            return None
