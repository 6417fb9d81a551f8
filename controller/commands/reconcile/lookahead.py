"""Looking ahead in the queues: a spec not yet applied that waits behind another spec on its DAG gets its dry run
before its turn, so a create reconcile will refuse when it reaches the head (more runs than expected_runs or the
policy's max_runs) is said early: `plan` fails the pull request's check (exit 5), not a reconcile days after the merge.

The count is of its day: the specs ahead may change it by the time this one starts (a `failed` spec's dates that the
one ahead re-runs successfully, say), and every view says so. `plan` judges afresh ("dry run now"). Reconcile judges
each spec version once and keeps the judgement in its binding (`Ahead`: one dry run a version, not one a pass);
`status` and the status page say what it kept, with its time ("dry run at …"), and make no dry run of their own. The
plan's decisions and checksum stay reconcile's (a queued item is no decision).
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from controller.commands.reconcile.applied import applied_yet
from controller.commands.reconcile.observe import Observer
from controller.core.model.binding import Ahead, Binding, Phase
from controller.core.model.policy import Policy
from controller.core.model.spec import BackfillSpec, format_utc
from controller.core.plan.admission import run_limit
from controller.core.plan.values import Item, Kind, Plan
from controller.core.plan.world import World
from controller.core.rules.selection import max_backfills, merge_allowed, ranges_over

AHEAD = "the specs ahead may change the count by then"

Memo = dict[tuple[str, str], Ahead]  # (spec, digest) → its judgement: one dry run a spec version
RETRY_FAILED = timedelta(minutes=10)  # a failed look-ahead dry run is tried again after this, not every pass


def look_ahead(
    plan: Plan,
    specs: Sequence[BackfillSpec],
    *,
    policy: Policy,
    world: World,
    observer: Observer | None,
    only: Collection[str] | None = None,
    memo: Memo | None = None,
) -> Plan:
    """`plan` with each queued, never applied spec (of `only`, the PR's own, when given) judged: from `memo` when
    its version was judged before (said with the time of that dry run), else by a dry run now (none without an
    `observer`: `status` says only what was kept). A spec over its limit gets `refused_at_head` and says why."""
    by_name = {s.name: s for s in specs}
    waiting = [i for i in plan.items if _ahead_of_its_turn(i, world, only) and i.spec in by_name]
    if not waiting:
        return plan
    fresh = memo is None
    memo = {} if memo is None else memo
    looked = {}
    for item in waiting:
        spec = by_name[item.spec]
        key = (spec.name, spec.digest)
        known = memo.get(key)
        if known is not None and not (observer is not None and _retry_due(known, world.now)):
            looked[item.spec] = _with(item, spec, policy, known, fresh=fresh)
        elif observer is not None:
            memo[key] = _judged(spec, world, observer)
            looked[item.spec] = _with(item, spec, policy, memo[key], fresh=fresh)
    return replace(plan, items=tuple(looked.get(i.spec, i) for i in plan.items))


def _retry_due(ahead: Ahead, now: datetime) -> bool:
    """A failed dry run is tried again once RETRY_FAILED has passed since it (an unreadable time: now)."""
    if not ahead.failed:
        return False
    try:
        return now - datetime.fromisoformat(ahead.at) >= RETRY_FAILED
    except ValueError:
        return True


def kept(bindings: Mapping[str, Binding]) -> Memo:
    """The judgements reconcile kept in the bindings, by spec version."""
    return {(name, b.ahead.digest): b.ahead for name, b in bindings.items() if b.ahead is not None}


def _minutes(span: timedelta) -> int:
    return int(span.total_seconds() // 60)


def judged_now(memo: Memo, specs: Sequence[BackfillSpec], bindings: Mapping[str, Binding]) -> dict[str, Ahead]:
    """The judgements of `memo` of each spec's current version that its binding does not keep yet, to record."""
    return {
        spec.name: memo[key]
        for spec in specs
        if (key := (spec.name, spec.digest)) in memo
        and (b := bindings.get(spec.name)) is not None
        and b.ahead != memo[key]
    }


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


def _judged(spec: BackfillSpec, world: World, observer: Observer) -> Ahead:
    """The spec version's dry run as kept, or why it failed. A `select` spec counts its selected intervals, as at
    the head (`core/plan/selecting.py`)."""
    dry = observer.dry_runs.dry_run(spec, world.observations)
    at = format_utc(world.now.replace(microsecond=0))
    if dry.error is not None:
        return Ahead(spec.digest, at, failed=dry.error)
    if spec.select is None:
        return Ahead(spec.digest, at, len(dry.dates), dry.in_range)
    if dry.selection is None:  # its runs were not read whole: the head says why it cannot be planned
        return Ahead(spec.digest, at)
    chosen = dry.selection
    return Ahead(
        spec.digest, at, len(chosen.selected), chosen.intervals, len(chosen.sub_ranges), mergeable=chosen.mergeable
    )


def limit_of(ahead: Ahead, spec: BackfillSpec, policy: Policy) -> str | None:
    """Why reconcile will refuse the spec at the head by the policy of now: too many sub-ranges (`select`), or more
    runs than expected_runs or the policy's max_runs (None: within them, or its count not known)."""
    if ahead.runs_to_create is None:
        return None
    if ahead.sub_ranges is not None:
        limit = max_backfills(policy, spec.dag_id)
        over = ranges_over(_joined(ahead, limit, merge_allowed(policy, spec.dag_id)), ahead.runs_to_create, limit)
        if over is not None:
            return over
    return run_limit(spec, policy, ahead.runs_to_create)


def _joined(ahead: Ahead, limit: int, allowed: bool) -> int:
    """The backfills its selection makes at the head: its sub-ranges, or `limit` where `merge_sub_ranges` can join
    enough of them (the head re-counts the runs the joins re-run)."""
    ranges = ahead.sub_ranges or 0
    joinable = (ahead.mergeable or 0) if allowed else 0
    return limit if ranges > limit and ranges - limit <= joinable else ranges


def _with(item: Item, spec: BackfillSpec, policy: Policy, ahead: Ahead, *, fresh: bool) -> Item:
    words, refusal = said(ahead, spec, policy, fresh=fresh)
    if not words:
        return item
    if refusal is None:
        return replace(item, reason=f"{item.reason}; {words}")
    return replace(
        item,
        reason=f"{item.reason}; {words}",
        refused_at_head=refusal,
        runs_to_create=ahead.runs_to_create,
        runs_in_range=ahead.runs_in_range,
    )


def said(ahead: Ahead, spec: BackfillSpec, policy: Policy, *, fresh: bool) -> tuple[str, str | None]:
    """What every view adds to a queued spec's reason from its judgement ("": nothing to say), and the refusal at
    the head it foresees (None: none). `fresh`: judged by this run ("dry run now"), else kept ("dry run at …")."""
    when = "dry run now" if fresh else f"dry run at {ahead.at}"
    if ahead.failed:  # said; tried again RETRY_FAILED after it (`plan`: at its next run)
        again = "" if fresh else f" (tried again {_minutes(RETRY_FAILED)} min after it)"
        return f"its look-ahead {when} failed{again}: {ahead.failed}", None
    limit = limit_of(ahead, spec, policy)
    if limit is None:
        return "", None
    refusal = f"{limit} ({when}; {AHEAD})"
    return f"reconcile will refuse it at the head: {refusal}", refusal
