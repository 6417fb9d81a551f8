"""Another environment's Airflow settings come only from the variables the policy names for it."""

from __future__ import annotations

import pytest

from controller.commands.settings import Settings
from controller.core.model.stages import PRODUCTION, Environment
from controller.errors import ConfigError

ENV = {
    "BACKFILLCTL_AIRFLOW_URL": "http://prod:8080",
    "BACKFILLCTL_AIRFLOW_USERNAME": "prod-user",
    "BACKFILLCTL_AIRFLOW_PASSWORD": "prod-secret",
    "STAGING_URL": "http://staging:8080/",
    "STAGING_TOKEN": "staging-token",
}


def test_staging_reads_its_own_variables_and_never_borrows_productions_login() -> None:
    settings = Settings.from_env(ENV)
    staging = settings.for_environment(Environment("staging", "STAGING_URL", token_env="STAGING_TOKEN"))
    assert (staging.airflow_url, staging.airflow_username, staging.airflow_password) == (
        "http://staging:8080",
        None,
        None,
    )
    assert staging.airflow_token is not None
    assert staging.airflow_token.reveal() == "staging-token"
    assert staging.store_url == settings.store_url  # one store for every environment
    production = settings.for_environment(Environment(PRODUCTION, rehearse_in="staging"))
    assert (production.airflow_url, production.airflow_username, production.airflow_token) == (
        "http://prod:8080",
        "prod-user",
        None,
    )


def test_a_missing_or_bad_staging_url_names_its_own_variable() -> None:
    settings = Settings.from_env(ENV)
    with pytest.raises(ConfigError) as missing:
        settings.for_environment(Environment("staging", "NOT_SET_URL", token_env="STAGING_TOKEN")).airflow_address()
    assert missing.value.message == "NOT_SET_URL is not set"
    bad = Settings.from_env({**ENV, "STAGING_URL": "ftp://staging"})
    with pytest.raises(ConfigError) as wrong:
        bad.for_environment(Environment("staging", "STAGING_URL", token_env="STAGING_TOKEN")).airflow_address()
    assert wrong.value.message.startswith("STAGING_URL='ftp://staging' ")
    assert "staging-token" not in repr(settings)
