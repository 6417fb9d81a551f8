"""Which runs get their Airflow run note this pass (pure): the next dates of each noted spec's backfill, a bounded
number a pass, so that a pass costs at most one listing per spec whose notes are not complete."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from controller.core.model.binding import Binding, NotesMark
from controller.core.model.run_notes import AirflowNotes
from controller.core.model.spec import BackfillSpec

NOTES_PER_PASS = 100  # run notes written in one pass at most (one listing page); the rest the next pass


@dataclass(frozen=True, slots=True)
class NoteWork:
    spec: str
    dag_id: str
    backfill_id: int
    dates: tuple[datetime, ...]  # the next dates of the backfill to note, in order


def notes_due(
    specs: Sequence[BackfillSpec],
    bindings: Mapping[str, Binding],
    notes: AirflowNotes | None,
    budget: int = NOTES_PER_PASS,
) -> list[NoteWork]:
    """The work of this pass, spec by spec in name order, `budget` dates in all."""
    if notes is None:
        return []
    work: list[NoteWork] = []
    for spec in sorted(specs, key=lambda s: s.name):
        binding = bindings.get(spec.name)
        dates = _pending(binding) if binding is not None and notes.covers(spec.dag_id) else []
        if budget <= 0:
            break
        if dates and binding is not None and binding.backfill_id is not None:
            work.append(NoteWork(spec.name, spec.dag_id, binding.backfill_id, tuple(dates[:budget])))
            budget -= len(work[-1].dates)
    return work


def notes_pending(binding: Binding, notes: AirflowNotes | None) -> bool:
    """The spec's backfill has runs still to note (a pass writes them, finished or not)."""
    return notes is not None and notes.covers(binding.dag_id) and bool(_pending(binding))


def _pending(binding: Binding) -> list[datetime]:
    """The backfill's dates after its mark (none: no backfill, its dates not known, or all noted)."""
    own = binding.created.own_dates if binding.created is not None else None
    if binding.backfill_id is None or not own:
        return []
    mark = binding.noted if binding.noted is not None and binding.noted.backfill_id == binding.backfill_id else None
    return sorted(d for d in own if mark is None or d > mark.through)


def advanced(work: NoteWork, through: datetime | None, before: NotesMark | None) -> NotesMark | None:
    """The mark after a pass went over the runs up to `through` in date order: every date of the work up to there
    is noted or has no run to note (None: it got nowhere, the mark stays)."""
    done = [d for d in work.dates if through is not None and d <= through]
    return NotesMark(work.backfill_id, max(done)) if done else before
