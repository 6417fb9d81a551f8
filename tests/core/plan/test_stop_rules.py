"""Who may stop and lift, and what a stop names (pure): the target checks, the lookup of a stop in force, and the
owners of a downstream system; each refusal says what, where and how to go on (exact messages)."""

from __future__ import annotations

from datetime import timedelta

import pytest

from controller.core.model.guards import Budget
from controller.core.model.policy import Policy
from controller.core.model.stops import EmergencyStop, EmergencyStopKind, StopSource
from controller.core.plan.stops import check_target, find_stop, may_lift, may_stop, owners_of_system
from controller.errors import ExitCode, Refused, UsageError
from tests.core.plan.test_plan import NOW, T0, spec

POLICY = Policy(downstream=(Budget("warehouse", 4, owners=("dana",)), Budget("lake", 2)))
SPECS = [spec("a"), spec("b", downstream=("warehouse",))]


def stop(id_: int, kind: EmergencyStopKind, target: str) -> EmergencyStop:
    return EmergencyStop(id_, kind, target, "why", "oncall", StopSource.CLI, T0, NOW + timedelta(hours=1))


# --- check_target ---------------------------------------------------------------------------------------


def test_a_stop_may_name_a_spec_a_bound_spec_a_system_or_everything() -> None:
    check_target(SPECS, frozenset(), POLICY, EmergencyStopKind.SPEC, "a")
    check_target(SPECS, frozenset({"gone"}), POLICY, EmergencyStopKind.SPEC, "gone")  # its file is invalid now
    check_target(SPECS, frozenset(), POLICY, EmergencyStopKind.DOWNSTREAM, "lake")
    check_target([], frozenset(), Policy(), EmergencyStopKind.ALL, "*")


def test_a_stop_naming_no_spec_is_a_usage_error_listing_the_specs() -> None:
    with pytest.raises(UsageError) as refused:
        check_target(SPECS, frozenset({"c"}), POLICY, EmergencyStopKind.SPEC, "typo")
    assert (refused.value.message, refused.value.hint, refused.value.exit_code) == (
        "stop typo: no spec named 'typo' in the specs directory",
        "specs: a, b",
        ExitCode.USAGE,
    )
    many = [spec(f"s{i}") for i in range(7)]
    with pytest.raises(UsageError, match=r"^stop x: ") as shown:
        check_target(many, frozenset(), POLICY, EmergencyStopKind.SPEC, "x")
    assert shown.value.hint == "specs: s0, s1, s2, s3, s4"  # the first five, sorted
    with pytest.raises(UsageError) as none:
        check_target([], frozenset(), POLICY, EmergencyStopKind.SPEC, "x")
    assert none.value.hint == "specs: none"


def test_a_stop_naming_no_system_is_a_usage_error_listing_the_systems() -> None:
    with pytest.raises(UsageError) as refused:
        check_target(SPECS, frozenset(), POLICY, EmergencyStopKind.DOWNSTREAM, "a")  # a spec is no system
    assert (refused.value.message, refused.value.hint) == (
        "stop --downstream a: the policy has no downstream system 'a'",
        "systems in specs/policy.yaml: lake, warehouse",
    )
    with pytest.raises(UsageError) as none:
        check_target(SPECS, frozenset(), Policy(), EmergencyStopKind.DOWNSTREAM, "lake")
    assert none.value.hint == "systems in specs/policy.yaml: none"


# --- find_stop ------------------------------------------------------------------------------------------

STOPS = [stop(3, EmergencyStopKind.DOWNSTREAM, "warehouse"), stop(5, EmergencyStopKind.SPEC, "a")]


@pytest.mark.parametrize(("name", "found"), [("warehouse", 3), ("a", 5), ("#5", 5), ("3", 3)])
def test_a_stop_is_found_by_its_target_or_its_id(name: str, found: int) -> None:
    assert find_stop(STOPS, name).id == found


def test_a_stop_not_in_force_is_a_usage_error_listing_those_in_force() -> None:
    with pytest.raises(UsageError) as missing:
        find_stop(STOPS, "#4")
    assert (missing.value.message, missing.value.hint) == (
        "stop lift #4: no stop in force names '#4'",
        "stops in force: #3 warehouse, #5 a",
    )
    with pytest.raises(UsageError) as none:
        find_stop([], "a")
    assert none.value.hint == "stops in force: none"


# --- may_lift, may_stop ---------------------------------------------------------------------------------


def test_an_owner_by_login_or_team_may_lift_and_nobody_else() -> None:
    may_lift("Dana", frozenset(), ("dana",), "lift stop #3")  # logins compare case-insensitively
    may_lift("eve", frozenset({"data-eng"}), ("dana", "data-eng"), "lift stop #3")
    with pytest.raises(Refused) as refused:
        may_lift("eve", frozenset({"web"}), ("dana", "data-eng"), "lift stop #3")
    assert (refused.value.message, refused.value.hint, refused.value.exit_code) == (
        "lift stop #3: only dana, data-eng may; the actor is eve",
        "ask an owner; a stop also lifts at its expiry or when a reviewed `resume` names it "
        "(on-call logins may stop, never lift)",
        ExitCode.REFUSED,
    )


def test_a_stop_nobody_owns_is_lifted_by_nobody_by_hand() -> None:
    with pytest.raises(Refused) as refused:
        may_lift("dana", frozenset({"dana"}), (), "lift stop #3")
    assert refused.value.message == "lift stop #3: only nobody by hand may; the actor is dana"


def test_anyone_may_stop_what_nobody_owns_and_owners_or_teams_what_they_own() -> None:
    may_stop("eve", frozenset(), (), "stop spec a")
    may_stop("DANA", frozenset(), ("dana",), "stop spec a")
    may_stop("eve", frozenset({"oncall"}), ("dana", "oncall"), "stop spec a")
    with pytest.raises(Refused) as refused:
        may_stop("eve", frozenset({"web"}), ("dana", "oncall"), "stop downstream warehouse")
    assert (refused.value.message, refused.value.hint) == (
        "stop downstream warehouse: only dana, oncall may; the actor is eve",
        "ask an owner or the on-call, or pause the backfill in Airflow (the next pass records it as a stop)",
    )


# --- owners_of_system -----------------------------------------------------------------------------------


def test_the_owners_of_a_system_and_a_system_the_policy_lacks() -> None:
    assert (owners_of_system(POLICY, "warehouse"), owners_of_system(POLICY, "lake")) == (["dana"], [])
    with pytest.raises(UsageError) as missing:
        owners_of_system(POLICY, "mart")
    assert missing.value.message == "--owners mart: the policy has no downstream system 'mart'"
