"""What a spec's `resume` lifts, judged against the store's record (`validate` with a store at hand).

Without the store, `validate` trusts a resume that names a stop (`stop #3: why`) and warns about one that names
none on a spec with no halt rule. With it, the resume is judged by what exists: a named stop that never held the
spec lifts nothing (a warning listing the stops that did), a resume of a spec the store shows Halted is no warning,
and the warning about a resume naming nothing lists the stops holding the spec now.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from controller.core.checks.loaded import LoadedSpec
from controller.core.documents.diagnostics import Diagnostic, Severity
from controller.core.model.spec import NO_EXECUTION


@dataclass(frozen=True, slots=True)
class HeldBy:
    """A stop that held the spec, as the store has it: its id, what it stopped, and whether it is in force."""

    id: int
    target: str  # `spec a`, `downstream lake`, `all *`
    in_force: bool

    def text(self) -> str:
        return f"#{self.id} ({self.target}, {'in force' if self.in_force else 'lifted'})"


def _listed(held: Sequence[HeldBy]) -> str:
    return ", ".join(h.text() for h in held) or "none"


def judge_resumes(
    loaded: Sequence[LoadedSpec],
    diagnostics: Sequence[Diagnostic],
    held: Mapping[str, Sequence[HeldBy]],
    halted: frozenset[str],
) -> tuple[Diagnostic, ...]:
    """`diagnostics` with each spec's resume judged by the store: `held` (spec → every stop that held it, oldest
    first) and `halted` (specs the store shows Halted)."""
    found = list(diagnostics)
    for item in loaded:
        spec = item.spec
        if spec.resume is None:
            continue
        stops = held.get(spec.name, ())
        unnamed = _unnamed_warning(item, found)
        if unnamed is not None:
            found.remove(unnamed)
            if spec.name not in halted:  # a Halted spec's resume does continue it
                in_force = [h for h in stops if h.in_force]
                found.append(
                    replace(unnamed, hint=f"{unnamed.hint}; stops holding {spec.name} now: {_listed(in_force)}")
                )
        ids = {h.id for h in stops}
        for missing in sorted(spec.resumed_stops - ids):
            found.append(
                Diagnostic(
                    item.at("resume"),
                    f"resume names stop #{missing}, but no stop #{missing} ever held {spec.name}: it lifts nothing",
                    f"name a stop that held it (the store's: {_listed(stops)}); `backfillctl stop list` shows the "
                    "stops in force",
                    Severity.WARNING,
                )
            )
    return tuple(sorted(found, key=Diagnostic.sort_key))


def _unnamed_warning(item: LoadedSpec, found: Sequence[Diagnostic]) -> Diagnostic | None:
    """The pure check's warning of a resume that names no stop on a spec with no halt rule, if it was given."""
    spec = item.spec
    if spec.resumed_stops or (spec.execution or NO_EXECUTION).halt_on_failure_ratio is not None:
        return None
    where = item.at("resume")
    return next((d for d in found if d.location == where and d.severity is Severity.WARNING), None)
