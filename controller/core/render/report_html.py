"""`backfillctl report NAME --format html`: a self-contained change record (pure: data in, one HTML string out).

Inline CSS, no scripts, no external assets, every text escaped, and a Content-Security-Policy that lets the page
load nothing but its own inline style (a text that escaped its escaping still runs no script and loads nothing).
The calendar heat map shows one cell per interval or partition; the legend and the counts beside it say what
each colour means.
"""

from __future__ import annotations

from collections.abc import Sequence
from html import escape

from controller.core.audit.chain import AuditRecord
from controller.core.model.spec import format_utc
from controller.core.render.change_record import ChangeRecord, ChunkRow, approved_change_text
from controller.core.render.coverage_text import coverage_facts
from controller.core.render.heatmap import LABELS, STATES, HeatMap, calendar

COLOURS = {
    "succeeded": "#2da44e",
    "failed": "#cf222e",
    "skipped": "#8c959f",
    "never_started": "#d4a72c",
    "in_progress": "#0969da",
}
# what the page needs (its <style>), nothing else; base-uri and form-action do not fall back to default-src
CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
STYLE = (
    "body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#1f2328;background:#fff;"
    "max-width:1100px}h1{font-size:22px}h2{font-size:17px;margin-top:28px}"
    "dl{display:grid;grid-template-columns:max-content auto;gap:4px 16px}dt{font-weight:600}dd{margin:0}"
    "table.heat{border-collapse:separate;border-spacing:3px}table.heat th{font-weight:400;color:#57606a;"
    "font-size:11px;line-height:14px;text-align:right;padding:0 6px 0 0;white-space:nowrap}"
    "table.heat thead th{text-align:center;padding:0;font-size:9px}"
    "td.slot{width:14px;height:14px;padding:0;line-height:0;font-size:0}td.empty{background:#f6f8fa}"
    + "".join(f"td.{s},span.{s}{{background:{c}}}" for s, c in COLOURS.items())
    + "span.swatch{display:inline-block;width:14px;height:14px;vertical-align:middle;"
    "margin:0 4px 0 12px}.note{color:#57606a}table.audit{border-collapse:collapse;font-size:12px;width:100%}"
    "table.audit td,table.audit th{border-bottom:1px solid #d0d7de;padding:3px 6px;text-align:left;"
    "vertical-align:top}code{font-family:ui-monospace,monospace}"
)


def report_html(record: ChangeRecord, heatmap: HeatMap) -> str:
    s, i = record.spec, record.intervals
    facts = [
        ("Outcome", record.outcome.value + (f" (backfill #{record.backfill_id})" if record.backfill_id else "")),
        ("Ticket", s.ticket),
        ("Reason", s.reason),
        ("Requested by", s.requested_by),
        ("Approved by", record.approved_by),
        *(("Approved change", approved_change_text(a)) for a in record.approved_changes),
        ("DAG", s.dag_id),
        ("Range", f"{format_utc(s.from_date)} → {format_utc(s.to_date)}"),
        ("Run", f"reprocess {s.reprocess_behavior.value}, max_active_runs {s.max_active_runs}, {record.direction}"),
        ("Spec", f"{s.path} ({s.digest}) at commit {record.git_commit or 'unknown'}"),
        ("Created / completed", f"{record.created_at or '-'} / {record.completed_at or '-'}"),
        (
            "Intervals so far" if i.unfinished is not None else "Intervals",
            f"{i.complete} complete, {i.failed} failed, "
            + (f"{i.unfinished} queued or running, " if i.unfinished is not None else "")
            + f"{_q(i.skipped)} skipped of {_q(i.in_range)} in range"
            + (f", {i.never_started} never started" if i.never_started else ""),
        ),
    ]
    if s.retry_of:
        facts.append(("Retries the failed runs of", s.retry_of))
    if record.retried_by:
        facts.append(("Failed runs retried by", ", ".join(f"{r.spec} ({r.path})" for r in record.retried_by)))
    if record.ran_on is not None:
        facts.append(("Code", record.ran_on.text()))
    facts += coverage_facts(record)
    if record.edited:
        facts.append(("Edited in place", record.edited))
    if record.file_gone:
        facts.append(("Spec file", record.file_gone))
    if record.acknowledged:
        facts.append(("Acknowledged", record.acknowledged))
    facts += [(f"Stop #{h.stop.id}", h.text()) for h in record.stops]
    rows = "".join(f"<dt>{escape(k)}</dt><dd>{escape(str(v))}</dd>" for k, v in facts)
    if record.link:
        link = escape(record.link)
        rows += f'<dt>In Airflow</dt><dd><a href="{link}" rel="noopener noreferrer">{link}</a></dd>'
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{CSP}">'
        f"<title>Change record: {escape(s.name)}</title><style>{STYLE}</style></head><body>\n"
        f"<h1>Change record: {escape(s.name)}</h1>\n<dl>{rows}</dl>\n"
        f"<h2>Calendar of the range</h2>\n{heatmap_html(heatmap)}\n{chunks_html(record.chunks)}"
        f"<h2>Audit trail ({len(record.events)} records)</h2>\n{_audit(record.events)}\n</body></html>\n"
    )


