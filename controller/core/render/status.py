"""Status rows (pure): from plan items and stored bindings; `status` as text."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from controller.core.documents.escaping import plain_lines
from controller.core.model.airflow import RunSummary
from controller.core.model.binding import Binding, Phase
from controller.core.model.spec import BackfillSpec
from controller.core.model.stages import Stage, StageRecord, StageState
from controller.core.plan.admission import running_concurrency
from controller.core.plan.values import Item, Kind, Plan
from controller.core.render.analysis import spec_analysis
from controller.core.render.layout import Column, hang, left_out_line, table
from controller.core.rules.analysis import Verdict
from controller.core.rules.chunks import chunk_text


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
    chunk: tuple[int, int] | None = None  # a chunked spec: its k-th chunk of about n
    backfills: tuple[int, ...] = ()  # a chunked spec: every chunk's backfill, in order
    refused: bool = False  # Blocked by a refusal (the dry run over expected_runs or max_runs), not by its DAG

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
            "chunk": None if self.chunk is None else {"index": self.chunk[0], "count": self.chunk[1]},
            "backfills": list(self.backfills),
            "refused": self.refused,
        }


def status_rows(
    plan: Plan,
    bindings: Mapping[str, Binding],
    analysis: Mapping[str, Verdict] | None = None,
    stages: Mapping[tuple[str, Stage], StageRecord] | None = None,
) -> list[StatusRow]:
    """A row per spec; `analysis`: the verdicts, in the note of each unfinished spec that lists the system;
    `stages`: a rehearsed spec's note says how its rehearsal went."""
    rows = [_last_decision(_row(item, bindings.get(item.spec)), item, bindings.get(item.spec)) for item in plan.items]
    rows = [_with_analysis(row, item, analysis) for row, item in zip(rows, plan.items, strict=True)]
    return [_with_rehearsal(row, item, stages or {}) for row, item in zip(rows, plan.items, strict=True)]


def _with_rehearsal(row: StatusRow, item: Item, stages: Mapping[tuple[str, Stage], StageRecord]) -> StatusRow:
    """`rehearsal in staging: Succeeded, verified (run …)` once production goes on (before, the phase says it)."""
    record = stages.get((item.spec, Stage.REHEARSAL))
    if record is None or item.phase is Phase.AWAITING_REHEARSAL:
        return row
    verified = f", verified (run {record.run_id})" if record.run_id and record.state is StageState.PASSED else ""
    state = {StageState.PASSED: "Succeeded", StageState.FAILED: "Failed"}.get(record.state, "running")
    shown = f"rehearsal in {record.environment}: {state}{verified}"
    return replace(row, note=f"{row.note} · {shown}" if row.note else shown)


def _with_analysis(row: StatusRow, item: Item, analysis: Mapping[str, Verdict] | None) -> StatusRow:
    # say each verdict once: a create it holds or a backfill it paused has the verdict as its reason already
    unsaid = {s: v for s, v in (analysis or {}).items() if v.reason not in row.note}
    shown = spec_analysis(item.source.downstream, unsaid) if item.source and not item.phase.terminal else ""
    return replace(row, note=f"{row.note} · {shown}" if row.note else shown) if shown else row


def _last_decision(row: StatusRow, item: Item, binding: Binding | None) -> StatusRow:
    """A plan without dry runs (status) only knows `awaiting dry run`; what reconcile last decided about the same
    spec file, a refusal or a block, is what holds the spec."""
    source = item.source
    if not item.awaiting_dry_run or binding is None or binding.phase is not Phase.BLOCKED or source is None:
        return row
    if binding.spec_digest != source.digest:  # edited since: the next pass decides again
        return row
    when = f" at {binding.updated_at[:19]}Z" if binding.updated_at else ""
    note = f"{'refused' if binding.refused else 'blocked'} by reconcile{when}: {binding.reason}"
    return replace(row, phase=Phase.BLOCKED.value, note=note, refused=binding.refused)


def _row(item: Item, binding: Binding | None) -> StatusRow:
    runs = item.runs or (binding.runs if binding else None) or RunSummary({})
    running, queued = runs.count("running"), runs.count("queued")
    mar = running_concurrency(item, item.source) if item.source is not None else 1
    progress = item.progress or (binding.progress if binding else None)
    uncreated = (progress.uncreated or 0) if progress is not None else 0
    left = running + queued + (0 if item.phase.terminal else uncreated)  # a chunked spec's later chunks too
    eta = _eta(item, runs.mean_duration, left, mar)
    return StatusRow(
        item.spec,
        item.dag_id,
        item.phase.value,
        item.backfill_id or (binding.backfill_id if binding else None),
        runs.count("success"),
        runs.count("failed"),
        running,
        queued,
        runs.total + (0 if item.phase.terminal else uncreated),  # a chunked spec's later chunks count too
        eta,
        item.reason if item.chunk is None else f"{chunk_text(item.chunk)}; {item.reason}",
        item.chunk,
        progress.ids if progress is not None else (),
        refused=item.kind is Kind.REFUSE,
    )


