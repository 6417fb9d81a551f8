"""Version coverage as the change record says it (pure): the one line, every interval not covered (the first
`SHOWN` of them: the JSON lists every one), what changed since the spec ended, and what coverage is not."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from controller.core.model.coverage import DISCLAIMER, Coverage, Missed
from controller.core.render.change_record import ChangeRecord

CHECK_FORMAT_VERSION = 1  # `report NAME --check --format json`
SHOWN = 100  # intervals listed in markdown and HTML; the JSON keeps them all
INFORMATION = "information only (the spec has no `select`): its outcome comes from its own runs, as always"
SELECTED = (  # its outcome rule is today's: a select spec's own runs are the selected intervals
    "a `select` spec: an interval not covered is one it did not bring onto its target; its outcome comes from its "
    "own runs"
)


def coverage_facts(record: ChangeRecord) -> list[tuple[str, str]]:
    """(label, text) pairs, none when no coverage was measured or read."""
    covered = record.coverage
    if covered is None:
        return []
    said = INFORMATION if record.spec.select is None else SELECTED
    facts = [("Version coverage", f"{covered.text()}; target: {covered.source.value}; {said}")]
    if covered.missed:
        facts.append(("Not covered", listed(covered.missed)))
    if record.coverage_changed:
        facts.append(("Not covered since it ended", listed(record.coverage_changed)))
    facts.append(("What coverage is", DISCLAIMER))
    return facts


def listed(missed: Sequence[Missed]) -> str:
    shown = "; ".join(m.text() for m in missed[:SHOWN])
    more = len(missed) - SHOWN
    return shown + (f"; and {more} more (the JSON record lists every one)" if more > 0 else "")


def check_text(name: str, covered: Coverage, changed: Sequence[Missed]) -> str:
    """`report NAME --check`: whether coverage holds, then each interval changed since the end and each not
    covered now, one line each (what a scheduled job's log must tell)."""
    verdict = "holds" if covered.holds else "does not hold"
    lines = [f"{name}: coverage {verdict}: {covered.text()}; target: {covered.source.value}"]
    if changed:
        lines += [f"not covered since it ended: {_intervals(len(changed))}", *(f"  {m.text()}" for m in changed)]
    if covered.missed:
        lines += [f"not covered now: {_intervals(len(covered.missed))}", *(f"  {m.text()}" for m in covered.missed)]
    return "\n".join([*lines, DISCLAIMER]) + "\n"


def check_json(name: str, covered: Coverage, changed: Sequence[Missed]) -> dict[str, Any]:
    return {
        "format_version": CHECK_FORMAT_VERSION,
        "spec": name,
        "holds": covered.holds,
        "coverage": covered.as_json(),
        "changed_since_end": [m.as_json() for m in changed],
        "note": DISCLAIMER,
    }


def _intervals(n: int) -> str:
    return f"{n} interval" + ("" if n == 1 else "s")
