"""What the preflight can tell of the identity where the token carries no role (other auth managers): one read of
connections, on a fake server (the harness runs SimpleAuthManager only)."""

from __future__ import annotations

import base64
import json
import logging

import httpx
import pytest

from controller.adapters.airflow import AirflowClient
from controller.commands.runtime.session import warn_of_privilege
from controller.core.model.capabilities import newest
from controller.core.model.secret import Secret
from tests.fakes.calls import record_calls


def jwt(claims: dict[str, object]) -> str:
    body = base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=")
    return f"eyJhbGciOiJIUzUxMiJ9.{body}.c2ln"


def fake_airflow(token: str, connections: int) -> httpx.MockTransport:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/auth/token":
            return httpx.Response(201, json={"access_token": token})
        if request.url.path == "/api/v2/connections":
            return httpx.Response(connections, json={"connections": [], "total_entries": 0})
        return httpx.Response(200, json={"version": "3.3.2"})

    return httpx.MockTransport(answer)


@pytest.mark.parametrize(
    ("token", "connections", "warned", "asked"),
    [
        (jwt({"sub": "svc", "role": "op"}), 200, "role 'op'", False),  # the token says it: no call
        (jwt({"sub": "svc", "role": "user"}), 200, None, False),
        (jwt({"sub": "Anonymous", "role": "ADMIN"}), 200, "role 'admin'", False),  # all-admins mode
        (jwt({"sub": "svc"}), 200, "may read connections (GET /api/v2/connections -> 200)", True),  # FAB: no role
        (jwt({"sub": "svc"}), 403, None, True),
        ("opaque-token", 404, None, True),  # neither: nothing said
    ],
)
def test_what_the_preflight_can_tell_of_the_identity(
    token: str, connections: int, warned: str | None, asked: bool, caplog: pytest.LogCaptureFixture
) -> None:
    client = AirflowClient(
        "http://fake",
        username="svc",
        password=Secret("pw"),
        transport=fake_airflow(token, connections),
        capabilities=newest(),
    )
    calls = record_calls(client)
    with client, caplog.at_level(logging.WARNING):
        client.preflight()
        warn_of_privilege(client, "svc")
    messages = [r.getMessage() for r in caplog.records]
    if warned is None:
        assert messages == []
    else:
        (message,) = messages
        assert message.startswith("least privilege: Airflow identity ")
        assert warned in message
    assert (("GET", "/api/v2/connections") in calls) is asked
