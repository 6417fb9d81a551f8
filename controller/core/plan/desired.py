"""What a pass plans from (pure): the valid specs as they were applied, each invalid file, the edits found, and the
policy with its errors; `plan_desired` is `make_plan` followed by the steps that block edited specs and hold what
would start work under an invalid policy.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from controller.core.model.policy import Policy
from controller.core.model.spec import BackfillSpec, InvalidSpec
from controller.core.plan.drains import drained_outcomes
from controller.core.plan.edits import Edit, hold_edited
from controller.core.plan.invalid import hold_starts
from controller.core.plan.queue import make_plan
from controller.core.plan.values import AtRest, Plan
from controller.core.plan.world import World


@dataclass(frozen=True, slots=True)
class Desired:
    specs: tuple[BackfillSpec, ...]  # valid, in queue order; an edited one as it was applied (`edits`)
    policy: Policy
    invalid: tuple[InvalidSpec, ...] = ()
    edits: Mapping[str, Edit] = field(default_factory=dict)
    policy_errors: tuple[str, ...] = ()  # the policy's located errors: creates and resumes are held
    policy_path: str = "specs/policy.yaml"
    policy_text: str | None = field(default=None, repr=False)  # the valid policy file, recorded with the commit
    at_rest: AtRest = field(default_factory=AtRest)  # finished specs not loaded: the plan counts them (`rest`)


def plan_desired(desired: Desired, world: World) -> Plan:
    plan = drained_outcomes(make_plan(desired.specs, desired.policy, world, invalid=desired.invalid), desired.policy)
    held = hold_starts(hold_edited(plan, desired.edits), desired.policy_errors, desired.policy_path)
    return replace(held, at_rest=desired.at_rest) if desired.at_rest.count else held
