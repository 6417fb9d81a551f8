"""`plan` looks ahead in the queues: a spec not yet applied that waits behind another spec on its DAG
gets its dry run now, so a create reconcile will refuse when it reaches the head (more runs than expected_runs or
the policy's max_runs) fails the pull request's check (exit 5), not a reconcile days after the merge.

The count is today's: the specs ahead may change it by the time this one starts (a `failed` spec's dates that the
one ahead re-runs successfully, say). The plan says so. Only `plan` looks ahead: a reconcile pass does not dry-run
its queues (their cost every pass, and reconcile judges each spec when it reaches the head anyway); the plan's
decisions and checksum stay reconcile's (a queued item is no decision).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import replace

from controller.commands.applied import applied_yet
from controller.commands.observe import Observer
from controller.core.model.binding import Binding, Phase
from controller.core.model.policy import Policy
from controller.core.model.spec import BackfillSpec
from controller.core.plan.admission import run_limit
from controller.core.plan.values import Item, Kind, Plan
from controller.core.plan.world import World

AHEAD = "the specs ahead may change the count by then"


Judged = tuple[str, str | None, int | None, int | None]  # the reason's addition, the refusal, runs to create, in range
Memo = dict[tuple[str, str], Judged | None]  # (spec, digest) → its judgement (the watch's: one dry run a version)


def look_ahead(
    plan: Plan,
    specs: Sequence[BackfillSpec],
    *,
    policy: Policy,
    world: World,
    observer: Observer,
    only: Collection[str] | None = None,
    memo: Memo | None = None,
) -> Plan:
    """`plan` with each queued, never applied spec (of `only`, the PR's own, when given) dry-run now; one whose
    count is over its limit gets `refused_at_head` (exit 5) and says why. With `memo`, a spec version judged
    once is not dry-run again (the watch's status page; `plan` and `status` judge afresh)."""
    by_name = {s.name: s for s in specs}
    waiting = [i for i in plan.items if _ahead_of_its_turn(i, world, only) and i.spec in by_name]
    if not waiting:
        return plan
    memo = {} if memo is None else memo
    looked = {}
    for item in waiting:
        spec = by_name[item.spec]
        key = (spec.name, spec.digest)
        if key not in memo:
            memo[key] = _judged(spec, policy, world, observer)
        looked[item.spec] = _with(item, memo[key])
    return replace(plan, items=tuple(looked.get(i.spec, i) for i in plan.items))


def _ahead_of_its_turn(item: Item, world: World, only: Collection[str] | None) -> bool:
    """Queued behind another backfill on its DAG, never dry-run (a guard's queue was), never applied."""
    return (
        item.kind is Kind.WAIT
        and item.phase is Phase.QUEUED
        and item.guard is None
        and item.runs_to_create is None
        and not _applied(world.bindings.get(item.spec))  # a queued spec's binding records only its phase
        and (only is None or item.spec in only)
    )


def _applied(binding: Binding | None) -> bool:
    return binding is not None and applied_yet(binding)


def _judged(spec: BackfillSpec, policy: Policy, world: World, observer: Observer) -> Judged | None:
    dry = observer.dry_runs.dry_run(spec, world.observations)
    if dry.error is not None:
        return f"its dry run now failed: {dry.error}", None, None, None
    limit = run_limit(spec, policy, len(dry.dates))
    if limit is None:
        return None
    refusal = f"{limit} (dry run now; {AHEAD})"
    return f"reconcile will refuse it at the head: {refusal}", refusal, len(dry.dates), dry.in_range


def _with(item: Item, judged: Judged | None) -> Item:
    if judged is None:
        return item
    said, refusal, to_create, in_range = judged
    if refusal is None:
        return replace(item, reason=f"{item.reason}; {said}")
    return replace(
        item,
        reason=f"{item.reason}; {said}",
        refused_at_head=refusal,
        runs_to_create=to_create,
        runs_in_range=in_range,
    )
