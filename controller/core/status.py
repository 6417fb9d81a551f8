"""Status rows and the change report (pure): from plan items, stored bindings and audit records."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.core.audit import AuditRecord
from controller.core.audit_render import record_line
from controller.core.plan import Item, Plan
from controller.core.spec import BackfillSpec, format_utc

REPORT_FORMAT_VERSION = 1


@dataclass(frozen=True, slots=True)
class StatusRow:
    spec: str
    dag_id: str
    phase: str
    backfill_id: int | None
    success: int
    failed: int
    running: int
    queued: int
    total: int
    eta_seconds: float | None
    note: str

    @property
    def progress(self) -> float:
        return 100.0 * (self.success + self.failed) / self.total if self.total else 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "dag_id": self.dag_id,
            "phase": self.phase,
            "backfill_id": self.backfill_id,
            "runs": {
                "success": self.success,
                "failed": self.failed,
                "running": self.running,
                "queued": self.queued,
                "total": self.total,
            },
            "progress": round(self.progress, 1),
            "eta_seconds": self.eta_seconds,
            "note": self.note,
        }


def status_rows(plan: Plan, stored: Mapping[str, Mapping[str, Any]]) -> list[StatusRow]:
    return [_row(item, stored.get(item.spec, {})) for item in plan.items]


def _row(item: Item, stored: Mapping[str, Any]) -> StatusRow:
    runs = item.facts.get("runs") or stored.get("run_counts") or {}
    counts: Mapping[str, int] = runs.get("counts", {})
    success, failed = counts.get("success", 0), counts.get("failed", 0)
    running, queued = counts.get("running", 0), counts.get("queued", 0)
    mar = int(item.facts.get("max_active_runs") or 1)
    mean = runs.get("mean_duration")
    eta = None if mean is None or not (running + queued) else math.ceil((running + queued) / mar) * float(mean)
    return StatusRow(
        item.spec,
        item.dag_id,
        item.phase.value,
        item.backfill_id or stored.get("backfill_id"),
        success,
        failed,
        running,
        queued,
        int(runs.get("total", 0)),
        eta,
        item.reason,
    )


def stored_rows(specs: Sequence[BackfillSpec], stored: Mapping[str, Mapping[str, Any]]) -> list[StatusRow]:
    """Offline status: what the store last recorded (no Airflow call), for every spec in the tree."""
    rows = []
    for spec in specs:
        row = stored.get(spec.name, {})
        counts = (row.get("run_counts") or {}).get("counts", {})
        reason = (row.get("detail") or {}).get("reason", "not reconciled yet")
        rows.append(
            StatusRow(
                spec.name,
                spec.dag_id,
                row.get("phase", "Pending"),
                row.get("backfill_id"),
                counts.get("success", 0),
                counts.get("failed", 0),
                counts.get("running", 0),
                counts.get("queued", 0),
                int((row.get("run_counts") or {}).get("total", 0)),
                None,
                f"(stored {row.get('updated_at', '-')}) {reason}",
            )
        )
    return rows


def eta_text(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


def status_text(rows: Sequence[StatusRow]) -> str:
    header = (
        f"{'SPEC':<28} {'DAG':<22} {'PHASE':<22} {'BACKFILL':>8} {'OK':>4} {'FAIL':>4} {'RUN':>4} {'QUE':>4} "
        f"{'TOTAL':>5} {'DONE':>6} {'ETA':>7}  NOTE"
    )
    lines = [header]
    for r in rows:
        lines.append(
            f"{r.spec:<28} {r.dag_id:<22} {r.phase:<22} {r.backfill_id or '-':>8} {r.success:>4} "
            f"{r.failed:>4} {r.running:>4} {r.queued:>4} {r.total:>5} {r.progress:>5.0f}% "
            f"{eta_text(r.eta_seconds):>7}  {r.note}"
        )
    return "\n".join(lines) + "\n"


def report_json(spec: BackfillSpec, stored: Mapping[str, Any], events: Sequence[AuditRecord]) -> dict[str, Any]:
    runs = stored.get("run_counts") or {}
    detail = stored.get("detail") or {}
    counts = runs.get("counts", {})
    created = next(
        (
            e.time
            for e in events
            if e.entry.action == "create" and e.entry.phase == "outcome" and e.entry.backfill_id is not None
        ),
        None,
    )
    finished = next(
        (e.time for e in reversed(events) if e.entry.outcome in ("Succeeded", "CompletedWithFailures", "Cancelled")),
        None,
    )
    in_range, to_create = detail.get("runs_in_range"), detail.get("runs_to_create")
    return {
        "format_version": REPORT_FORMAT_VERSION,
        "spec": spec.name,
        "path": spec.path,
        "digest": spec.digest,
        "git_commit": stored.get("git_commit"),
        "ticket": spec.ticket,
        "reason": spec.reason,
        "requested_by": spec.requested_by,
        "approvers": list(spec.approvers),
        "dag_id": spec.dag_id,
        "from_date": format_utc(spec.from_date),
        "to_date": format_utc(spec.to_date),
        "reprocess_behavior": spec.reprocess_behavior.value,
        "max_active_runs": spec.max_active_runs,
        "direction": "backwards" if spec.run_backwards else "forward",
        "desired_state": spec.state.value,
        "backfill_id": stored.get("backfill_id"),
        "outcome": stored.get("phase", "Pending"),
        "created_at": created,
        "completed_at": finished,
        "intervals": {
            "complete": counts.get("success", 0),
            "failed": counts.get("failed", 0),
            "failed_dates": runs.get("failed_dates", []),
            "failed_partitions": runs.get("failed_partitions", []),
            "never_started": runs.get("never_started", 0),
            "skipped": None if in_range is None or to_create is None else in_range - to_create,
            "in_range": in_range,
        },
        "partitions": _partitions(detail),
        "audit": [e.as_json() for e in events],
    }


def _partitions(detail: Mapping[str, Any]) -> dict[str, str] | None:
    """First and last partition key the create ran, for a partitioned DAG (None otherwise)."""
    first, last = detail.get("first_partition"), detail.get("last_partition")
    return None if first is None or last is None else {"first": first, "last": last}


def _or_unknown(value: Any) -> str:
    return "?" if value is None else str(value)


def report_markdown(report: Mapping[str, Any], events: Sequence[AuditRecord]) -> str:
    i = report["intervals"]
    failed = ", ".join(i.get("failed_partitions") or [d[:10] for d in i["failed_dates"]]) or "none"
    parts = report.get("partitions")
    partitions = f", partitions {parts['first']} … {parts['last']}" if parts else ""
    lines = [
        f"# Change record: {report['spec']}",
        "",
        f"- **Outcome**: {report['outcome']}"
        + (f" (backfill #{report['backfill_id']})" if report["backfill_id"] else ""),
        f"- **Ticket**: {report['ticket']}",
        f"- **Reason**: {report['reason']}",
        f"- **Requested by**: {report['requested_by']}; **approved by**: {', '.join(report['approvers'])}",
        f"- **Spec**: `{report['path']}` digest `{report['digest']}` at commit `{report['git_commit'] or 'unknown'}`",
        f"- **DAG**: `{report['dag_id']}`, {report['from_date']} → {report['to_date']}, reprocess "
        f"`{report['reprocess_behavior']}`, max_active_runs {report['max_active_runs']}, {report['direction']}"
        + partitions,
        f"- **Created**: {report['created_at'] or '-'}; **completed**: {report['completed_at'] or '-'}",
        f"- **Intervals**: {i['complete']} complete, {i['failed']} failed ({failed}), "
        f"{_or_unknown(i['skipped'])} skipped of {_or_unknown(i['in_range'])} in range"
        + (f", {i['never_started']} never started (cancelled)" if i["never_started"] else ""),
        "",
        "## Audit trail",
        "",
        "```",
        *[record_line(e) for e in events],
        "```",
    ]
    return "\n".join(lines) + "\n"
