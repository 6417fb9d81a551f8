"""`backfillctl report NAME`: the change record as markdown (pure). Every value from the spec, the store or
Airflow is escaped, one line each."""

from __future__ import annotations

from collections.abc import Sequence

from controller.core.documents.escaping import md_code, md_fence, md_text
from controller.core.model.airflow import Rerun
from controller.core.model.spec import format_utc
from controller.core.model.stages import Stage
from controller.core.render.audit import record_line
from controller.core.render.change_record import ChangeRecord, ChunkRow, RanOn, approved_change_text
from controller.core.render.coverage_text import coverage_facts
from controller.core.render.heatmap import HeatMap, heatmap_text


def rerun_text(rerun: Rerun) -> str:
    """A re-run as the change record says it, its own run's outcome too when known."""
    own = f" (its own run: {rerun.own})" if rerun.own else " (what its own run did is not known)"
    return rerun.text() + own


def _or_unknown(value: int | None) -> str:
    return "?" if value is None else str(value)


def report_markdown(record: ChangeRecord, calendar: HeatMap | None = None, reruns_since: Sequence[Rerun] = ()) -> str:
    """The change record; with a calendar (the report command's), the dates re-run since and the text heat map
    come before the audit trail."""
    s, i = record.spec, record.intervals
    failed = md_text(", ".join(i.failed_partitions or [d.isoformat()[:10] for d in i.failed_dates]) or "none")
    parts = record.partitions
    partitions = f", partitions {md_text(parts.first)} … {md_text(parts.last)}" if parts else ""
    lines = [
        f"# Change record: {md_text(s.name)}",
        "",
        f"- **Outcome**: {md_text(record.outcome.value)}"
        + (f" (backfill #{record.backfill_id})" if record.backfill_id else ""),
        f"- **Ticket**: {md_text(s.ticket)}",
        f"- **Reason**: {md_text(s.reason)}",
        f"- **Requested by**: {md_text(s.requested_by)}; **approved by**: {md_text(record.approved_by)}",
        *[f"- **Approved change**: {md_text(approved_change_text(a))}" for a in record.approved_changes],
        f"- **Spec**: {md_code(s.path)} digest {md_code(s.digest)} at commit {md_code(record.git_commit or 'unknown')}",
        f"- **DAG**: {md_code(s.dag_id)}, {format_utc(s.from_date)} → {format_utc(s.to_date)}, reprocess "
        f"`{s.reprocess_behavior.value}`, max_active_runs {s.max_active_runs}, {record.direction}" + partitions,
        f"- **Created**: {record.created_at or '-'}; **completed**: {record.completed_at or '-'}",
        *([f"- **Edited in place**: {md_text(record.edited)}"] if record.edited else []),
        *([f"- **Spec file**: {md_text(record.file_gone)}"] if record.file_gone else []),
        *([f"- **Acknowledged**: {md_text(record.acknowledged)}"] if record.acknowledged else []),
        *([f"- **In Airflow**: <{record.link}>"] if record.link else []),
        f"- **Intervals{' so far' if i.unfinished is not None else ''}**: {i.complete} complete, {i.failed} failed "
        f"({failed}), "
        + (f"{i.unfinished} queued or running, " if i.unfinished is not None else "")
        + f"{_or_unknown(i.skipped)} skipped of {_or_unknown(i.in_range)} in range"
        + (f", {i.never_started} never started (cancelled)" if i.never_started else ""),
        *[f"- **Re-run before its outcome was read**: {md_text(rerun_text(r))}" for r in i.reruns],
        *[f"- **Skipped by Airflow**: {md_text(k.slot)} ({md_text(k.reason)})" for k in i.skipped_slots],
        *_chunk_lines(record.chunks),
        *_retry_lines(record),
        *_code_lines(record.ran_on),
        *[f"- **{label}**: {md_text(text)}" for label, text in coverage_facts(record)],
        "",
        *_stage_lines(record),
        *_stop_lines(record),
        *_since_lines(reruns_since if calendar is not None else ()),
        *_calendar_lines(calendar),
        "## Audit trail",
        "",
        *md_fence([record_line(e) for e in record.events]),
    ]
    return "\n".join(lines) + "\n"


