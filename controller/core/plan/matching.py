"""Which backfill in Airflow is a spec's (pure): the one a create with its body makes, a chunk it may have created,
and the backfill to adopt after a lost answer or a lost store."""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Collection, Iterator, Sequence
from datetime import datetime

from controller.core.model.airflow import Backfill, BackfillRequest
from controller.core.model.binding import Binding
from controller.core.model.spec import BackfillSpec, canonical_json
from controller.core.rules.chunks import request_for

LARGE = 10**9  # a run count above any policy's threshold: would the spec be chunked at all


def matches(spec: BackfillSpec, backfill: Backfill) -> bool:
    """Same backfill as the spec would create: DAG, dates, reprocess, max_active_runs and conf."""
    return matches_request(BackfillRequest.from_spec(spec), backfill)


def matches_request(request: BackfillRequest, backfill: Backfill) -> bool:
    """The backfill a create with this body makes (a whole spec's, or one chunk's)."""
    return (
        backfill.from_date == request.from_date
        and backfill.to_date == request.to_date
        and backfill.max_active_runs == request.max_active_runs
        and _params(backfill) == _asked(request)
    )


Params = tuple[str, str | None, str | None]  # DAG, reprocess behaviour, conf as canonical JSON


def _asked(request: BackfillRequest) -> Params:
    """What a create asks besides its dates and concurrency (what every chunk of one spec shares)."""
    conf = canonical_json(dict(request.dag_run_conf)) if request.dag_run_conf else None
    return request.dag_id, request.reprocess_behavior, conf


def _params(backfill: Backfill) -> Params:
    return backfill.dag_id, backfill.reprocess_behavior, backfill.conf_json()


def matched(specs: Sequence[BackfillSpec], backfills: Sequence[Backfill]) -> Iterator[tuple[BackfillSpec, Backfill]]:
    """Every (spec, backfill) that `matches`, specs in their order and each spec's backfills in theirs, found by DAG
    and dates (`by_range`): a lost store pairs a DAG's whole history; a scan of every pair is O(specs × backfills)."""
    ranges = by_range(backfills)
    for spec in specs:
        yield from ((spec, b) for b in of_range(ranges, spec) if matches(spec, b))


def chunks_among(specs: Sequence[BackfillSpec], backfills: Sequence[Backfill]) -> set[int]:
    """The backfills that are `chunk_of` one of the specs, found per backfill by the specs sorted by start (with
    their latest end so far) instead of a scan of every pair."""
    reach: dict[Params, list[tuple[datetime, datetime]]] = {}
    for spec in specs:
        reach.setdefault(_asked(BackfillRequest.from_spec(spec)), []).append((spec.from_date, spec.to_date))
    ends: dict[Params, tuple[list[datetime], list[datetime]]] = {}
    for params, spans in reach.items():
        spans.sort(key=lambda span: span[0])
        ends[params] = ([start for start, _end in spans], list(itertools.accumulate((e for _s, e in spans), max)))
    found = set()
    for backfill in backfills:
        starts, latest = ends.get(_params(backfill), ([], []))
        at = bisect.bisect_right(starts, backfill.from_date)  # the specs starting on or before it
        if at and latest[at - 1] >= max(backfill.from_date, backfill.to_date):  # one of them ends on or after it
            found.add(backfill.id)
    return found


def pending_request(spec: BackfillSpec, binding: Binding | None) -> BackfillRequest | None:
    """The chunk create a chunked spec asked for and has no answer to (a crash or a lost answer)."""
    if binding is None or binding.progress is None or binding.progress.pending is None:
        return None
    return request_for(spec, binding.progress.pending)


def chunk_of(spec: BackfillSpec, backfill: Backfill) -> bool:
    """A backfill the chunked spec may have created as one of its chunks: its parameters (any concurrency: it
    may change between chunks), dates inside its range."""
    asked = _asked(BackfillRequest.from_spec(spec))
    return _params(backfill) == asked and spec.from_date <= backfill.from_date <= spec.to_date >= backfill.to_date


def adoptable_chunks(spec: BackfillSpec, backfills: Sequence[Backfill], taken: Collection[int]) -> tuple[Backfill, ...]:
    """A chunked spec's chunks, oldest first: contiguous slices one after another in its direction; nothing
    when the candidates overlap or go the other way (they are not one spec's chunks)."""
    found = sorted(
        (b for b in backfills if b.id not in taken and chunk_of(spec, b)), key=lambda b: (b.created_at, b.id)
    )
    for before, after in itertools.pairwise(found):
        if (after.to_date >= before.from_date) if spec.run_backwards else (after.from_date <= before.to_date):
            return ()
    return tuple(found)


Ranges = dict[tuple[str, datetime, datetime], list[Backfill]]


def by_range(backfills: Sequence[Backfill]) -> Ranges:
    """The backfills by DAG and dates, in their order: the only ones a spec of that DAG and those dates can match
    (`matches`), so a spec finds its candidates at once (`of_range`; a scan per spec made a lost store's pass
    O(specs × backfills))."""
    found: Ranges = {}
    for backfill in backfills:
        found.setdefault((backfill.dag_id, backfill.from_date, backfill.to_date), []).append(backfill)
    return found


def of_range(ranges: Ranges, spec: BackfillSpec) -> Sequence[Backfill]:
    """The backfills `by_range` holds for the spec's DAG and dates."""
    return ranges.get((spec.dag_id, spec.from_date, spec.to_date), ())


def adoptable(
    spec: BackfillSpec, backfills: Sequence[Backfill], taken: Collection[int], intent: datetime | None
) -> Backfill | None:
    """A backfill we may have created for this spec: active ones first, then the newest completed."""
    found = [
        b for b in backfills if b.id not in taken and matches(spec, b) and (intent is None or b.created_at >= intent)
    ]
    found.sort(key=lambda b: (b.active, b.created_at, b.id), reverse=True)
    return found[0] if found else None


def adoptable_request(
    request: BackfillRequest, backfills: Sequence[Backfill], taken: Collection[int], intent: datetime | None
) -> Backfill | None:
    """The backfill a create with this body made (created after its intent, if any): the newest."""
    found = [
        b
        for b in backfills
        if b.id not in taken and matches_request(request, b) and (intent is None or b.created_at >= intent)
    ]
    return max(found, key=lambda b: b.id) if found else None
