"""`backfillctl report NAME --format html` and the heat map of the markdown report.

With BACKFILLCTL_AIRFLOW_URL set, every run of the spec's range is read from Airflow (read only) so each
interval or partition gets its cell; without it, only what the store recorded is shown, and the map says so.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from controller.commands import audit as audit_cmd
from controller.commands.session import make_client
from controller.commands.settings import Settings
from controller.commands.status import report_document
from controller.core.audit.chain import AuditRecord
from controller.core.documents.escaping import md_fence, md_text
from controller.core.model.airflow import Rerun
from controller.core.model.ranges import expand, ranges_from_json
from controller.core.model.spec import parse_date
from controller.core.plan.ownership import own_runs
from controller.core.render import heatmap
from controller.core.render.report_html import report_html
from controller.core.render.status import report_markdown
from controller.errors import AirflowError, AirflowNotFound

log = logging.getLogger(__name__)


def heat_map(settings: Settings, document: Mapping[str, Any]) -> heatmap.HeatMap:
    if settings.airflow_url is None:
        return heatmap.from_stored(document)
    with make_client(settings) as client:
        try:
            info = client.dag(document["dag_id"], with_tasks=False)
        except AirflowNotFound:
            info = None
        partitioned = info is not None and info.partitioned
        try:
            runs = client.runs_with_types(
                document["dag_id"],
                parse_date(document["from_date"]),
                parse_date(document["to_date"]),
                partitioned=partitioned,
            )
        except AirflowError as exc:
            log.warning("the heat map shows what the store knows: %s", exc.message)
            return heatmap.from_stored(document)
    return heatmap.from_runs(runs)


def html_report(settings: Settings, name: str, now: datetime) -> str:
    document, events = report_document(settings, name, now)
    return report_html(document, heat_map(settings, document), events)


def markdown_report(settings: Settings, name: str, now: datetime) -> str:
    """The markdown change record with a compact text calendar before the audit trail, and the dates re-run
    since its outcome was recorded (with Airflow configured)."""
    document, events = report_document(settings, name, now)
    text = with_calendar(report_markdown(document, events), heat_map(settings, document), events)
    return with_reruns(text, reruns_since(settings, document))


def reruns_since(settings: Settings, document: Mapping[str, Any]) -> list[Rerun]:
    """The spec's own dates queued again after its backfill's creation window (a later spec's reprocess, a
    clear by hand), with who did it and their state now; its own outcome stays what its runs did."""
    dates = expand(ranges_from_json(document.get("own_dates")) or ())
    if settings.airflow_url is None or document.get("backfill_id") is None or not dates:
        return []
    owners = {i: n for n, b in audit_cmd.stored_bindings(settings).items() for i in (*b.backfills, b.backfill_id) if i}
    with make_client(settings) as client:
        try:
            listed = client.list_backfills(document["dag_id"])
            runs = client.dag_runs(document["dag_id"], min(dates), max(dates), partitioned=bool(document["partitions"]))
        except AirflowError as exc:
            log.warning("the re-runs since are not shown: %s", exc.message)
            return []
    mine = next((b for b in listed if b.id == document["backfill_id"]), None)
    return [] if mine is None else list(own_runs(mine, dates, runs, listed, owners).summary.reruns)


def with_reruns(markdown: str, reruns: Sequence[Rerun]) -> str:
    if not reruns:
        return markdown
    lines = "\n".join(f"- {md_text(r.text())}" for r in reruns)
    section = f"\n## Re-run since\n\nIts own outcome stays what its runs did.\n\n{lines}\n\n## Calendar\n"
    return markdown.replace("\n## Calendar\n", section, 1)


def with_calendar(markdown: str, themap: heatmap.HeatMap, _events: list[AuditRecord]) -> str:
    block = "\n".join(md_fence(heatmap.heatmap_text(themap).splitlines()))
    section = f"\n## Calendar\n\n{block}\n\n## Audit trail\n"
    return markdown.replace("\n## Audit trail\n", section, 1)
