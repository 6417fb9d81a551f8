"""Status rows (pure): from plan items and stored bindings; `status` as text."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from controller.core.documents.escaping import plain_lines
from controller.core.model.airflow import RunSummary, Skipped
from controller.core.model.binding import Binding, Phase
from controller.core.model.capabilities import Capabilities
from controller.core.model.coverage import Coverage
from controller.core.model.spec import BackfillSpec, InvalidSpec
from controller.core.model.stages import Stage, StageRecord, StageState
from controller.core.plan.admission import running_concurrency
from controller.core.plan.edits import Edit
from controller.core.plan.values import LIFTED, UNOBSERVED, Item, Kind, Plan
from controller.core.render.analysis import spec_analysis
from controller.core.render.layout import Column, hang, left_out_line, table
from controller.core.render.links import backfill_link
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
    stale: bool = False  # what the store last recorded, not observed now (Airflow unreachable, or offline)
    observed_at: str | None = None  # a stale row's last good observation (the store's time of its binding)
    link: str | None = None  # its backfill in Airflow's UI (`core.render.links`; None: no Airflow URL)
    skipped: tuple[Skipped, ...] = ()  # slots Airflow created no run for, with its reason (3.4's slots)
    refused_at_head: str | None = None  # queued, and reconcile will refuse it at the head (the dry run reconcile kept)
    coverage: Coverage | None = None  # a finished spec's version coverage, measured when it ended

    @property
    def progress(self) -> float:
        return 100.0 * (self.success + self.failed) / self.total if self.total else 0.0

    def as_json(self) -> dict[str, Any]:
        return (
            {
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
                "stale": self.stale,
                "observed_at": self.observed_at,
                "link": self.link,
            }
            | ({"skipped": [k.as_json() for k in self.skipped]} if self.skipped else {})
            | ({"refused_at_head": self.refused_at_head} if self.refused_at_head is not None else {})
            | ({"coverage": self.coverage.as_json()} if self.coverage is not None else {})
        )


def status_rows(
    plan: Plan,
    bindings: Mapping[str, Binding],
    analysis: Mapping[str, Verdict] | None = None,
    stages: Mapping[tuple[str, Stage], StageRecord] | None = None,
) -> list[StatusRow]:
    """A row per spec; `analysis`: the verdicts, in the note of each unfinished spec that lists the system;
    `stages`: a rehearsed spec's note says how its rehearsal went. A pause or unpause the next pass makes is said
    as such: the row shows the phase the backfill is in now, never the one the change will bring."""
    return [_status_row(item, bindings.get(item.spec), analysis, stages or {}) for item in plan.items]


def _status_row(
    item: Item,
    binding: Binding | None,
    analysis: Mapping[str, Verdict] | None,
    stages: Mapping[tuple[str, Stage], StageRecord],
) -> StatusRow:
    row = _pending_steer(_last_decision(_row(item, binding), item, binding), item)
    return with_coverage(_with_rehearsal(_with_analysis(row, item, analysis), item, stages), binding)


def with_coverage(row: StatusRow, binding: Binding | None) -> StatusRow:
    """A finished spec's version coverage, in one line after its note (measured when it ended)."""
    if binding is None or binding.coverage is None or not binding.phase.terminal or row.phase != binding.phase.value:
        return row
    shown = binding.coverage.text()
    return replace(row, coverage=binding.coverage, note=f"{row.note} · {shown}" if row.note else shown)


LIFT_RECORDED = "lift recorded; unpause at the next pass"
NOW_AND_NEXT = {Kind.UNPAUSE: (Phase.PAUSED, "unpause"), Kind.PAUSE: (Phase.RUNNING, "pause")}


def _pending_steer(row: StatusRow, item: Item) -> StatusRow:
    """`Paused — lift recorded; unpause at the next pass`, not `Running` (nor `resumed`) before it is: between an
    owner's lift and the pass that acts on it, Airflow's backfill is still paused."""
    if item.kind not in NOW_AND_NEXT:
        return row
    now, verb = NOW_AND_NEXT[item.kind]
    note = LIFT_RECORDED if item.reason == LIFTED else f"{verb} at the next pass: {item.reason}"
    return replace(row, phase=now.value, note=note)


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
    if item.unobserved:  # Airflow not observed: what was last seen, marked stale, never Blocked for it
        why = item.reason.removeprefix(f"{UNOBSERVED}: ")
        last = f"last observed {_when(binding)}: {binding.reason}" if binding is not None else "never observed yet"
        return replace(_stored(item.spec, item.dag_id, binding), note=f"stale: not observed now ({why}); {last}")
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
        skipped=runs.skipped,
        refused_at_head=item.refused_at_head,
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


def stored_rows(
    specs: Sequence[BackfillSpec],
    bindings: Mapping[str, Binding],
    invalid: Sequence[InvalidSpec] = (),
    edits: Mapping[str, Edit] | None = None,
) -> list[StatusRow]:
    """Offline status: what the store last recorded (no Airflow call), for every spec in the tree; an invalid file
    and an applied spec edited in place are Blocked here as a pass shows them."""
    rows = [_stored(spec.name, spec.dag_id, bindings.get(spec.name), (edits or {}).get(spec.name)) for spec in specs]
    rows = [with_coverage(row, bindings.get(row.spec)) for row in rows]
    names = {spec.name for spec in specs}
    for spec in sorted(invalid, key=lambda s: s.path):
        own = spec.name not in names
        binding = bindings.get(spec.name) if own else None
        rows.append(_stored(spec.name if own else spec.path, spec.dag_id, binding, blocked=spec.reason()))
    return rows


def _when(binding: Binding) -> str:
    return f"{binding.updated_at[:19]}Z" if binding.updated_at else "at an unknown time"


def _stored(name: str, dag_id: str, binding: Binding | None, edit: Edit | None = None, blocked: str = "") -> StatusRow:
    runs = (binding.runs if binding else None) or RunSummary({})
    reason = (
        blocked or (edit.text() if edit is not None else "") or (binding.reason if binding else "not reconciled yet")
    )
    held = bool(blocked) or edit is not None
    return StatusRow(
        name,
        dag_id or (binding.dag_id if binding else ""),
        Phase.BLOCKED.value if held else (binding.phase.value if binding else "Pending"),
        binding.backfill_id if binding else None,
        runs.count("success"),
        runs.count("failed"),
        runs.count("running"),
        runs.count("queued"),
        runs.total,
        None,
        reason if held else f"(stored {binding.updated_at if binding else '-'}) {reason}",
        backfills=binding.progress.ids if binding is not None and binding.progress is not None else (),
        refused=not held and binding is not None and binding.phase is Phase.BLOCKED and binding.refused,
        stale=True,
        observed_at=binding.updated_at if binding is not None else None,
        skipped=runs.skipped,
    )


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
    skipped = [w for r in rows if r.skipped for w in hang(f"{r.spec}: {skipped_text(r.skipped)}", width)]
    return plain_lines([phase_line(rows)]) + status_text(rows, width) + plain_lines(found + skipped)


def skipped_text(skipped: Sequence[Skipped]) -> str:
    """`skipped by Airflow: 2021-03-02 (in flight), 2021-03-04 (already exists)`: Airflow's own reasons."""
    return "skipped by Airflow: " + ", ".join(f"{k.slot} ({k.reason})" for k in skipped)


def with_links(rows: Sequence[StatusRow], base: str | None, server: Capabilities | None) -> list[StatusRow]:
    """Each row with the link to its backfill in Airflow's UI (`base`: the Airflow URL without credentials)."""
    return [replace(r, link=backfill_link(base, server, r.dag_id, r.backfill_id)) for r in rows]