def _stop_lines(record: ChangeRecord) -> list[str]:
    """Who stopped it, why, and who lifted each stop and why (none: no section)."""
    if not record.stops:
        return []
    return ["## Stops", "", *[f"- {md_text(h.text())}" for h in record.stops], ""]


def _stage_lines(record: ChangeRecord) -> list[str]:
    """The rehearsal (before production), the verifications and the publish run, and what it writes and how
    to roll it back."""
    s = record.spec
    if not (record.stages or s.rehearsal or s.verify or s.publish):
        return []
    lines = ["## Stages", ""]
    if s.writes:
        lines.append("- **Writes**: " + ", ".join(md_code(t) for t in s.writes))
    if s.rollback:
        lines.append(f"- **Rollback**: {md_text(s.rollback)}")
    for r in record.stages:
        ids = ", ".join(f"#{i}" for i in r.backfill_ids)
        where = f"{r.stage.value} in {md_text(r.environment)}"
        cuts = s.rehearsal.slices if s.rehearsal is not None and r.stage is Stage.REHEARSAL else ()
        dates = ", ".join(f"{c.from_date.date()}..{c.to_date.date()}" for c in cuts)
        facts = [
            dates and f"slices {dates}",
            f"backfills {ids}" if ids else "",
            r.run_id and f"run {md_code(r.run_id)}",
        ]
        runs = ", ".join(f"{n} {state}" for state, n in sorted((r.runs or {}).items()))
        metrics = ", ".join(f"{md_text(k)}={md_text(str(v))}" for k, v in sorted((r.metrics or {}).items()))
        said = "; ".join(f for f in (*facts, runs and f"runs {runs}", metrics and f"metrics {metrics}") if f)
        lines.append(
            f"- **{where}** ({format_utc(r.started_at.replace(microsecond=0))}): {r.state.value}"
            + (f"; {said}" if said else "")
        )
        if r.reason:
            lines.append(f"  - {md_text(r.reason)}")
    if not record.stages:
        lines.append("- none run yet")
    return [*lines, ""]


def _chunk_lines(chunks: Sequence[ChunkRow] | None) -> list[str]:
    if not chunks:
        return []
    lines = [f"- **Chunks**: {len(chunks)} Airflow backfill(s), one after another"]
    for c in chunks:
        ran = f", {c.succeeded} succeeded, {c.failed} failed" if c.succeeded is not None else ""
        lines.append(
            f"  - backfill #{c.backfill_id}: {format_utc(c.first)} → {format_utc(c.last)}, {c.runs} run(s), "
            f"max_active_runs {c.max_active_runs}" + ran + ("" if c.finished else " (active)")
        )
    return lines


def _retry_lines(record: ChangeRecord) -> list[str]:
    """Links between a spec and the follow-ups that re-run its failed runs."""
    lines = [f"- **Retries the failed runs of**: {md_code(record.spec.retry_of)}"] if record.spec.retry_of else []
    if record.retried_by:
        shown = ", ".join(f"{md_code(r.spec)} ({md_code(r.path)})" for r in record.retried_by)
        lines.append(f"- **Failed runs retried by**: {shown}")
    return lines


def _code_lines(ran_on: RanOn | None) -> list[str]:
    """Which code re-ran history (only when Airflow was read: offline the runs' versions are not known)."""
    return [] if ran_on is None else [f"- **Code**: {md_text(ran_on.text())}"]


def _since_lines(reruns: Sequence[Rerun]) -> list[str]:
    if not reruns:
        return []
    shown = [f"- {md_text(r.text())}" for r in reruns]
    return ["## Re-run since", "", "Its own outcome stays what its runs did.", "", *shown, ""]


def _calendar_lines(calendar: HeatMap | None) -> list[str]:
    if calendar is None:
        return []
    return ["## Calendar", "", *md_fence(heatmap_text(calendar).splitlines()), ""]