CHUNK_GAP_SECONDS = 30.0  # a later chunk is created by the pass after its predecessor ends (the default interval)


HELD = frozenset(
    {Phase.AWAITING_PROMOTION, Phase.AWAITING_REHEARSAL, Phase.PAUSED, Phase.HALTED, Phase.BLOCKED, Phase.QUEUED}
)


def _eta(item: Item, mean: float | None, left: int, mar: int) -> float | None:
    """Waves of `mar` runs of the mean duration, plus a pass's wait at each chunk boundary still ahead; none
    while a human or another spec holds the spec (a canary awaiting promotion, a pause, a halt, a queue)."""
    if item.phase in HELD or mean is None or not left:
        return None
    ahead = item.chunk is not None and not item.phase.terminal
    boundaries = max(0, item.chunk[1] - item.chunk[0]) if ahead and item.chunk is not None else 0
    return math.ceil(left / mar) * mean + boundaries * CHUNK_GAP_SECONDS


def stored_rows(specs: Sequence[BackfillSpec], bindings: Mapping[str, Binding]) -> list[StatusRow]:
    """Offline status: what the store last recorded (no Airflow call), for every spec in the tree."""
    rows = []
    for spec in specs:
        binding = bindings.get(spec.name)
        runs = (binding.runs if binding else None) or RunSummary({})
        reason = binding.reason if binding else "not reconciled yet"
        rows.append(
            StatusRow(
                spec.name,
                spec.dag_id,
                binding.phase.value if binding else "Pending",
                binding.backfill_id if binding else None,
                runs.count("success"),
                runs.count("failed"),
                runs.count("running"),
                runs.count("queued"),
                runs.total,
                None,
                f"(stored {binding.updated_at if binding else '-'}) {reason}",
                backfills=binding.progress.ids if binding is not None and binding.progress is not None else (),
                refused=binding is not None and binding.phase is Phase.BLOCKED and binding.refused,
            )
        )
    return rows


def eta_text(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


STATUS_COLUMNS = (  # `keep`: the order in which a short width leaves columns out, RUN and QUE first
    Column("SPEC"),
    Column("DAG", keep=3),
    Column("PHASE"),
    Column("BACKFILL", right=True, keep=8),
    Column("OK", right=True, keep=6),
    Column("FAIL", right=True, keep=4),
    Column("RUN", right=True, keep=9),
    Column("QUE", right=True, keep=10),
    Column("TOTAL", right=True, keep=7),
    Column("DONE", right=True, keep=2),
    Column("ETA", right=True, keep=5),
)


def cells(r: StatusRow) -> list[str]:
    counts = (r.success, r.failed, r.running, r.queued, r.total)
    return [
        r.spec,
        r.dag_id,
        r.phase,
        str(r.backfill_id or "-"),
        *map(str, counts),
        f"{r.progress:.0f}%",
        eta_text(r.eta_seconds),
    ]


def status_text(rows: Sequence[StatusRow], width: int | None = None) -> str:
    """One row a spec, columns sized to their content; within `width`, the note wraps below and the least
    needed counts are left out (said in a last line), never a name."""
    lines, left_out = table(STATUS_COLUMNS, [cells(r) for r in rows], [r.note for r in rows], "NOTE", width)
    return plain_lines(lines + left_out_line(left_out, width))


def phase_counts(rows: Sequence[StatusRow]) -> dict[str, int]:
    """Specs per phase, in the phases' order (the ones with none left out)."""
    counts = {phase.value: sum(1 for r in rows if r.phase == phase.value) for phase in Phase}
    return {phase: n for phase, n in counts.items() if n}


def phase_line(rows: Sequence[StatusRow]) -> str:
    """`3 specs: 1 Running, 2 Blocked (degraded: 2 blocked or refused)`: what a glance must tell."""
    counts = ", ".join(f"{n} {phase}" for phase, n in phase_counts(rows).items())
    held = len(spec_findings(rows))
    health = f" (degraded: {held} blocked or refused)" if held else ""
    return f"{len(rows)} spec{'' if len(rows) == 1 else 's'}" + (f": {counts}" if counts else "") + health


def spec_findings(rows: Sequence[StatusRow]) -> list[tuple[str, str]]:
    """Every Blocked spec as a finding (kind `refused` or `blocked`): it waits for a human, like Argo CD's
    Degraded, while the reconciler itself stays healthy."""
    return [("refused" if r.refused else "blocked", f"{r.spec}: {r.note}") for r in rows if r.phase == "Blocked"]


def status_report(rows: Sequence[StatusRow], width: int | None = None) -> str:
    """`status` as text: the counts per phase first, the table, then every blocked or refused spec."""
    found = [w for kind, message in spec_findings(rows) for w in hang(f"! {kind}: {message}", width)]
    return plain_lines([phase_line(rows)]) + status_text(rows, width) + plain_lines(found)
