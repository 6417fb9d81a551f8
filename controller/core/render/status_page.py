"""The read-only status page served beside /metrics (pure: rows and findings in, one HTML string out).

Server-side HTML with inline CSS, no scripts, no external assets; it refreshes itself (meta refresh). Every
text is escaped. It shows what `backfillctl status` shows, never a secret: no URLs, tokens or receivers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from html import escape

from controller.core.model.binding import Phase
from controller.core.render.status import StatusRow, eta_text, phase_counts, phase_line, spec_findings

FINISHED_SHOWN = 50  # finished specs listed, the most recent; the rest are counted (the page must not grow with them)

PHASE_COLOURS = {
    "Succeeded": "#1a7f37",
    "CompletedWithFailures": "#bf8700",
    "Cancelled": "#8250df",
    "Blocked": "#cf222e",
    "Orphaned": "#cf222e",
    "Running": "#0969da",
    "Paused": "#57606a",
    "Queued": "#57606a",
    "Pending": "#57606a",
    "AwaitingRehearsal": "#57606a",
    "VerificationFailed": "#cf222e",
}
STYLE = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:24px;color:#1f2328;background:#fff}
h1{font-size:20px;margin:0 0 4px} .meta{color:#57606a;margin-bottom:16px}
table{border-collapse:collapse;width:100%} th,td{text-align:left;padding:6px 8px;border-bottom:1px solid #d0d7de;
vertical-align:top} th{background:#f6f8fa;font-weight:600} td.num{text-align:right;font-variant-numeric:tabular-nums}
.phase{display:inline-block;padding:1px 8px;border-radius:10px;color:#fff;font-size:12px;font-weight:600}
.bar{width:160px;height:12px;background:#eaeef2;border-radius:6px;overflow:hidden;display:inline-block;
vertical-align:middle} .bar>span{display:block;height:100%;background:#1a7f37}
.bar>span.failed{background:#cf222e;float:left} .bar>span.ok{float:left}
td.nowrap{white-space:nowrap} .findings li{margin:2px 0}
.kind{font-family:ui-monospace,monospace;color:#57606a} .note{color:#57606a}
"""


def status_page(
    rows: Sequence[StatusRow],
    findings: Sequence[tuple[str, str]],
    now: datetime,
    *,
    refresh_seconds: int = 15,
    health: str = "ok",
    finished_at: Mapping[str, str] | None = None,
    finished_shown: int = FINISHED_SHOWN,
) -> str:
    """The whole page; `now` and the health line are given (no clock here). `health` is the reconciler's (the
    process, as /healthz); the specs' own health leads the page: counts per phase, and each blocked or refused
    spec a finding. Every live spec is listed; of the finished ones only the `finished_shown` that finished last
    (`finished_at`: spec → when the store last recorded it), the others counted in one line."""
    shown, hidden = _listed(rows, finished_at or {}, finished_shown)
    body = "\n".join(_row(r) for r in shown) + _hidden_line(hidden, finished_shown)
    found = "\n".join(
        f'<li><span class="kind">{escape(kind)}</span> {escape(message)}</li>'
        for kind, message in [*spec_findings(rows), *findings]
    )
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="refresh" content="{int(refresh_seconds)}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>backfillctl status</title><style>{STYLE}</style></head>
<body>
<h1>backfillctl status</h1>
<div class="meta">updated {escape(now.strftime("%Y-%m-%d %H:%M:%S UTC"))} · refreshes every {int(refresh_seconds)}s ·
reconciler: <span id="health">{escape(health)}</span></div>
<p class="summary" id="summary">{escape(phase_line(rows))}</p>
<table id="specs"><thead><tr><th>spec</th><th>DAG</th><th>phase</th><th>backfill</th><th>progress</th>
<th>runs ok / failed / running / queued of total</th><th>ETA</th><th>note</th></tr></thead>
<tbody>
{body or '<tr><td colspan="8">No specs.</td></tr>'}
</tbody></table>
<h2>Findings</h2>
<ul class="findings" id="findings">{found or "<li>none</li>"}</ul>
</body></html>
"""


def _listed(
    rows: Sequence[StatusRow], finished_at: Mapping[str, str], keep: int
) -> tuple[list[StatusRow], list[StatusRow]]:
    """(rows shown, in their order; finished rows left out): every live row, and the `keep` latest finished."""
    finished = [r for r in rows if Phase(r.phase).terminal]
    latest = sorted(finished, key=lambda r: (finished_at.get(r.spec, ""), r.spec), reverse=True)[:keep]
    kept = {r.spec for r in latest}
    return [r for r in rows if r.spec in kept or not Phase(r.phase).terminal], [
        r for r in finished if r.spec not in kept
    ]


def _hidden_line(hidden: Sequence[StatusRow], keep: int) -> str:
    if not hidden:
        return ""
    counts = ", ".join(f"{n:,} {phase}" for phase, n in phase_counts(hidden).items())
    more = f"{len(hidden):,} more finished spec{'' if len(hidden) == 1 else 's'} ({counts})"
    return (
        f'\n<tr class="more" id="more-finished"><td colspan="8" class="note">{escape(more)} not listed: the page shows '
        f"every live spec and the {keep} that finished last; <code>backfillctl status</code> lists them all.</td></tr>"
    )


def _backfill(r: StatusRow) -> str:
    """The backfill id, a link to it in Airflow's UI where there is one (a plain link: the CSP allows no script)."""
    shown = escape(str(r.backfill_id or "-"))
    if r.link is None:
        return shown
    return f'<a href="{escape(r.link)}" rel="noopener noreferrer" title="in Airflow">{shown}</a>'


def _row(r: StatusRow) -> str:
    colour = PHASE_COLOURS.get(r.phase, "#57606a")
    ok = 100.0 * r.success / r.total if r.total else 0.0
    bad = 100.0 * r.failed / r.total if r.total else 0.0
    return (
        f'<tr class="spec" data-spec="{escape(r.spec)}" data-phase="{escape(r.phase)}">'
        f'<td class="nowrap">{escape(r.spec)}</td><td class="nowrap">{escape(r.dag_id)}</td>'
        f'<td><span class="phase" style="background:{colour}">{escape(r.phase)}</span></td>'
        f'<td class="num">{_backfill(r)}</td>'
        f'<td class="nowrap"><span class="bar" role="progressbar" aria-valuemin="0" aria-valuemax="100" '
        f'aria-valuenow="{r.progress:.0f}" title="{r.progress:.0f}% finished">'
        f'<span class="ok" style="width:{ok:.1f}%"></span><span class="failed" style="width:{bad:.1f}%"></span>'
        f"</span> {r.progress:.0f}%</td>"
        f'<td class="num">{r.success} / {r.failed} / {r.running} / {r.queued} of {r.total}</td>'
        f'<td>{escape(eta_text(r.eta_seconds))}</td><td class="note">{escape(r.note)}</td></tr>'
    )
