"""Secrets in settings: credentials that cannot be sent are refused by name, URLs are shown without their
credentials, a malformed URL is a user error, and Airflow's refusals and odd login answers are said as such.

Each CLI case runs `backfillctl` as a subprocess with a canary in the secret and then looks for the canary in
stdout, stderr and every file the run left (the store, a crash file: TMPDIR is the test's folder).
"""

from __future__ import annotations

import logging
import re
import subprocess
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from controller.adapters.airflow import AirflowClient
from controller.adapters.logsetup import Redactor
from controller.commands.loop.notify import DeliveryFailure, deliver
from controller.commands.reconcile.reconciler import Reconciler
from controller.core.model.secret import Secret
from controller.core.rules.retrying import Backoff
from controller.errors import AirflowAuthError, AirflowError
from tests.cli.test_cli_safety import run
from tests.commands.reconcile.harness import Bench
from tests.fakes.airflow import FakeAirflow, Reply
from tests.fakes.calls import record_calls
from tests.support.logcheck import message_of, reports

CANARY = "CANARY-5ecret-d41"
Handler = Callable[[httpx.Request], httpx.Response]
URL_FIX = (
    "  hint: set it to the api-server's base address, e.g. http://127.0.0.1:8080; percent-encode an @ / ? # in a "
    "user name or password (%40 %2F %3F %23)\n"
)
STORE_FIX = (
    "  hint: use sqlite:///path/to/state.db or postgresql://USER@HOST:5432/DBNAME; percent-encode an @ / ? # in "
    "the user name or password (%40 %2F %3F %23)\n"
)


def assert_hidden(tmp_path: Path, result: subprocess.CompletedProcess[str], secret: str = CANARY) -> None:
    assert secret not in result.stdout + result.stderr
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret.encode() not in path.read_bytes(), path
    assert "unexpected error" not in result.stderr


@pytest.fixture
def serve() -> Iterator[Callable[[Handler], str]]:
    """Serve an httpx handler (the fake Airflow, or a scripted answer) over real HTTP for a subprocess."""
    servers: list[ThreadingHTTPServer] = []

    def start(handle: Handler) -> str:
        class Bridge(BaseHTTPRequestHandler):
            def answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                url = f"http://bridge{self.path}"
                request = httpx.Request(self.command, url, headers=dict(self.headers), content=body)
                response = handle(request)
                self.send_response(response.status_code)
                self.send_header("Content-Type", response.headers.get("content-type", "application/json"))
                self.send_header("Content-Length", str(len(response.content)))
                self.end_headers()
                self.wfile.write(response.content)

            do_GET = do_POST = do_PUT = do_PATCH = answer

            def log_message(self, *_: object) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Bridge)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_address[1]}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


# --- a credential that cannot travel is refused before anything is sent, by its variable's name -------------

BAD_CREDENTIALS = [
    ("BACKFILLCTL_AIRFLOW_TOKEN", f"{CANARY}\nX-Injected: 1", "contains a line break or another control character"),
    ("BACKFILLCTL_AIRFLOW_TOKEN", f"{CANARY}\u20ac", "contains a non-ASCII character"),
    ("BACKFILLCTL_AIRFLOW_PASSWORD", f"{CANARY}\r\nX: 1", "contains a line break or another control character"),
    ("BACKFILLCTL_AIRFLOW_USERNAME", f"admin\n{CANARY}", "contains a line break or another control character"),
]


@pytest.mark.parametrize(("name", "value", "problem"), BAD_CREDENTIALS)
@pytest.mark.parametrize("log_format", [(), ("--log-format", "json")])
def test_a_credential_that_cannot_be_sent_is_refused_by_name(
    tmp_path: Path, name: str, value: str, problem: str, log_format: tuple[str, ...]
) -> None:
    login = {"BACKFILLCTL_AIRFLOW_USERNAME": "admin", "BACKFILLCTL_AIRFLOW_PASSWORD": "admin"}
    env = {"BACKFILLCTL_AIRFLOW_URL": "http://127.0.0.1:9", **({} if "TOKEN" in name else login), name: value}
    result = run(tmp_path, *log_format, "plan", "--no-store", **env)
    assert (result.returncode, result.stdout) == (1, "")
    hint = f"set {name} to the value alone, on one line"
    if log_format:
        assert reports(result.stderr) == [("error", f"{name} {problem}", hint)]
    else:
        assert result.stderr == f"error: {name} {problem}\n  hint: {hint}\n"
    assert_hidden(tmp_path, result)


