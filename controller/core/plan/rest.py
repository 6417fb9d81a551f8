"""Which finished specs a pass carries as counts (pure): a finished spec whose file is unchanged (unread:
`commands/reconcile/finished.py`) has nothing a pass could decide or write, its item would be its recorded outcome;
so it is not built, planned or recorded again, and the plan counts it per phase.

On a DAG with live work the walk over its queue still sees such a spec's backfills and name (`AtRest.walked`).
A spec still owed work after it finished stays an item: a publish run (after its final verification), run notes
not all written. While any stop holds, nothing rests (a lifted stop's record names every spec it held).

What rests is kept between passes as a `Resting` value (the store's rest summary): a pass whose specs folder and
finished bindings are those it was made from walks only the DAGs with live work (`Resting.at_rest`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from controller.core.model.binding import BindingHead, Phase
from controller.core.plan.values import AtRest


@dataclass(frozen=True, slots=True)
class Finished:
    """A finished spec whose file a pass did not read (its index row says what it is)."""

    name: str
    dag_id: str
    owed: bool = False  # work still due after it finished: its publish run, run notes not all written


@dataclass(frozen=True, slots=True)
class Resting:
    """The specs at rest, as counts per phase and names per DAG: all a pass needs of them besides the DAGs it walks."""

    phases: tuple[tuple[Phase, int], ...] = ()  # most first, then by name
    by_dag: Mapping[str, tuple[str, ...]] = field(default_factory=lambda: MappingProxyType({}))

    def at_rest(self, busy: Collection[str]) -> AtRest:
        """What the pass carries: every name, and those on a `busy` DAG walked."""
        names = frozenset(name for names in self.by_dag.values() for name in names)
        walked = frozenset(name for dag in busy for name in self.by_dag.get(dag, ()))
        return AtRest(self.phases, names, walked)


def resting(finished: Sequence[Finished], bindings: Mapping[str, BindingHead]) -> Resting:
    """The `finished` specs owed nothing, counted by their bindings' phases and listed by DAG."""
    rest = [f for f in finished if not f.owed]
    phases = Counter(bindings[f.name].phase for f in rest)
    by_dag: dict[str, list[str]] = {}
    for f in rest:
        by_dag.setdefault(f.dag_id, []).append(f.name)
    return Resting(
        tuple(sorted(phases.items(), key=lambda p: (-p[1], p[0].value))),
        MappingProxyType({dag: tuple(sorted(names)) for dag, names in sorted(by_dag.items())}),
    )


def busy(read_dags: Collection[str], bindings: Mapping[str, BindingHead]) -> frozenset[str]:
    """The DAGs a pass walks: those a spec read this pass is on, and those a live binding names."""
    return frozenset(read_dags) | {b.dag_id for b in bindings.values() if not b.phase.terminal}


def at_rest(
    finished: Sequence[Finished], bindings: Mapping[str, BindingHead], read_dags: Collection[str], *, stopped: bool
) -> AtRest:
    """The `finished` specs that rest: every one owed nothing, none while a stop holds (`stopped`). Those on a DAG a
    spec read this pass is on (`read_dags`) or a live binding names are `walked`: the walk over that DAG's queue
    still needs their backfills (never another spec's to adopt) and their names (a backfill of theirs is the
    queue's own)."""
    if stopped:
        return AtRest()
    return resting(finished, bindings).at_rest(busy(read_dags, bindings))
