"""What a pass reads of a DAG's backfills, and who owns each (pure): the newest ones its live bindings own, or
its whole history when a spec may adopt one from any time; the backfills whose runs the plan needs; and the spec
behind each backfill id (bound, chunks included, or matched by its create parameters after a lost store)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from controller.core.model.airflow import Backfill
from controller.core.model.binding import Binding, Claim
from controller.core.model.spec import BackfillSpec
from controller.core.plan.matching import chunks_among, matched, matches_request, pending_request


def owners_of(
    bindings: Mapping[str, Binding],
    specs: Sequence[BackfillSpec],
    listed: Sequence[Backfill],
    claims: Mapping[str, Claim] | None = None,
) -> dict[int, str]:
    """Backfill id → the spec that owns it (every backfill a spec owned, chunks included; `claims`: those of the
    finished specs at rest), or that matches it and is not bound yet (after a lost store it is adopted in the same
    pass)."""
    owners = {b.id: s.name for s, b in matched([s for s in specs if not has_backfill(bindings.get(s.name))], listed)}
    owners |= {i: name for name, c in (claims or {}).items() for i in c.owned}
    owners |= {i: name for name, b in bindings.items() for i in b.backfills}
    owners |= {c.backfill_id: name for name, b in bindings.items() if b.progress for c in b.progress.chunks}
    return owners | {b.backfill_id: name for name, b in bindings.items() if b.backfill_id is not None}


def has_backfill(binding: Binding | None) -> bool:
    """The store binds the spec to a backfill: a spec recorded before its create (a save lost after it, a crash)
    is matched like an unbound one, and its backfill's runs are read before it is adopted."""
    chunks = binding is not None and binding.progress is not None and bool(binding.progress.chunks)
    return binding is not None and (binding.backfill_id is not None or chunks)


def bound_only(dag_id: str, specs: Sequence[BackfillSpec], bindings: Mapping[str, Binding]) -> frozenset[int] | None:
    """The backfills the DAG's live bindings own, when that is all the plan needs of its history; None when
    a spec without a backfill may adopt one from any time (after a lost store, or a crash before the outcome)."""
    if any(s.dag_id == dag_id and (s.name not in bindings or bindings[s.name].backfill_id is None) for s in specs):
        return None
    return frozenset(
        b.backfill_id for b in bindings.values() if b.dag_id == dag_id and not b.phase.terminal and b.backfill_id
    )


def settled_chunks(dag_id: str, bindings: Mapping[str, Binding]) -> set[int | None]:
    """Chunks whose final runs the store keeps (a spec held between chunks reads none of them again)."""
    return {
        c.backfill_id
        for b in bindings.values()
        if b.dag_id == dag_id and b.progress is not None
        for c in b.progress.chunks
        if c.summary is not None
    }


def runs_wanted(
    dag_id: str, backfills: Sequence[Backfill], specs: Sequence[BackfillSpec], bindings: Mapping[str, Binding]
) -> list[Backfill]:
    """The backfills whose runs the plan needs: active ones, those a live binding owns (but a settled chunk),
    those an unbound spec may adopt, and those a create recorded before its answer may have made."""
    bound = {b.backfill_id for b in bindings.values() if b.dag_id == dag_id and not b.phase.terminal}
    bound -= settled_chunks(dag_id, bindings)
    unbound = [s for s in specs if s.dag_id == dag_id and not has_backfill(bindings.get(s.name))]
    pending = [r for s in specs if s.dag_id == dag_id and (r := pending_request(s, bindings.get(s.name))) is not None]
    adoptable = {b.id for _s, b in matched(unbound, backfills)} | chunks_among(unbound, backfills)  # chunks too
    return [
        b
        for b in backfills
        if b.active or b.id in bound or b.id in adoptable or any(matches_request(r, b) for r in pending)
    ]