# --- URLs are shown without their credentials; a malformed one is a user error ------------------------------


@pytest.mark.parametrize("log_format", [(), ("--log-format", "json")])
def test_credentials_in_the_airflow_url_are_hidden_when_it_cannot_be_reached(
    tmp_path: Path, log_format: tuple[str, ...]
) -> None:
    result = run(
        tmp_path, *log_format, "plan", "--no-store", BACKFILLCTL_AIRFLOW_URL=f"http://ops:{CANARY}@127.0.0.1:9"
    )
    assert (result.returncode, result.stdout) == (1, "")
    error = (
        "cannot reach Airflow at BACKFILLCTL_AIRFLOW_URL=http://ops:***@127.0.0.1:9: "
        "GET /api/v2/version failed: ConnectError"
    )
    hint = "is Airflow's api-server running, and is that its address?"
    if log_format:
        (_, attempt, _), reported = reports(result.stderr)
        assert reported == ("error", error, hint)
    else:
        line, *said = result.stderr.splitlines()
        assert said == [f"error: {error}", f"  hint: {hint}"]
        attempt = message_of(line)
    assert re.fullmatch("attempt #1/2 failed; will retry in 0.[56]s: GET /api/v2/version failed: ConnectError", attempt)
    assert_hidden(tmp_path, result)


PORT = "has a port that is not a number from 1 to 65535"
MALFORMED_AIRFLOW_URLS = [
    (f"http://ops:{CANARY}@127.0.0.1:abc", "http://ops:***@127.0.0.1:abc", PORT),
    (f"http://ops:{CANARY}/x@127.0.0.1", "http://ops:***@127.0.0.1", PORT),  # an unencoded / in the password
    (f"http://ops:{CANARY}@:8080", "http://ops:***@:8080", "has no host"),
    (f"http://ops:{CANARY}@ir@127.0.0.1:9", "http://ops:***@127.0.0.1:9", "has more than one '@' before its host"),
    (
        f"http://127.0.0.1:9/?token={CANARY}",
        "http://127.0.0.1:9/?token=***",
        "has a query or a fragment: the api-server's base address takes neither",
    ),
    (f"ftp://ops:{CANARY}@airflow", "ftp://ops:***@airflow", "is not an http:// or https:// address"),
]


@pytest.mark.parametrize(("url", "shown", "problem"), MALFORMED_AIRFLOW_URLS)
def test_a_malformed_airflow_url_is_a_user_error_without_its_secret(
    tmp_path: Path, url: str, shown: str, problem: str
) -> None:
    result = run(tmp_path, "plan", "--no-store", BACKFILLCTL_AIRFLOW_URL=url)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == f"error: BACKFILLCTL_AIRFLOW_URL={shown!r} {problem}\n{URL_FIX}"
    assert_hidden(tmp_path, result)


def test_user_information_in_the_url_beside_a_token_is_refused(tmp_path: Path) -> None:
    """httpx sends a URL's user:password as Basic auth, in place of the Bearer token: it could never work."""
    url = f"http://ops:{CANARY}@127.0.0.1:9"
    result = run(tmp_path, "plan", "--no-store", BACKFILLCTL_AIRFLOW_URL=url, BACKFILLCTL_AIRFLOW_TOKEN="tok")
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        "error: BACKFILLCTL_AIRFLOW_URL='http://ops:***@127.0.0.1:9' has a user name or password, which would be "
        "sent in place of the token\n"
        "  hint: take user:password@ out of the URL: BACKFILLCTL_AIRFLOW_USERNAME/PASSWORD carry the login\n"
    )
    assert_hidden(tmp_path, result)


@pytest.mark.parametrize(
    ("url", "error"),
    [
        (
            f"postgresql://app:{CANARY}@db:abc/x",
            "error: BACKFILLCTL_STORE_URL='postgresql://app:***@db:abc/x' has a port that is not a number from 1 "
            "to 65535\n" + STORE_FIX,
        ),
        (
            f"postgresql://app:{CANARY}@ir@127.0.0.1:1/x",
            "error: BACKFILLCTL_STORE_URL='postgresql://app:***@127.0.0.1:1/x' has more than one '@' before its "
            "host\n" + STORE_FIX,
        ),
    ],
)
def test_a_malformed_store_url_is_a_user_error_without_its_secret(tmp_path: Path, url: str, error: str) -> None:
    result = run(tmp_path, "audit", "show", BACKFILLCTL_STORE_URL=url)
    assert (result.returncode, result.stdout, result.stderr) == (1, "", error)
    assert_hidden(tmp_path, result)


