"""Validation per spec, not per pass (pure): an invalid spec file is Blocked alone with its located errors, and an
invalid policy holds what would start work, never what reduces it.

A pause, a cancel, a stop and the guards' pauses never wait on anything that is wrong with another file: the
planner plans every valid spec, `invalid_items` adds one Blocked item per invalid file (its backfill, if it has one,
is left as it is and keeps its place in its DAG's queue), and `hold_starts` turns every create and unpause into a
held item while the policy cannot be read.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from controller.core.model.binding import Binding, Phase
from controller.core.model.spec import InvalidSpec
from controller.core.plan.values import Finding, FindingKind, Item, Kind, Plan
from controller.core.plan.world import World

STARTS = frozenset({Kind.CREATE, Kind.UNPAUSE})  # what starts or restarts work: held under an invalid policy


def invalid_items(
    invalid: Sequence[InvalidSpec], world: World, valid: Collection[str]
) -> tuple[list[Item], list[Finding]]:
    """One Blocked item and one finding per invalid file; a name a valid file (or an earlier invalid one) holds is
    shown by the file's path, and never takes that spec's binding."""
    items: list[Item] = []
    findings: list[Finding] = []
    taken = set(valid)
    for spec in sorted(invalid, key=lambda s: s.path):
        own = spec.name not in taken
        label = spec.name if own else spec.path
        taken.add(label)
        binding = world.bindings.get(spec.name) if own else None
        dag_id = spec.dag_id or (binding.dag_id if binding is not None else "")
        item = Item(
            label,
            dag_id,
            Kind.BLOCKED,
            Phase.BLOCKED,
            spec.reason(),
            None if binding is None else binding.backfill_id,
            error=True,
            runs=None if binding is None else binding.runs,
            held=None if binding is None else _as_recorded(label, dag_id, binding),
        )
        items.append(item)
        findings.append(
            Finding(FindingKind.INVALID_SPEC, dag_id, f"{spec.path}: {spec.reason()}", label, item.backfill_id)
        )
    return items, findings


def _as_recorded(label: str, dag_id: str, binding: Binding) -> Item:
    """What the store last recorded of an invalid file's spec (never planned while the file is invalid)."""
    return Item(label, dag_id, Kind.NOOP, binding.phase, binding.reason, binding.backfill_id, runs=binding.runs)


def hold_starts(plan: Plan, policy_errors: Sequence[str], policy_path: str) -> Plan:
    """Under a policy with errors nothing new starts: every create and unpause (and a create's dry run) is held;
    pauses, cancels and the guards' pauses are applied as planned."""
    if not policy_errors:
        return plan
    more = f" (and {len(policy_errors) - 1} more)" if len(policy_errors) > 1 else ""
    cause = f"{policy_errors[0]}{more}"
    reason = f"held: {policy_path} is invalid ({cause}); nothing new starts until it is fixed"
    items = tuple(_held(item, reason) for item in plan.items)
    message = f"{cause}: every create and resume is held until the policy is fixed; pauses, cancels and stops apply"
    finding = Finding(FindingKind.INVALID_POLICY, "", message, cause=cause)
    return replace(plan, items=items, findings=tuple(sorted((*plan.findings, finding), key=Finding.sort_key)))


def _held(item: Item, reason: str) -> Item:
    if item.kind not in STARTS and not item.awaiting_dry_run:
        return item
    return replace(
        item,
        kind=Kind.BLOCKED,
        phase=Phase.PAUSED if item.kind is Kind.UNPAUSE else Phase.BLOCKED,  # a held resume stays as it is
        reason=reason,
        error=True,
        request=None,
        awaiting_dry_run=False,
        held=item,
    )
