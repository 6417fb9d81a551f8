"""Is another environment production? Its URL once normalised, and a DAG's version ids, which a name cannot fake
(pure rules; the refusals at run time are in tests/commands/reconcile/test_stages_fake.py)."""

from __future__ import annotations

import pytest

from controller.core.model.stages import PRODUCTION_DEFAULTS, Environment
from controller.core.rules.environments import (
    fingerprint_refusal,
    normalised_url,
    prefix,
    same_airflow,
    url_refusal,
    variable_problems,
)


@pytest.mark.parametrize(
    ("url", "normal"),
    [
        ("http://airflow:8080", "http://airflow:8080"),
        ("http://airflow:8080/", "http://airflow:8080"),
        ("HTTP://Airflow.Example.COM:8080//", "http://airflow.example.com:8080"),
        ("http://airflow:80/", "http://airflow"),
        ("https://airflow:443", "https://airflow"),
        ("https://airflow:80", "https://airflow:80"),  # not https's default port
        ("http://airflow:443", "http://airflow:443"),
        ("http://airflow.example.com.:8080", "http://airflow.example.com:8080"),  # the root's dot
        ("http://user:secret@airflow:8080/api/", "http://airflow:8080/api"),  # no user information
        ("http://airflow:8080/Prefix", "http://airflow:8080/Prefix"),  # a path keeps its case
        ("  http://airflow:8080  ", "http://airflow:8080"),
        ("http://[0:0:0:0:0:0:0:1]:8080", "http://[::1]:8080"),  # one form of an address
        ("http://[::1]", "http://[::1]"),
        ("http://127.000.0.1:8080", "http://127.000.0.1:8080"),  # not an address Python reads: a name
        ("http://airflow:port", "http://airflow"),  # a port that is no number is refused where it is read
        ("http://airflow?x=1#f", "http://airflow"),
        ("http://airflow/APIX/", "http://airflow/APIX"),  # only slashes come off the path
        ("http:///api", "http:///api"),  # no host at all
    ],
)
def test_a_url_normalises_to_the_server_it_reaches(url: str, normal: str) -> None:
    assert normalised_url(url) == normal


@pytest.mark.parametrize(
    "staging",
    [
        "http://prod-airflow:8080/",
        "HTTP://PROD-AIRFLOW:8080",
        "http://prod-airflow:8080//",
        "http://u:p@prod-airflow:8080",
    ],
)
def test_an_environment_at_productions_url_is_production(staging: str) -> None:
    assert url_refusal("staging", staging, "http://prod-airflow:8080") == (
        "environment 'staging' is production: its Airflow URL is production's (http://prod-airflow:8080); nothing "
        "is created in either"
    )


def test_default_ports_are_the_same_server() -> None:
    assert url_refusal("qa", "https://prod/", "https://prod:443") == (
        "environment 'qa' is production: its Airflow URL is production's (https://prod); nothing is created in either"
    )
    assert url_refusal("qa", "http://prod:8080", "http://prod:8081") is None
    assert url_refusal("qa", "https://prod", "http://prod") is None
    assert url_refusal("qa", "http://prod/a", "http://prod/b") is None


def test_the_version_ids_tell_two_airflows_apart() -> None:
    assert same_airflow(frozenset({"a", "b"}), frozenset({"b", "c"})) is True
    assert same_airflow(frozenset({"a"}), frozenset({"c"})) is False
    assert same_airflow(frozenset(), frozenset({"c"})) is None
    assert same_airflow(frozenset({"a"}), frozenset()) is None
    assert fingerprint_refusal("staging", "orders", frozenset({"a"}), frozenset({"c", "d"})) is None


def test_production_under_another_name_is_refused_naming_a_shared_id() -> None:
    assert fingerprint_refusal("staging", "orders", frozenset({"v-5", "v-9"}), frozenset({"v-9", "v-1"})) == (
        "environment 'staging' is production under another name: DAG orders has the same version ids in both (e.g. "
        "v-9), and each metadata database makes its own; nothing is created in either"
    )


def test_an_environment_that_cannot_be_told_apart_is_refused_and_says_where_the_versions_are_missing() -> None:
    assert fingerprint_refusal("staging", "orders", frozenset(), frozenset({"v"})) == (
        "environment 'staging' cannot be told apart from production: DAG orders has no versions in staging; nothing "
        "is created in either"
    )
    assert fingerprint_refusal("staging", "orders", frozenset({"v"}), frozenset()) == (
        "environment 'staging' cannot be told apart from production: DAG orders has no versions in production; "
        "nothing is created in either"
    )


def test_an_environments_prefix_and_names() -> None:
    assert prefix("qa-east_2") == "BACKFILLCTL_QA_EAST_2_"
    assert Environment("production").names == PRODUCTION_DEFAULTS
    assert Environment("production", token_env="BACKFILLCTL_PRODUCTION_T").names == (
        "BACKFILLCTL_AIRFLOW_URL",
        "BACKFILLCTL_PRODUCTION_T",
        "BACKFILLCTL_AIRFLOW_USERNAME",
        "BACKFILLCTL_AIRFLOW_PASSWORD",
    )
    assert Environment("staging", "BACKFILLCTL_STAGING_URL").names == ("BACKFILLCTL_STAGING_URL", "", "", "")


def test_variables_of_its_own_pass() -> None:
    staging = Environment(
        "staging", "BACKFILLCTL_STAGING_URL", "BACKFILLCTL_STAGING_T", "BACKFILLCTL_STAGING_U", "BACKFILLCTL_STAGING_P"
    )
    assert list(variable_problems(staging, PRODUCTION_DEFAULTS, (staging,))) == []  # itself is no other
    production = Environment("production", *PRODUCTION_DEFAULTS)
    assert list(variable_problems(production, PRODUCTION_DEFAULTS)) == []
    assert list(variable_problems(Environment("production", token_env="BACKFILLCTL_PRODUCTION_T"), ())) == []


def test_one_problem_per_key_the_borrowed_one_first() -> None:
    both = Environment("staging", "BACKFILLCTL_AIRFLOW_URL", "BACKFILLCTL_AIRFLOW_URL")
    found = [(p.environment, p.key, p.message) for p in variable_problems(both, PRODUCTION_DEFAULTS)]
    assert found == [
        (
            "staging",
            "airflow_url_env",
            "environment 'staging' reads its Airflow URL from BACKFILLCTL_AIRFLOW_URL, as production does: its "
            "backfills would run in production's Airflow",
        ),
        (
            "staging",
            "token_env",
            "environment 'staging' reads its token from BACKFILLCTL_AIRFLOW_URL, as production does: production's "
            "token would be sent to staging's Airflow",
        ),
    ]
