"""The named steps that refine a plan after `make_plan` (octoDNS's processors), in one declared order.

`plan`, `status` and `reconcile` run this one list, in this order (`plan` applies the consumers rule on the loads
it shows, `observe.load`, with the same reads; `plan` looks ahead afresh, reconcile once a spec version, `status`
only from what reconcile kept). A step that decides takes starts away only, so the plan keeps the checksum of the
plan `make_plan` made (`Plan.unmetered`): a reviewed checksum does not depend on which steps ran.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from controller.commands.reconcile.consumers import Consumers
from controller.commands.reconcile.lookahead import Memo, look_ahead
from controller.commands.reconcile.observe import Observer
from controller.core.model.binding import Approval
from controller.core.model.evidence import GateDecision
from controller.core.model.policy import Policy
from controller.core.model.spec import BackfillSpec
from controller.core.plan.provenance import Gate, gate_plan
from controller.core.plan.values import Plan
from controller.core.plan.world import World


@dataclass(frozen=True, slots=True)
class Refining:
    """What the steps read, gathered by the pass: the policy, the specs and World it planned from, the pass's
    consumers reads, the gate with its decisions (None: not in git), and how to look ahead."""

    policy: Policy
    specs: Sequence[BackfillSpec]
    world: World
    consumers: Consumers
    observer: Observer | None  # None: no dry run (`status`: the look-ahead says only what reconcile kept)
    gate: Gate | None = None
    decisions: Mapping[str, GateDecision] = field(default_factory=dict)
    only: Collection[str] | None = None  # look ahead for these specs only (the pull request's own)
    memo: Memo | None = None  # the judgements kept (reconcile's, `status`'s); None: judged afresh (`plan`)


Approvals = Mapping[str, Approval]  # the gate's: who approved each spec's change


def _consumers(plan: Plan, refining: Refining) -> tuple[Plan, Approvals]:
    return refining.consumers.refuse(plan, refining.policy), {}


def _gated(plan: Plan, refining: Refining) -> tuple[Plan, Approvals]:
    if refining.gate is None:
        return plan, {}
    return gate_plan(plan, refining.gate, refining.decisions)


def _look_ahead(plan: Plan, refining: Refining) -> tuple[Plan, Approvals]:
    ahead = look_ahead(
        plan,
        refining.specs,
        policy=refining.policy,
        world=refining.world,
        observer=refining.observer,
        only=refining.only,
        memo=refining.memo,
    )
    return ahead, {}


@dataclass(frozen=True, slots=True)
class Step:
    """One refining step: its name, what it reads, whether reconcile applies what it decides, and its work."""

    name: str
    reads: str
    decides: bool  # False: shown only (a queued spec's look-ahead is no decision)
    run: Callable[[Plan, Refining], tuple[Plan, Approvals]]


CONSUMERS = Step("consumers", "each DAG's assets and their consumers in Airflow (one read a DAG)", True, _consumers)
GATE = Step("gate", "git, the evidence documents and the store's gate decisions", True, _gated)
LOOK_AHEAD = Step("look-ahead", "a dry run of each never-applied spec queued behind another", False, _look_ahead)
STEPS = (CONSUMERS, GATE, LOOK_AHEAD)  # the order every view runs them in
DECIDING = tuple(s for s in STEPS if s.decides)


@dataclass(frozen=True, slots=True)
class Refined:
    plan: Plan
    approvals: Approvals


def refine(plan: Plan, refining: Refining, steps: Collection[Step]) -> Refined:
    """`plan` through each of `steps`, in the declared order whatever order they are given in."""
    approvals: Approvals = {}
    for step in STEPS:
        if step in steps:
            plan, found = step.run(plan, refining)
            approvals = {**approvals, **found}
    return Refined(plan, approvals)