def test_a_password_in_the_store_url_query_is_hidden(tmp_path: Path) -> None:
    url = f"postgresql://app@127.0.0.1:1/x?password={CANARY}&application_name=bf"
    result = run(tmp_path, "audit", "show", BACKFILLCTL_STORE_URL=url)
    assert result.returncode == 1
    assert result.stderr.startswith(
        "error: store postgresql+psycopg://app@127.0.0.1:1/x?password=***&application_name=bf: reading the schema "
        "revision failed: OperationalError: "
    )
    assert_hidden(tmp_path, result)


def test_the_binding_records_the_airflow_url_without_its_credentials(tmp_path: Path) -> None:
    fake = FakeAirflow()
    bench = Bench(tmp_path, url=f"http://ops:{CANARY}@fake-airflow", fake=fake)
    try:
        bench.spec("s1")
        client = AirflowClient(bench.url, transport=fake.transport())  # no token: the URL's Basic auth is harmless
        fake._authorise = lambda _request: None  # type: ignore[method-assign]  # an Airflow without auth
        bench.clients.append(client)
        Reconciler(bench.settings(), bench.store, client, sleep=lambda _s: None).run_once()
        assert bench.store.binding("s1").airflow_url == "http://ops:***@fake-airflow"  # type: ignore[union-attr]
    finally:
        bench.close()
    assert all(CANARY.encode() not in p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())


def test_the_log_filter_hides_credentials_of_any_url() -> None:
    record = logging.LogRecord("controller", logging.WARNING, __file__, 1, "at %s: %s", None, None)
    record.args = (f"http://ops:{CANARY}@h/?api_key={CANARY}", "no secret names known")
    Redactor([]).filter(record)
    assert record.getMessage() == "at http://ops:***@h/?api_key=***: no secret names known"


def test_a_malformed_webhook_url_names_its_variable_not_its_value(tmp_path: Path) -> None:
    bench = Bench(tmp_path, fake=FakeAirflow())
    bench.policy("version: 1\nnotify:\n  receivers:\n    ops: {webhook_env: HOOK_OPS}\n  default_receivers: [ops]\n")
    try:
        bench.spec("s1")
        bench.run()
        env = {"HOOK_OPS": f"https://hooks.example/{CANARY}\nX: 1"}
        stats = deliver(bench.store, bench.reconciler().load().policy, env, bench.settings(), everything=True)
    finally:
        bench.close()
    assert stats.failed == [
        DeliveryFailure(
            "ops", "receiver ops: the environment variable HOOK_OPS contains a space or a control character"
        )
    ]


# --- Airflow's refusals say "refused the credentials"; an odd login answer is said, never crashes ------------


def test_a_wrong_password_is_refused_credentials_not_a_wrong_url(
    tmp_path: Path, serve: Callable[[Handler], str]
) -> None:
    url = serve(FakeAirflow().handle)
    result = run(
        tmp_path, "--log-format", "json", "reconcile", "--once",
        BACKFILLCTL_AIRFLOW_URL=url, BACKFILLCTL_AIRFLOW_USERNAME="admin", BACKFILLCTL_AIRFLOW_PASSWORD=CANARY,
    )  # fmt: skip
    assert (result.returncode, result.stdout) == (1, "")
    assert reports(result.stderr)[-1] == (
        "error",
        f"Airflow at {url} refused the credentials (POST /auth/token -> 401): "
        "check BACKFILLCTL_AIRFLOW_USERNAME/PASSWORD",
        "Airflow said: Invalid credentials",
    )
    assert_hidden(tmp_path, result)


@pytest.mark.airflow
def test_a_wrong_password_against_the_real_airflow(tmp_path: Path, airflow_url: str) -> None:
    result = run(
        tmp_path, "plan", "--no-store",
        BACKFILLCTL_AIRFLOW_URL=airflow_url, BACKFILLCTL_AIRFLOW_USERNAME="admin", BACKFILLCTL_AIRFLOW_PASSWORD=CANARY,
    )  # fmt: skip
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr == (
        f"error: Airflow at {airflow_url} refused the credentials (POST /auth/token -> 401): "
        "check BACKFILLCTL_AIRFLOW_USERNAME/PASSWORD\n"
        "  hint: Airflow said: Invalid credentials\n"
    )
    assert_hidden(tmp_path, result)


