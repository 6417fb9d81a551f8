"""CLI-level safety: secrets never printed or audited; the store is opened before Airflow is contacted."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.fakes.http import write_json

REPO = Path(__file__).resolve().parents[2]
CANARY = "CANARY-tok-5b1e77"


def run(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "TMPDIR": str(tmp_path),  # a crash file lands where a test can read it
        "BACKFILLCTL_SPECS_DIR": str(REPO / "specs"),
        "BACKFILLCTL_STORE_URL": f"sqlite:///{tmp_path}/state.db",
        "BACKFILLCTL_ACTOR": "ci",
    }
    return subprocess.run(
        [sys.executable, "-m", "controller", *args],
        env={**base, **env},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )


class EchoHeaders(BaseHTTPRequestHandler):
    """A hostile server: says it is Airflow 3, then answers 403 with every request header, the token included."""

    def do_GET(self) -> None:
        version = self.path.startswith("/api/v2/version")
        answer = {"version": "3.3.2"} if version else {"detail": f"forbidden; you sent {dict(self.headers)}"}
        write_json(self, 200 if version else 403, answer)

    def log_message(self, *_args: object) -> None:
        pass


@pytest.fixture(scope="module")
def echo_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoHeaders)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


@pytest.mark.parametrize("command", [["plan"], ["reconcile", "--once"], ["status"], ["plan", "--format", "json"]])
def test_token_canary_never_appears(tmp_path: Path, command: list[str], echo_server: str) -> None:
    assert run(tmp_path, "store", "migrate").returncode == 0  # read-only commands need an existing store
    result = run(tmp_path, *command, BACKFILLCTL_AIRFLOW_URL=echo_server, BACKFILLCTL_AIRFLOW_TOKEN=CANARY)
    assert result.returncode == 1
    assert "refused the credentials (GET /api/v2/dags -> 403): check BACKFILLCTL_AIRFLOW_TOKEN" in result.stderr
    assert "Airflow said: forbidden; you sent {" in result.stderr
    assert "Bearer [secure]" in result.stdout + result.stderr
    exported = run(tmp_path, "audit", "export", "--format", "jsonl")
    for text in (result.stdout, result.stderr, exported.stdout, exported.stderr):
        assert CANARY not in text
    assert "Traceback" not in result.stderr


def test_unreachable_store_fails_before_airflow_is_contacted(tmp_path: Path) -> None:
    result = run(tmp_path, "reconcile", "--once", BACKFILLCTL_STORE_URL="postgresql://u:CANARY-pw-9@127.0.0.1:1/x")
    assert result.returncode == 1
    assert result.stderr.startswith(
        "error: store postgresql+psycopg://u:***@127.0.0.1:1/x: reading the schema "
        "revision failed: OperationalError: connection failed"
    )
    assert "BACKFILLCTL_AIRFLOW_URL" not in result.stderr  # the Airflow client was never built
    assert "CANARY-pw-9" not in result.stderr