def chunks_html(chunks: Sequence[ChunkRow] | None) -> str:
    """A chunked spec's Airflow backfills, one row each, in the order they ran (nothing for one backfill)."""
    if not chunks:
        return ""
    columns = ("backfill", "from", "to", "runs", "max_active_runs", "succeeded", "failed", "state")
    head = "<tr>" + "".join(f"<th>{c}</th>" for c in columns) + "</tr>"
    rows = "".join(
        f"<tr><td>#{c.backfill_id}</td><td>{escape(format_utc(c.first))}</td><td>{escape(format_utc(c.last))}</td>"
        f"<td>{c.runs}</td><td>{c.max_active_runs}</td><td>{_q(c.succeeded)}</td>"
        f"<td>{_q(c.failed)}</td><td>{'finished' if c.finished else 'active'}</td></tr>"
        for c in chunks
    )
    return (
        f"<h2>Chunks ({len(chunks)} Airflow backfills, one after another)</h2>\n"
        f'<table class="audit" id="chunks">{head}{rows}</table>\n'
    )


def _q(value: int | None) -> str:
    return "?" if value is None else str(value)


def heatmap_html(heatmap: HeatMap) -> str:
    unit, rows = calendar(heatmap)
    head = "".join(f"<th>{n + 1 if unit == 'day' else n}</th>" for n in range(31 if unit == "day" else 24))
    body = "".join(
        f"<tr><th>{escape(row.label)}</th>"
        + "".join(
            '<td class="slot empty"></td>'
            if cell is None
            else f'<td class="slot cell {cell.state}" data-state="{cell.state}" '
            f'title="{escape(cell.label)}: {escape(LABELS[cell.state])}"></td>'
            for cell in row.slots
        )
        + "</tr>"
        for row in rows
    )
    legend = "".join(f'<span class="swatch {s}"></span>{escape(LABELS[s])} ({heatmap.count(s)})' for s in STATES)
    unplaced = (
        '<p class="note" id="unplaced">Not placed on the calendar: '
        + escape(", ".join(f"{n} {LABELS[s]}" for s, n in heatmap.unplaced.items()))
        + "</p>"
        if heatmap.unplaced
        else ""
    )
    note = f'<p class="note" id="heatmap-note">{escape(heatmap.note)}</p>' if heatmap.note else ""
    table = (
        f'<table class="heat" id="heatmap" data-cells="{len(heatmap.cells)}" data-unit="{unit}">'
        f"<thead><tr><th></th>{head}</tr></thead><tbody>{body}</tbody></table>"
        if rows
        else '<p class="note">No interval to show.</p>'
    )
    return f'<p class="legend">{legend}</p>{table}{unplaced}{note}'


def _audit(events: Sequence[AuditRecord]) -> str:
    head = (
        "<tr><th>seq</th><th>time</th><th>actor</th><th>action</th><th>phase</th><th>outcome</th><th>message</th></tr>"
    )
    rows = "".join(
        f"<tr><td>{e.seq}</td><td>{escape(e.time)}</td><td>{escape(e.entry.actor)}</td>"
        f"<td>{escape(e.entry.action)}</td><td>{escape(e.entry.phase)}</td><td>{escape(e.entry.outcome or '')}</td>"
        f"<td>{escape(e.entry.message or '')}</td></tr>"
        for e in events
    )
    return f'<table class="audit">{head}{rows}</table>'
