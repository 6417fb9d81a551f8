"""`backfillctl report NAME --format html` and the heat map of the markdown report (issue 15).

With BACKFILLCTL_AIRFLOW_URL set, every run of the spec's range is read from Airflow (read only) so each
interval or partition gets its cell; without it, only what the store recorded is shown, and the map says so.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from controller.commands.reconcile import make_client
from controller.commands.settings import Settings
from controller.commands.status import report_document
from controller.core import heatmap
from controller.core.audit import AuditRecord
from controller.core.escaping import md_fence
from controller.core.report_html import report_html
from controller.core.spec import parse_date
from controller.core.status import report_markdown
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
    """The markdown change record with a compact text calendar before the audit trail."""
    document, events = report_document(settings, name, now)
    return with_calendar(report_markdown(document, events), heat_map(settings, document), events)


def with_calendar(markdown: str, themap: heatmap.HeatMap, _events: list[AuditRecord]) -> str:
    block = "\n".join(md_fence(heatmap.heatmap_text(themap).splitlines()))
    section = f"\n## Calendar\n\n{block}\n\n## Audit trail\n"
    return markdown.replace("\n## Audit trail\n", section, 1)
