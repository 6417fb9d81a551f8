"""What was approved is what runs (pure): a bound spec whose create-time fields differ from what its binding
recorded when it was applied is planned as applied and shown Blocked, whatever branch protection let through.

`applied_view` swaps each edited spec for the spec as it was applied (so its backfill's runs and outcome are still
read truly); `hold_edited` then shows each such spec Blocked with an `edited-in-place` finding. A reduction its
file asks (`state: paused` or `cancelled`) still goes through: it never waits on anything else being right.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from controller.core.checks.changes import FieldChange, edited_fields
from controller.core.model.binding import Applied, Binding, Phase
from controller.core.model.spec import BackfillSpec
from controller.core.plan.values import Finding, FindingKind, Item, Kind, Plan

REDUCTIONS = frozenset({Kind.PAUSE, Kind.CANCEL})  # what an edited spec's file may still ask


@dataclass(frozen=True, slots=True)
class Edit:
    """A spec file whose create-time fields differ from what its binding recorded at apply time."""

    spec: str
    changes: tuple[FieldChange, ...]
    applied_commit: str | None  # the commit that applied it (None: not recorded)
    edited_commit: str | None  # the last commit of the spec file (None: not in git)

    def text(self) -> str:
        applied = f" (applied at {self.applied_commit[:12]})" if self.applied_commit else ""
        edited = f"commit {self.edited_commit[:12]}" if self.edited_commit else "the working tree"
        fields = "; ".join(change.text() for change in self.changes)
        return (
            f"edited in place by {edited}: {fields}{applied}; nothing more is created for it and the change record "
            "keeps what ran: revert the edit, and make a new spec for other dates or settings"
        )


def applied_view(
    specs: Sequence[BackfillSpec], bindings: Mapping[str, Binding], commits: Mapping[str, str]
) -> tuple[list[BackfillSpec], dict[str, Edit]]:
    """Each spec as it was applied, and the edits found (`commits`: spec path → the file's last commit)."""
    viewed: list[BackfillSpec] = []
    edits: dict[str, Edit] = {}
    for spec in specs:
        applied = _applied(bindings.get(spec.name))
        changes = () if applied is None else edited_fields(applied.identity, applied.chunked, spec)
        if not changes or applied is None:
            viewed.append(spec)
            continue
        edits[spec.name] = Edit(spec.name, changes, applied.commit, commits.get(spec.path))
        viewed.append(spec.with_identity({**spec.identity(), **applied.identity}))
    return viewed, edits


def _applied(binding: Binding | None) -> Applied | None:
    return None if binding is None else binding.applied


def hold_edited(plan: Plan, edits: Mapping[str, Edit]) -> Plan:
    """Every edited spec Blocked (its reductions excepted), each with its `edited-in-place` finding."""
    if not edits:
        return plan
    items = tuple(_held(item, edits[item.spec]) if item.spec in edits else item for item in plan.items)
    findings = sorted((*plan.findings, *_findings(items, edits)), key=Finding.sort_key)
    return replace(plan, items=items, findings=tuple(findings))


def _held(item: Item, edit: Edit) -> Item:
    if item.kind in REDUCTIONS:
        return replace(item, edited=edit.text())
    return replace(
        item,
        kind=Kind.BLOCKED,
        phase=Phase.BLOCKED,
        reason=edit.text(),
        error=True,
        request=None,
        awaiting_dry_run=False,
        held=item,
        edited=edit.text(),
    )


def _findings(items: Iterable[Item], edits: Mapping[str, Edit]) -> list[Finding]:
    return [
        Finding(FindingKind.EDITED_IN_PLACE, i.dag_id, f"{i.spec}: {edits[i.spec].text()}", i.spec, i.backfill_id)
        for i in items
        if i.spec in edits
    ]
