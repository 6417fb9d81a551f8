"""`backfillctl report NAME [--format markdown|json|html]`: the change record of one spec, built once and rendered.

The record is what the store and the audit log hold. With BACKFILLCTL_AIRFLOW_URL set, every run of the spec's
range is read from Airflow (read only): each interval or partition gets its cell in the calendar, the record says
which DAG versions the spec's runs ran on, and the markdown lists the dates re-run since its outcome was recorded.
Without it, only what the store recorded is shown, and the calendar says so.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from controller.commands import audit as audit_cmd
from controller.commands.session import make_client
from controller.commands.settings import Settings
from controller.commands.status import report_document
from controller.core.model.airflow import DagRun, Rerun
from controller.core.model.ranges import expand
from controller.core.plan.ownership import own_runs
from controller.core.render import heatmap
from controller.core.render.change_record import ChangeRecord, ran_on
from controller.core.render.report_html import report_html
from controller.core.render.report_markdown import report_markdown
from controller.errors import AirflowError, AirflowNotFound

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Observed:
    """What Airflow shows of the spec's range now (None without Airflow, or when it could not be read)."""

    runs: list[tuple[DagRun, str]] | None  # every run of the range, with its run type


def json_report(settings: Settings, name: str, now: datetime) -> str:
    record, _observed = observed_record(settings, name, now)
    return json.dumps(record.as_json(), indent=2) + "\n"


def html_report(settings: Settings, name: str, now: datetime) -> str:
    record, observed = observed_record(settings, name, now)
    return report_html(record, heat_map(record, observed))


def markdown_report(settings: Settings, name: str, now: datetime) -> str:
    """The markdown change record with a compact text calendar before the audit trail, and the dates re-run
    since its outcome was recorded (with Airflow configured)."""
    record, observed = observed_record(settings, name, now)
    return report_markdown(record, heat_map(record, observed), reruns_since(settings, record))


def observed_record(settings: Settings, name: str, now: datetime) -> tuple[ChangeRecord, Observed]:
    """The stored record, with the code its runs ran on when Airflow could be read."""
    record = report_document(settings, name, now)
    observed = Observed(None if settings.airflow_url is None else _read_runs(settings, record))
    if observed.runs is None:
        return record, observed
    return replace(record, ran_on=ran_on(record.events, _own(record, observed.runs))), observed


def _read_runs(settings: Settings, record: ChangeRecord) -> list[tuple[DagRun, str]] | None:
    spec = record.spec
    with make_client(settings) as client:
        try:
            info = client.dag(spec.dag_id, with_tasks=False)
        except AirflowNotFound:
            info = None
        partitioned = info is not None and info.partitioned
        try:
            return client.runs_with_types(spec.dag_id, spec.from_date, spec.to_date, partitioned=partitioned)
        except AirflowError as exc:
            log.warning("the change record shows what the store knows: %s", exc.message)
            return None


def _own(record: ChangeRecord, runs: Sequence[tuple[DagRun, str]]) -> list[DagRun]:
    """The spec's backfill runs: at its own dates when the store knows them, else every backfill run of the range."""
    own = None if record.own_dates is None else set(expand(record.own_dates))
    backfill = [run for run, run_type in runs if run_type == "backfill"]
    return [r for r in backfill if own is None or (r.logical_date or r.partition_date) in own]


def heat_map(record: ChangeRecord, observed: Observed) -> heatmap.HeatMap:
    return heatmap.from_stored(record.intervals) if observed.runs is None else heatmap.from_runs(observed.runs)


def reruns_since(settings: Settings, record: ChangeRecord) -> list[Rerun]:
    """The spec's own dates queued again after its backfill's creation window (a later spec's reprocess, a
    clear by hand), with who did it and their state now; its own outcome stays what its runs did."""
    dates = expand(record.own_dates or ())
    if settings.airflow_url is None or record.backfill_id is None or not dates:
        return []
    owners = {i: n for n, b in audit_cmd.stored_bindings(settings).items() for i in (*b.backfills, b.backfill_id) if i}
    dag_id = record.spec.dag_id
    with make_client(settings) as client:
        try:
            listed = client.list_backfills(dag_id)
            runs = client.dag_runs(dag_id, min(dates), max(dates), partitioned=record.partitions is not None)
        except AirflowError as exc:
            log.warning("the re-runs since are not shown: %s", exc.message)
            return []
    mine = next((b for b in listed if b.id == record.backfill_id), None)
    return [] if mine is None else list(own_runs(mine, dates, runs, listed, owners).summary.reruns)