def scripted_login(answer: httpx.Response) -> AirflowClient:
    def handle(request: httpx.Request) -> httpx.Response:
        return answer if request.url.path == "/auth/token" else httpx.Response(200, json={"version": "3.3.2"})

    return AirflowClient(
        "http://airflow.test",
        username="admin",
        password=Secret(CANARY),
        transport=httpx.MockTransport(handle),
        backoff=Backoff(attempts=1),
        sleep=lambda _s: None,
    )


TOKEN = "eyJhbGciOiJIUzUxMiJ9.eyJzdWIiOiJhZG1pbiJ9.c2lnbmF0dXJl"


NO_TOKEN = "without an access token: a JSON"
ODD_LOGIN_ANSWERS = [
    (httpx.Response(201, json=[TOKEN]), f"{NO_TOKEN} array"),
    (httpx.Response(201, json={"token": TOKEN, "ttl": 3600}), f"{NO_TOKEN} object {{token: string, ttl: number}}"),
    (httpx.Response(201, json={"access_token": 12}), f"{NO_TOKEN} object {{access_token: number}}"),
    (httpx.Response(201, json=TOKEN), f"{NO_TOKEN} string"),
    (
        httpx.Response(201, json={"access_token": f"{TOKEN}\nX: 1"}),
        "with an access token that contains a line break or another control character",
    ),
    (
        httpx.Response(201, text=f"<html>\n<p>signed in: {TOKEN}</p>", headers={"content-type": "text/html"}),
        "with a body that is not JSON (text/html): '<html>?<p>signed in: [secure]</p>'",
    ),
]


@pytest.mark.parametrize(("answer", "said"), ODD_LOGIN_ANSWERS)
def test_an_odd_login_answer_is_said_without_the_token(answer: httpx.Response, said: str) -> None:
    client = scripted_login(answer)
    with pytest.raises(AirflowError) as caught:
        client.version()
    assert type(caught.value) is AirflowError  # exit 1, not a crash
    assert caught.value.message == f"Airflow at http://airflow.test answered POST /auth/token -> 201 {said}"
    assert caught.value.hint == (
        "BACKFILLCTL_AIRFLOW_URL must be the Airflow 3 api-server's own address (not a proxy's login page)"
    )
    assert TOKEN not in caught.value.message + str(caught.value.hint)


def test_an_odd_login_answer_exits_1_on_the_command_line(tmp_path: Path, serve: Callable[[Handler], str]) -> None:
    url = serve(lambda request: httpx.Response(201, json=[TOKEN]))
    login: dict[str, Any] = {"BACKFILLCTL_AIRFLOW_USERNAME": "admin", "BACKFILLCTL_AIRFLOW_PASSWORD": CANARY}
    result = run(tmp_path, "plan", "--no-store", BACKFILLCTL_AIRFLOW_URL=url, **login)
    assert (result.returncode, result.stdout) == (1, "")
    assert result.stderr.splitlines()[0] == (
        f"error: Airflow at {url} answered POST /auth/token -> 201 without an access token: a JSON array"
    )
    assert_hidden(tmp_path, result, TOKEN)
    assert_hidden(tmp_path, result)


def test_a_static_token_refused_on_a_later_call_names_the_token_variable() -> None:
    """Preflight passed; the token expired since: the 401 of any call says which setting to renew."""
    fake = FakeAirflow()
    client = AirflowClient("http://fake-airflow", token=Secret(CANARY), transport=fake.transport())
    fake._authorise = lambda _request: (_ for _ in ()).throw(Reply(401, "Token expired"))  # type: ignore[method-assign]
    calls = record_calls(client)
    with pytest.raises(AirflowAuthError) as caught:
        client.list_backfills("demo_daily")
    assert caught.value.message == (
        "Airflow at http://fake-airflow refused the credentials (GET /api/v2/backfills -> 401): "
        "check BACKFILLCTL_AIRFLOW_TOKEN"
    )
    assert caught.value.hint == (
        "Airflow said: Token expired; a token expires: with BACKFILLCTL_AIRFLOW_USERNAME/PASSWORD backfillctl gets "
        "a new one"
    )
    assert calls == [("GET", "/api/v2/backfills")]
