"""Which finished specs a pass carries as counts (pure): a finished spec whose file is unchanged (unread:
`commands/reconcile/finished.py`) has nothing a pass could decide or write, its item would be its recorded outcome;
so it is not built, planned or recorded again, and the plan counts it per phase.

On a DAG with live work the walk over its queue still sees such a spec's backfills and name (`AtRest.walked`).
A spec still owed work after it finished stays an item: a publish run (after its final verification), run notes
not all written. While any stop holds, nothing rests (a lifted stop's record names every spec it held).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from controller.core.model.binding import BindingHead
from controller.core.plan.values import AtRest


@dataclass(frozen=True, slots=True)
class Finished:
    """A finished spec whose file a pass did not read (its index row says what it is)."""

    name: str
    dag_id: str
    owed: bool = False  # work still due after it finished: its publish run, run notes not all written


def at_rest(
    finished: Sequence[Finished], bindings: Mapping[str, BindingHead], read_dags: Collection[str], *, stopped: bool
) -> AtRest:
    """The `finished` specs that rest: every one owed nothing, none while a stop holds (`stopped`). Those on a DAG a
    spec read this pass is on (`read_dags`) or a live binding names are `walked`: the walk over that DAG's queue
    still needs their backfills (never another spec's to adopt) and their names (a backfill of theirs is the
    queue's own)."""
    if stopped:
        return AtRest()
    busy = set(read_dags) | {b.dag_id for b in bindings.values() if not b.phase.terminal}
    resting = [f for f in finished if not f.owed]
    phases = Counter(bindings[f.name].phase for f in resting)
    return AtRest(
        tuple(sorted(phases.items(), key=lambda p: (-p[1], p[0].value))),
        frozenset(f.name for f in resting),
        frozenset(f.name for f in resting if f.dag_id in busy),
    )
