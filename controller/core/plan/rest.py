"""Which finished specs a pass carries as counts (pure): a DAG at rest has nothing a pass could decide, observe or
write, so its finished specs are not built, planned or recorded again; the plan counts them per phase.

A DAG is at rest when every spec on it is finished and unchanged (its file unread: `commands/reconcile/finished.py`)
and no binding on it is live: such a DAG is never observed, and its specs' items would be their recorded outcomes.
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
    """The `finished` specs that rest: on a DAG no spec read this pass is on (`read_dags`) and no live binding
    names, owed nothing; none while a stop holds (`stopped`)."""
    if stopped:
        return AtRest()
    busy = set(read_dags) | {b.dag_id for b in bindings.values() if not b.phase.terminal}
    resting = [bindings[f.name] for f in finished if f.dag_id not in busy and not f.owed]
    phases = Counter(b.phase for b in resting)
    return AtRest(
        tuple(sorted(phases.items(), key=lambda p: (-p[1], p[0].value))), frozenset(b.spec_name for b in resting)
    )
