"""Each environment's Airflow settings come only from the variables the policy names for it: another environment
never borrows production's (or the controller's own secrets), and production's named variables are honoured."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.adapters.airflow import AirflowClient
from controller.adapters.store import Store
from controller.cli import main
from controller.commands.runtime import session
from controller.commands.runtime.environments import check_production, production_settings
from controller.commands.runtime.settings import Settings
from controller.core.model.policy import parse_policy
from controller.core.model.stages import PRODUCTION, Environment
from controller.errors import ConfigError
from tests.fakes.airflow import FakeAirflow

ENV = {
    "BACKFILLCTL_AIRFLOW_URL": "http://prod:8080",
    "BACKFILLCTL_AIRFLOW_USERNAME": "prod-user",
    "BACKFILLCTL_AIRFLOW_PASSWORD": "prod-secret",
    "BACKFILLCTL_STAGING_URL": "http://staging:8080/",
    "BACKFILLCTL_STAGING_TOKEN": "staging-token",
    "BACKFILLCTL_PRODUCTION_URL": "http://production.internal:8080/",
    "BACKFILLCTL_PRODUCTION_TOKEN": "production-token",
}
STAGING = Environment("staging", "BACKFILLCTL_STAGING_URL", token_env="BACKFILLCTL_STAGING_TOKEN")
NAMED = (
    "version: 1\nenvironments:\n"
    "  production: {airflow_url_env: BACKFILLCTL_PRODUCTION_URL, token_env: BACKFILLCTL_PRODUCTION_TOKEN}\n"
)


def test_staging_reads_its_own_variables_and_never_borrows_productions_login() -> None:
    settings = Settings.from_env(ENV)
    staging = settings.for_environment(STAGING)
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
    unset = Environment("staging", "BACKFILLCTL_STAGING_NOT_SET", token_env="BACKFILLCTL_STAGING_TOKEN")
    with pytest.raises(ConfigError) as missing:
        settings.for_environment(unset).airflow_address()
    assert missing.value.message == "BACKFILLCTL_STAGING_NOT_SET is not set"
    assert missing.value.hint is not None
    assert missing.value.hint.startswith("export BACKFILLCTL_STAGING_NOT_SET=http://host:port ")
    bad = Settings.from_env({**ENV, "BACKFILLCTL_STAGING_URL": "ftp://staging"})
    with pytest.raises(ConfigError) as wrong:
        bad.for_environment(STAGING).airflow_address()
    assert wrong.value.message.startswith("BACKFILLCTL_STAGING_URL='ftp://staging' ")
    assert "staging-token" not in repr(settings)


@pytest.mark.parametrize(
    ("key", "variable", "message"),
    [
        (
            "token_env",
            "BACKFILLCTL_AIRFLOW_TOKEN",  # production's default family, though production names another token
            "environment 'staging' reads its token from BACKFILLCTL_AIRFLOW_TOKEN: BACKFILLCTL_AIRFLOW_* are "
            "production's",
        ),
        (
            "token_env",
            "BACKFILLCTL_PRODUCTION_TOKEN",  # production's as the policy names it
            "environment 'staging' reads its token from BACKFILLCTL_PRODUCTION_TOKEN, as production does: "
            "production's token would be sent to staging's Airflow",
        ),
        (
            "token_env",
            "BACKFILLCTL_AUDIT_KEY",
            "environment 'staging' reads its token from BACKFILLCTL_AUDIT_KEY, the audit chain's key: it would be "
            "sent to staging's Airflow",
        ),
        (
            "airflow_url_env",
            "BACKFILLCTL_STORE_URL",
            "environment 'staging' reads its Airflow URL from BACKFILLCTL_STORE_URL, the store's address and "
            "password: it would be sent to staging's Airflow",
        ),
        (
            "token_env",
            "GITHUB_TOKEN",
            "environment 'staging' reads its token from GITHUB_TOKEN, which is not one of its own "
            "(BACKFILLCTL_STAGING_*)",
        ),
    ],
)
def test_another_environment_is_refused_anothers_secret_where_it_would_be_sent(
    key: str, variable: str, message: str
) -> None:
    """`validate` refuses such a policy; a policy read back from the store, or older, is refused again here."""
    production = Settings.from_env({**ENV, "BACKFILLCTL_AUDIT_KEY": "k" * 32}).for_production(
        parse_policy({"environments": {"production": {"token_env": "BACKFILLCTL_PRODUCTION_TOKEN"}}}, "policy.yaml")
    )
    staging = Environment("staging", **{"airflow_url_env": "BACKFILLCTL_STAGING_URL", key: variable})  # type: ignore[arg-type]
    with pytest.raises(ConfigError) as refused:
        production.for_environment(staging)
    assert refused.value.message == message


def test_productions_named_variables_are_honoured() -> None:
    settings = Settings.from_env(ENV)
    production = settings.for_production(
        parse_policy(
            {
                "environments": {
                    "production": {
                        "airflow_url_env": "BACKFILLCTL_PRODUCTION_URL",
                        "token_env": "BACKFILLCTL_PRODUCTION_TOKEN",
                    }
                }
            },
            "p.yaml",
        )
    )
    assert (production.airflow_url, production.airflow_username, production.names[:2]) == (
        "http://production.internal:8080",
        "prod-user",  # a key it leaves out is BACKFILLCTL_AIRFLOW_*'s
        ("BACKFILLCTL_PRODUCTION_URL", "BACKFILLCTL_PRODUCTION_TOKEN"),
    )
    assert production.airflow_token is not None
    assert production.airflow_token.reveal() == "production-token"
    assert settings.for_production(parse_policy({}, "p.yaml")) is settings  # nothing named: the defaults


def test_the_policy_in_the_specs_folder_names_production(tmp_path: Path) -> None:
    settings = Settings.from_env({**ENV, "BACKFILLCTL_SPECS_DIR": str(tmp_path)})
    assert production_settings(settings) is settings  # no policy file
    (tmp_path / "policy.yaml").write_text(NAMED)
    assert production_settings(settings).airflow_url == "http://production.internal:8080"
    (tmp_path / "policy.yaml").write_text(NAMED + "drift: sometimes\n")  # invalid: the last valid policy decides
    assert production_settings(settings).airflow_url == "http://prod:8080"
    last = parse_policy({"environments": {"production": {"airflow_url_env": "BACKFILLCTL_PRODUCTION_URL"}}}, "p")
    assert production_settings(settings, last).airflow_url == "http://production.internal:8080"


def test_a_pass_whose_policy_moved_production_is_refused() -> None:
    settings = Settings.from_env(ENV)
    check_production(settings, parse_policy({}, "p.yaml"))
    with pytest.raises(ConfigError) as refused:
        check_production(
            settings,
            parse_policy({"environments": {"production": {"airflow_url_env": "BACKFILLCTL_PRODUCTION_URL"}}}, "p.yaml"),
        )
    assert (refused.value.message, refused.value.hint) == (
        "the policy reads production's Airflow from BACKFILLCTL_PRODUCTION_URL (not BACKFILLCTL_AIRFLOW_URL): this "
        "command started with the others",
        "restart backfillctl: it reads production's variables from the policy when it starts",
    )


def test_plan_reaches_production_through_the_variables_the_policy_names(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    specs = tmp_path / "specs"
    specs.mkdir()
    (specs / "policy.yaml").write_text(NAMED)
    store = f"sqlite:///{tmp_path}/state.db"
    Store(store).close()
    for name, value in {**ENV, "BACKFILLCTL_SPECS_DIR": str(specs), "BACKFILLCTL_STORE_URL": store}.items():
        monkeypatch.setenv(name, value)
    reached: list[tuple[str | None, str | None]] = []
    fake = FakeAirflow()

    def client(settings: Settings, *, preflight: bool = True, lists_dags: bool = False) -> AirflowClient:
        token = settings.airflow_token.reveal() if settings.airflow_token else None
        reached.append((settings.airflow_url, token))
        return AirflowClient(settings.airflow_address(), token=settings.airflow_token, transport=fake.transport())

    monkeypatch.setattr(session, "make_client", client)
    assert main(["plan"]) == 0, capsys.readouterr().err
    assert reached == [("http://production.internal:8080", "production-token")]
