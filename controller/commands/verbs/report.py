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

from controller.commands.reconcile.coverage import RangeView, again, read_range
from controller.commands.runtime.environments import production_settings
from controller.commands.runtime.session import make_client
from controller.commands.runtime.settings import Settings
from controller.commands.verbs import audit as audit_cmd
from controller.commands.verbs.status import report_document
from controller.core.model.airflow import DagRun, Rerun
from controller.core.model.capabilities import Capabilities
from controller.core.model.coverage import Missed
from controller.core.model.ranges import expand
from controller.core.plan.ownership import own_runs
from controller.core.render import heatmap
from controller.core.render.change_record import ChangeRecord, ran_on, so_far
from controller.core.render.coverage_text import check_json, check_text
from controller.core.render.links import backfill_link, ui_base
from controller.core.render.report_html import report_html
from controller.core.render.report_markdown import report_markdown
from controller.errors import AirflowError, ConfigError, ControllerError

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
    """The stored record, with the code its runs ran on and its version coverage when Airflow could be read."""
    record = report_document(settings, name, now)
    settings = production_settings(settings)  # production's Airflow as the policy names it
    view, server = (None, None) if settings.airflow_url is None else _read_runs(settings, record)
    link = backfill_link(ui_base(settings.airflow_url), server, record.spec.dag_id, record.backfill_id)
    record, observed = replace(record, link=link), Observed(None if view is None else view.runs)
    if view is None:
        return record, observed
    own = _own(record, view.runs)
    return again(replace(so_far(record, own), ran_on=ran_on(record.events, own)), view), observed


def _read_runs(settings: Settings, record: ChangeRecord) -> tuple[RangeView | None, Capabilities]:
    """The DAG and every run of the spec's range with its type (None: not read), and the server's capabilities."""
    with make_client(settings) as client:
        try:
            return read_range(client, record.spec), client.capabilities
        except AirflowError as exc:
            log.warning("the change record shows what the store knows: %s", exc.message)
            return None, client.capabilities


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
    settings = production_settings(settings)
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


def coverage_check(settings: Settings, record: ChangeRecord) -> tuple[str, str, bool]:
    """`report NAME --check`: (text, JSON, holds), from Airflow read now; refused before any read when the spec
    has not ended or no Airflow is configured."""
    name = record.spec.name
    if not record.outcome.terminal:
        raise ControllerError(
            f"{name} is {record.outcome.value}: version coverage is measured when a spec ends",
            hint=f"`backfillctl status {name}` shows where it is; check again once it ended",
        )
    settings = production_settings(settings)
    if settings.airflow_url is None:
        raise ConfigError(
            "report --check re-reads Airflow, and BACKFILLCTL_AIRFLOW_URL is not set",
            hint="set BACKFILLCTL_AIRFLOW_URL and its credentials (read-only access is enough)",
        )
    with make_client(settings) as client:
        view = read_range(client, record.spec)
    checked = again(record, view)
    found = checked.coverage
    if checked is record or found is None:  # nothing to judge against
        raise ControllerError(
            f"{name}: Airflow names no latest version of DAG {record.spec.dag_id} and none was recorded when it "
            "ended, so version coverage cannot be judged",
            hint=f"`backfillctl report {name}` shows which versions its runs ran on",
        )
    changed: tuple[Missed, ...] = checked.coverage_changed
    document = json.dumps(check_json(name, found, changed), indent=2) + "\n"
    return check_text(name, found, changed), document, found.holds
