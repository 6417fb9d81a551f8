"""The one redaction of URLs and the checks of settings that travel in a request (pure functions)."""

from __future__ import annotations

import pytest

from controller.core.model.secret import (
    header_problem,
    redact_url,
    redact_urls,
    secret_parameter,
    text_problem,
    url_problem,
)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("http://user:CANARY@host:8080", "http://user:***@host:8080"),
        ("https://CANARY@github.com/o/r", "https://***@github.com/o/r"),  # a lone user name may be a token
        ("http://user:CAN@ARY@host/x", "http://user:***@host/x"),  # an unencoded @ in the password
        ("http://user:CAN/ARY@host/x", "http://user:***@host/x"),  # an unencoded / cuts the authority short
        ("http://user:CAN?ARY@host", "http://user:***@host"),
        ("postgresql//admin:CANARY@db/x", "postgresql//admin:***@db/x"),  # no scheme: still hidden
        ("postgresql://app@db/x", "postgresql://app@db/x"),  # a database user alone is not a secret
        (
            "http://h/?token=CANARY&limit=1&API_KEY=CANARY;Pass%77ord=CANARY#access_token=CANARY",
            "http://h/?token=***&limit=1&API_KEY=***;Pass%77ord=***#access_token=***",
        ),
        ("https://acct.blob/c?sv=2024&sig=CANARY%2B&se=1", "https://acct.blob/c?sv=2024&sig=***&se=1"),
        ("sqlite:///x.db?password=CANARY", "sqlite:///x.db?password=***"),
        (
            "postgresql+psycopg://app:CANARY@db:5432/x?sslpassword=CANARY&application_name=bf",
            "postgresql+psycopg://app:***@db:5432/x?sslpassword=***&application_name=bf",
        ),
        ("sqlite:////home/j@corp/state.db", "sqlite:////home/j@corp/state.db"),  # a path, not user information
        ("http://[::1]:8080/api?x=1", "http://[::1]:8080/api?x=1"),
    ],
)
def test_a_url_is_shown_without_its_credentials(url: str, shown: str) -> None:
    assert redact_url(url) == shown
    assert "CANARY" not in shown


@pytest.mark.parametrize(
    "name",
    ["token", "Password", "passwd", "pwd", "secret", "client_secret", "key", "api_key", "apikey", "api-key",
     "access_token", "auth", "X-Amz-Signature", "X-Amz-Credential", "sig", "sslkey"],
)  # fmt: skip
def test_credential_looking_parameters(name: str) -> None:
    assert secret_parameter(name)


@pytest.mark.parametrize("name", ["limit", "dag_id", "application_name", "sv", "se", "monkeys"])
def test_ordinary_parameters_stay(name: str) -> None:
    assert not secret_parameter(name)


def test_every_url_inside_a_text_is_redacted() -> None:
    text = "cannot reach http://u:CANARY@h:9/?token=CANARY (and 'https://CANARY@x/y') now"
    assert redact_urls(text) == "cannot reach http://u:***@h:9/?token=*** (and 'https://***@x/y') now"


HTTP = ("http", "https")


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://127.0.0.1:8080", None),
        ("https://u:p%40ss@airflow.example/", None),
        ("http://127.0.0.1:abc", "has a port that is not a number from 1 to 65535"),
        ("http://127.0.0.1:99999", "has a port that is not a number from 1 to 65535"),
        ("http://127.0.0.1:0", "has a port that is not a number from 1 to 65535"),
        ("http://u:p/ss@h", "has a port that is not a number from 1 to 65535"),
        ("http://u:p@ss@h", "has more than one '@' before its host"),
        ("http://:8080", "has no host"),
        ("http:///api", "has no host"),
        ("127.0.0.1:8080", "is not an http:// or https:// address"),
        ("ftp://airflow", "is not an http:// or https:// address"),
        ("http://air flow", "contains a space or a control character"),
        ("http://airflow\n", "contains a space or a control character"),
    ],
)
def test_url_problems_are_said_without_the_url(url: str, problem: str | None) -> None:
    assert url_problem(url, HTTP) == problem


def test_a_database_url_needs_no_host_but_a_sane_port() -> None:
    assert url_problem("sqlite:///state.db") is None
    assert url_problem("sqlite://") is None
    assert url_problem("postgresql://u:pw@h:abc/db") == "has a port that is not a number from 1 to 65535"


def test_header_and_text_problems() -> None:
    assert header_problem("eyJhbGciOi.x-y_z.0") is None
    assert header_problem("tok\nX-Injected: 1") == "contains a line break or another control character"
    assert header_problem("tok\x7f") == "contains a line break or another control character"
    assert header_problem("tokén") == "contains a non-ASCII character"
    assert text_problem("pässwörd") is None  # a password travels in a JSON body: any character but a control one
    assert text_problem("ad\nmin") == "contains a line break or another control character"
