"""Issue 44, the scope (pure): which DAGs a specs repository may touch, and which scopes overlap."""

from __future__ import annotations

import pytest

from controller.core.model.policy import Policy, parse_policy
from controller.core.model.scope import Scope, globs_overlap, scope_from_json
from controller.core.rules.scope import EVERY_DAG, conflict, outside, scope_line, tags_unchecked


def test_a_dag_is_in_scope_by_its_id_glob_or_one_of_its_tags() -> None:
    scope = Scope(("fin_*", "ledger"), ("finance",))
    assert scope.covers("fin_daily", None) is True
    assert scope.covers("ledger", ()) is True
    assert scope.covers("ledger2", ("finance", "x")) is True
    assert scope.covers("ledger2", ("x",)) is False
    assert scope.covers("ledger2", ()) is False
    assert scope.covers("ledger2", None) is None  # only the tags could tell
    assert Scope(("fin_*",)).covers("ads", None) is False  # no tags: the globs decide offline


def test_the_scope_is_said_as_plans_and_refusals_show_it() -> None:
    assert Scope(("a", "b_*"), ("t",)).text() == "dags [a, b_*], tags [t]"
    assert Scope((), ("t", "u")).text() == "tags [t, u]"
    assert Scope(("a",)).text() == "dags [a]"
    assert Scope().text() == "nothing"


def test_the_policy_reads_its_scope() -> None:
    policy = parse_policy({"version": 1, "scope": {"dags": ["fin_*"], "tags": ["finance"]}}, "specs/policy.yaml")
    assert policy.scope == Scope(("fin_*",), ("finance",))
    assert parse_policy({"version": 1, "scope": {"tags": ["x"]}}, "p").scope == Scope((), ("x",))
    assert parse_policy({"version": 1}, "p").scope is None


@pytest.mark.parametrize(
    ("first", "second", "overlap"),
    [
        ("fin_*", "fin_*", True),
        ("fin_*", "fin_daily", True),
        ("fin_daily", "fin_*", True),
        ("fin_daily", "fin_weekly", False),
        ("fin_*", "ads_*", False),
        ("fin_*", "f*", True),
        ("*_daily", "*_weekly", False),
        ("*_daily", "fin_*", True),
        ("fin_?", "fin_ab", False),
        ("fin_?", "fin_a", True),
        ("a*b", "a*c", False),
        ("ads", "*", True),
        ("[ab]x", "cx", False),
        ("x[ab]", "x*", True),
        ("*ab", "*xb", False),  # their tails differ
        ("*ab", "*b", True),
        ("*[ab]", "*c", True),  # a set ends the literal tail: errs towards overlap
        ("x[ab]", "y*", False),
        ("a*", "*b", True),
    ],
)
def test_two_globs_overlap_when_some_dag_id_could_match_both(first: str, second: str, overlap: bool) -> None:
    assert globs_overlap(first, second) is overlap
    assert globs_overlap(second, first) is overlap


def test_scopes_overlap_by_a_shared_tag_or_overlapping_globs() -> None:
    fin = Scope(("fin_*",), ("finance",))
    assert fin.overlap(Scope(("ads_*",), ("ads",))) is None
    assert fin.overlap(Scope(("ads_*",), ("finance",))) == "tag finance"
    assert fin.overlap(Scope(("fin_daily",))) == "dags fin_* and fin_daily"
    assert fin.overlap(Scope(("fin_*",))) == "dags fin_*"
    assert fin.overlap(Scope((), ("ads",))) is None  # tags and globs: only Airflow could tell, not compared


def test_a_scope_round_trips_through_the_store_and_a_foreign_row_reads_as_none() -> None:
    scope = Scope(("a_*",), ("t",))
    assert scope_from_json(scope.to_json()) == scope
    assert scope.to_json() == '{"dags": ["a_*"], "tags": ["t"]}'
    for bad in ("not json", "[1]", '{"dags": "a"}', '{"dags": [1]}', '{"tags": [null]}'):
        assert scope_from_json(bad) is None
    assert scope_from_json("{}") == Scope()


def test_a_spec_outside_the_scope_is_refused_naming_the_scope_and_the_policy() -> None:
    policy = Policy(scope=Scope(("fin_*",)), path="specs/policy.yaml")
    assert outside("fin_daily", None, policy) is None
    assert outside("ads_daily", None, policy) == (
        "DAG ads_daily is outside this repository's scope (dags [fin_*]; specs/policy.yaml)"
    )
    assert outside("anything", None, Policy()) is None  # no scope: a warning on the policy, nothing per spec
    tagged = Policy(scope=Scope(("fin_*",), ("finance",)), path="p.yaml")
    assert outside("ads", None, tagged) is None  # not known offline
    assert tags_unchecked("ads", tagged) == (
        "DAG ads matches none of the scope's dags (p.yaml); whether it carries one of its tags [finance] needs "
        "Airflow: the tag check was skipped"
    )
    assert tags_unchecked("fin_x", tagged) is None
    assert tags_unchecked("ads", Policy(scope=Scope((), ("finance", "ledger")))) == (
        "DAG ads matches none of the scope's dags (the policy); whether it carries one of its tags [finance, ledger] "
        "needs Airflow: the tag check was skipped"
    )
    assert tags_unchecked("ads", policy) is None
    assert tags_unchecked("ads", Policy()) is None
    assert outside("ads", ("ads", "core"), tagged) == (
        "DAG ads is outside this repository's scope (dags [fin_*], tags [finance]; p.yaml) (its tags: ads, core)"
    )
    assert outside("ads", (), tagged) == (
        "DAG ads is outside this repository's scope (dags [fin_*], tags [finance]; p.yaml) (its tags: none)"
    )
    assert outside("ads", ("finance",), tagged) is None
    assert outside("ads", ("x",), Policy(scope=Scope(("fin_*",)))) == (
        "DAG ads is outside this repository's scope (dags [fin_*]; the policy)"
    )


def test_plan_says_which_scope_applies() -> None:
    assert scope_line(Policy(scope=Scope(("fin_*",)), path="specs/policy.yaml")) == (
        "scope: dags [fin_*] (specs/policy.yaml)"
    )
    assert scope_line(Policy()) == "scope: not set in the policy (every DAG; set `scope` to bound this repository)"


def test_a_store_refuses_a_scope_overlapping_another_logins() -> None:
    recorded = {"team-a": Scope(("fin_*",)).to_json(), "team-c": Scope(("ops_*",)).to_json()}
    assert conflict("team-b", Scope(("ads_*",)), recorded) is None
    assert conflict("team-b", Scope(("fin_daily",)), recorded) == ("team-a", "dags fin_daily and fin_*")
    assert conflict("team-a", Scope(("fin_*", "x")), recorded) is None  # its own row: a team may change its scope
    assert conflict("team-b", EVERY_DAG, recorded) == ("team-a", "dags * and fin_*")
    assert conflict("team-b", Scope(("zz",)), {"team-a": "garbage"}) == ("team-a", "dags zz and *")  # fail closed
    assert conflict("team-b", Scope(("ops_1",)), recorded) == ("team-c", "dags ops_1 and ops_*")
    # its own row is passed over, not the end of the search
    assert conflict("team-a", Scope(("ops_1",)), recorded) == ("team-c", "dags ops_1 and ops_*")
