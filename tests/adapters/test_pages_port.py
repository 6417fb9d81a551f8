"""The status/metrics port as a good citizen: bounded, with deadlines, the Host check and safe headers on every
answer; a client's reset is one log line. The open-files tests run the server in a child process under its own
limit (the test runner's limit is untouched)."""

from __future__ import annotations

import logging
import os
import select
import socket
import struct
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from controller.adapters.hostcheck import HostPolicy
from controller.adapters.monitor import Health, Metrics, MonitorServer
from controller.adapters.pageserver import Limits
from controller.commands.loop.passhooks import MonitorOptions, PassHooks
from tests.commands.reconcile.harness import Bench

ROOT = Path(__file__).resolve().parents[2]
SAFE = {
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'; "
    "base-uri 'none'; form-action 'none'",
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "cache-control": "no-store",
    "connection": "close",
}

# the monitor server under RLIMIT_NOFILE = argv[1], beside what a watch does between passes: open files (the
# store, git's pipes, Airflow's sockets: 20 at once); says how often that failed and the most descriptors it saw
SERVER = textwrap.dedent("""\
    import logging, os, resource, select, sys
    resource.setrlimit(resource.RLIMIT_NOFILE, (int(sys.argv[1]), resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(message)s")
    from controller.adapters.monitor import Health, Metrics, MonitorServer
    server = MonitorServer(Metrics(), Health(), port=0)
    print(server.address, flush=True)
    failed = peak = 0
    while not select.select([sys.stdin], [], [], 0.02)[0]:
        try:
            held = [open(os.devnull) for _ in range(20)]
            peak = max(peak, len(os.listdir("/proc/self/fd")))
        except OSError:
            failed += 1
        else:
            for file in held:
                file.close()
    server.close()
    print(failed, peak, flush=True)
""")
# opens argv[3] connections to argv[1]:argv[2] and sends nothing; holds them until stdin closes
IDLE = textwrap.dedent("""\
    import resource, socket, sys
    count = int(sys.argv[3])
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, count + 100)), hard))
    held, refused = [], 0
    for _ in range(count):
        try:
            held.append(socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=5))
        except OSError:
            refused += 1
            if refused == 3:
                break
    print(len(held), refused, flush=True)
    sys.stdin.read()
""")
# the monitor server under a limit of 128; on `exhaust` it opens files until none is left, on `release` closes
# them and says the CPU seconds it spent meanwhile
STARVED = textwrap.dedent("""\
    import logging, os, resource, sys, time
    resource.setrlimit(resource.RLIMIT_NOFILE, (128, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))
    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(levelname)s %(message)s")
    from controller.adapters.monitor import Health, Metrics, MonitorServer
    server = MonitorServer(Metrics(), Health(), port=0)
    print(server.address, flush=True)
    sys.stdin.readline()
    held = []
    try:
        while True:
            held.append(open(os.devnull))
    except OSError:
        pass
    cpu = time.process_time()
    print("exhausted", flush=True)
    sys.stdin.readline()
    cpu = time.process_time() - cpu
    for file in held:
        file.close()
    print(f"{cpu:.2f}", flush=True)
    sys.stdin.read()
    server.close()
""")


def child(code: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def line(process: subprocess.Popen[str]) -> str:
    assert process.stdout is not None
    return process.stdout.readline()


def test_1100_idle_connections_under_a_1024_open_files_limit_leave_the_watch_and_healthz_working() -> None:
    """Today's reconcile --watch died at 1,015 idle connections: each held a thread and a descriptor for ever."""
    server = child(SERVER, "1024")
    address = line(server).strip()
    port = address.rsplit(":", 1)[1]
    idle = child(IDLE, "127.0.0.1", port, "1100")
    try:
        opened = line(idle).split()
        assert opened == ["1100", "0"]
        time.sleep(1.2)  # the connections the port kept have been idle long enough to give way
        during = httpx.get(f"{address}/healthz", timeout=5)
        assert (during.status_code, during.text) == (200, "ok (starting)\n")
    finally:
        idle.communicate("", timeout=60)
    after = httpx.get(f"{address}/healthz", timeout=5)
    assert (after.status_code, after.text) == (200, "ok (starting)\n")
    out, err = server.communicate("stop\n", timeout=60)
    failed, peak = (int(n) for n in out.split())
    assert failed == 0  # the watch could always open its files
    assert peak < 64 + 40  # 64 connections at most, the interpreter's own and the watch's 20
    assert err.splitlines() == ["WARNING status port: 64 connections open; closing new ones"]


def test_out_of_file_descriptors_accept_is_logged_once_and_retried_without_spinning() -> None:
    server = child(STARVED)
    address = line(server).strip()
    assert server.stdin is not None
    server.stdin.write("exhaust\n")
    server.stdin.flush()
    assert line(server) == "exhausted\n"
    answers: list[httpx.Response] = []
    asking = threading.Thread(target=lambda: answers.append(httpx.get(f"{address}/healthz", timeout=20)))
    asking.start()
    time.sleep(2)  # the connection waits in the kernel's queue: accept() fails, 4 tries
    server.stdin.write("release\n")
    server.stdin.flush()
    cpu = float(line(server))
    asking.join(timeout=20)
    _out, err = server.communicate("", timeout=60)
    assert [(a.status_code, a.text) for a in answers] == [(200, "ok (starting)\n")]
    assert cpu < 0.3  # no busy loop on a listening socket that stays readable
    assert err.splitlines() == [
        "WARNING status port: cannot accept connections (Too many open files); retrying every 0.5s",
        "WARNING status port: accepting connections again",
    ]


@pytest.fixture
def serve() -> Iterator[Callable[..., MonitorServer]]:
    servers: list[MonitorServer] = []

    def start(**kwargs: Any) -> MonitorServer:
        servers.append(MonitorServer(Metrics(), Health(), port=0, **kwargs))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def port_of(server: MonitorServer) -> int:
    return int(server.address.rsplit(":", 1)[1])


def until_closed(conn: socket.socket, limit: float = 5.0) -> tuple[bytes, float]:
    """Everything the server sends until it closes, and the seconds that took."""
    start, data = time.monotonic(), b""
    conn.settimeout(limit)
    while chunk := conn.recv(65536):
        data += chunk
    return data, time.monotonic() - start


def test_a_client_sending_half_a_request_line_is_cut_after_the_head_timeout(
    serve: Callable[..., MonitorServer],
) -> None:
    server = serve(limits=Limits(head_timeout=1.0))
    with socket.create_connection(("127.0.0.1", port_of(server))) as conn:
        conn.sendall(b"GET /heal")
        data, seconds = until_closed(conn)
    assert 0.9 < seconds < 3  # a client never cut would wait for its own 5 s timeout
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0] == b"HTTP/1.0 408 Request Timeout"
    assert body == b"request timeout: send the request within 1s\n"


def test_a_client_trickling_its_request_is_cut_at_the_deadline_not_per_read(
    serve: Callable[..., MonitorServer],
) -> None:
    """A byte every 0.2 s would keep a per-read timeout from ever firing; the deadline counts from connect."""
    server = serve(limits=Limits(head_timeout=1.0))
    request = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    with socket.create_connection(("127.0.0.1", port_of(server))) as conn:
        start, sent = time.monotonic(), 0
        while sent < len(request) and not select.select([conn], [], [], 0.2)[0]:
            conn.sendall(request[sent : sent + 1])
            sent += 1
        data, _ = until_closed(conn)
        seconds = time.monotonic() - start
    assert 0.9 < seconds < 3  # a client never cut would wait for its own 5 s timeout
    assert sent < 20  # of 42 bytes
    assert data.startswith(b"HTTP/1.0 408 Request Timeout\r\n")


def test_connections_beyond_the_bound_are_closed_at_once_and_idle_ones_give_way(
    serve: Callable[..., MonitorServer],
) -> None:
    server = serve(limits=Limits(max_connections=4, evict_after=1.5))
    port = port_of(server)
    idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
    try:
        time.sleep(0.1)
        with socket.create_connection(("127.0.0.1", port)) as fifth:  # the four are younger than 1.5 s
            data, seconds = until_closed(fifth)
        assert (data, seconds < 1) == (b"", True)
        time.sleep(1.5)
        answer = httpx.get(f"{server.address}/healthz", timeout=5)  # the oldest idle one gives way
        assert answer.status_code == 200
        assert [until_closed(conn)[0] for conn in idle[:1]] == [b""]
        deadline = time.monotonic() + 2
        while server.open_connections() != 3 and time.monotonic() < deadline:  # the worker closes after answering
            time.sleep(0.01)
        assert server.open_connections() == 3
    finally:
        for conn in idle:
            conn.close()


def reset(conn: socket.socket) -> None:
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends RST
    conn.close()


def lines_after(caplog: pytest.LogCaptureFixture, settle: float = 0.3) -> list[str]:
    deadline = time.monotonic() + 5
    while not caplog.records and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(settle)
    return [f"{r.levelname} {r.getMessage()}" for r in caplog.records if r.name.startswith("controller")]


def test_a_client_resetting_before_its_request_is_complete_is_one_log_line(
    serve: Callable[..., MonitorServer], caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.INFO, logger="controller")
    server = serve()
    conn = socket.create_connection(("127.0.0.1", port_of(server)))
    conn.sendall(b"GET /metrics HTTP/1.1\r\nHo")
    time.sleep(0.2)
    reset(conn)
    assert lines_after(caplog) == [
        "INFO status port: connection from 127.0.0.1 lost before its request was complete (Connection reset by peer)"
    ]
    assert capfd.readouterr().err == ""  # no traceback


def test_a_client_resetting_while_its_answer_is_written_is_one_log_line(
    serve: Callable[..., MonitorServer], caplog: pytest.LogCaptureFixture, capfd: pytest.CaptureFixture[str]
) -> None:
    caplog.set_level(logging.INFO, logger="controller")
    server = serve()
    server.set_page("<p>" + "x" * 8_000_000)  # more than the sockets' buffers hold: the worker waits to write
    conn = socket.socket()
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    conn.connect(("127.0.0.1", port_of(server)))
    conn.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    time.sleep(0.3)
    reset(conn)
    lines = lines_after(caplog)
    assert lines in (
        ["INFO status port: connection from 127.0.0.1 lost while answering GET / (Connection reset by peer)"],
        ["INFO status port: connection from 127.0.0.1 lost while answering GET / (Broken pipe)"],
    )
    assert capfd.readouterr().err == ""


def raw(server: MonitorServer, request: bytes) -> tuple[str, dict[str, str], bytes]:
    """Status line, headers (lower-case names) and body of the answer to `request` as sent."""
    with socket.create_connection(("127.0.0.1", port_of(server))) as conn:
        conn.sendall(request)
        data, _ = until_closed(conn)
    head, _, body = data.partition(b"\r\n\r\n")
    status, *fields = head.decode("latin-1").split("\r\n")
    headers = {name.lower(): value for name, _, value in (f.partition(": ") for f in fields)}
    return status, headers, body


def test_every_answer_errors_included_carries_the_safe_headers(serve: Callable[..., MonitorServer]) -> None:
    server = serve(limits=Limits(head_timeout=1.0))
    server.set_page("<p>hello</p>")
    host = b"Host: 127.0.0.1\r\n"
    cases = [
        (b"GET / HTTP/1.1\r\n" + host, "200 OK", "text/html; charset=utf-8", b"<p>hello</p>"),
        (b"HEAD / HTTP/1.1\r\n" + host, "200 OK", "text/html; charset=utf-8", b""),
        (b"GET /healthz HTTP/1.1\r\n" + host, "200 OK", "text/plain; charset=utf-8", b"ok (starting)\n"),
        (
            b"GET /nope HTTP/1.1\r\n" + host,
            "404 Not Found",
            "text/plain; charset=utf-8",
            b"not found: /, /metrics and /healthz are served\n",
        ),
        (
            b"POST / HTTP/1.1\r\n" + host + b"Content-Length: 2\r\n\r\n{}",
            "405 Method Not Allowed",
            "text/plain; charset=utf-8",
            b"method not allowed: only GET and HEAD\n",
        ),
        (
            b"GET / HTTP/1.1\r\nHost: rebound.attacker.example:9108\r\n",
            "421 Misdirected Request",
            "text/plain; charset=utf-8",
            b"misdirected request: this port answers to localhost, loopback addresses; another name needs "
            b"--metrics-host-name\n",
        ),
        (
            b"GET / HTTP/1.1\r\n",
            "400 Bad Request",
            "text/plain; charset=utf-8",
            b"bad request: exactly one Host header is needed\n",
        ),
        (
            b"GET / HTTP/1.1\r\n" + host + host,
            "400 Bad Request",
            "text/plain; charset=utf-8",
            b"bad request: exactly one Host header is needed\n",
        ),
        (
            b"HELLO\r\n",
            "400 Bad Request",
            "text/plain; charset=utf-8",
            b"bad request: expected a request line like `GET /metrics HTTP/1.1`\n",
        ),
        (
            b"GET / HTTP/1.1\r\n" + host + b"X: " + b"y" * 20_000 + b"\r\n",
            "431 Request Header Fields Too Large",
            "text/plain; charset=utf-8",
            b"request header fields too large\n",
        ),
    ]
    for request, status, content_type, body in cases:
        line, headers, got = raw(server, request + b"\r\n")
        length = str(len(b"<p>hello</p>")) if request.startswith(b"HEAD") else str(len(body))
        assert (line, got) == (f"HTTP/1.0 {status}", body), request[:40]
        extra = {"allow": "GET, HEAD"} if status.startswith("405") else {}
        assert headers == {**SAFE, "content-type": content_type, "content-length": length, **extra}, request[:40]
    line, headers, _ = raw(server, b"GET /he")  # never finished: 408 after the head timeout
    assert line == "HTTP/1.0 408 Request Timeout"
    assert headers == {**SAFE, "content-type": "text/plain; charset=utf-8", "content-length": "44"}
    metrics = httpx.get(f"{server.address}/metrics", timeout=5)
    assert (metrics.status_code, metrics.headers["x-frame-options"]) == (200, "DENY")


@pytest.mark.parametrize(
    ("bound", "names", "host", "allowed"),
    [
        ("127.0.0.1", (), "127.0.0.1:9108", True),
        ("127.0.0.1", (), "localhost:9108", True),
        ("127.0.0.1", (), "LocalHost.:9108", True),
        ("127.0.0.1", (), "[::1]:9108", True),
        ("127.0.0.1", (), "localhost", True),
        ("127.0.0.1", (), "127.0.0.1:8080", True),  # kubectl port-forward 8080:9108: the port is not the check
        ("127.0.0.1", (), "rebound.attacker.example:9108", False),  # DNS rebinding: the attacker's name
        ("127.0.0.1", (), "127.0.0.1.nip.io:9108", False),
        ("127.0.0.1", (), "10.0.0.5:9108", False),
        ("127.0.0.1", (), "localhost.attacker.example", False),
        ("127.0.0.1", (), "", False),
        ("127.0.0.1", (), "[::1:9108", False),
        ("127.0.0.1", (), "::1", False),  # an IPv6 literal without brackets
        ("127.0.0.1", (), "localhost:http", False),
        ("127.0.0.1", (), "local host", False),
        ("0.0.0.0", (), "10.1.2.3:9108", True),  # a Kubernetes probe: Host is the pod's IP
        ("0.0.0.0", (), "[fd00::7]:9108", True),
        ("0.0.0.0", (), "localhost:9108", True),
        ("0.0.0.0", (), "backfillctl.monitoring.svc:9108", False),
        ("0.0.0.0", ("backfillctl.monitoring.svc",), "backfillctl.monitoring.svc:9108", True),
        ("0.0.0.0", ("backfillctl.monitoring.svc",), "BackfillCtl.Monitoring.SVC", True),
        ("0.0.0.0", ("backfillctl.monitoring.svc",), "evil.backfillctl.monitoring.svc", False),
        ("10.0.0.5", (), "10.0.0.5:9108", True),
        ("10.0.0.5", (), "10.0.0.6:9108", False),
        ("10.0.0.5", (), "localhost:9108", False),
        ("::1", (), "[::1]:9108", True),
        ("::1", (), "localhost", True),
        ("::", (), "[2001:db8::1]:9108", True),
        ("::", (), "status.example", False),
    ],
)
def test_the_host_check(bound: str, names: tuple[str, ...], host: str, allowed: bool) -> None:
    assert HostPolicy(bound, frozenset(names)).allows(host) is allowed


def test_a_wildcard_address_answers_ip_literals_and_configured_names_only(
    serve: Callable[..., MonitorServer],
) -> None:
    server = serve(host="0.0.0.0", host_names=["Status.Example.ORG"])
    port = port_of(server)
    asked = {
        host: httpx.get(f"http://127.0.0.1:{port}/healthz", headers={"Host": host}, timeout=5).status_code
        for host in ("10.9.8.7:9108", f"127.0.0.1:{port}", "status.example.org", "rebound.attacker.example")
    }
    assert asked == {
        "10.9.8.7:9108": 200,
        f"127.0.0.1:{port}": 200,
        "status.example.org": 200,
        "rebound.attacker.example": 421,
    }


def test_the_pass_hooks_serve_the_configured_host_names(tmp_path: Path) -> None:
    bench = Bench(tmp_path)
    try:
        options = MonitorOptions(port=0, host_names=("status.example.org",))
        with PassHooks(bench.settings(), options, deliver=False, env={}) as hooks:
            assert hooks.server is not None
            url = f"{hooks.server.address}/healthz"
            hosts = ("status.example.org", "other.example.org")
            asked = [httpx.get(url, headers={"Host": host}, timeout=5).status_code for host in hosts]
    finally:
        bench.close()
    assert asked == [200, 421]


def test_a_metrics_host_name_with_a_port_is_a_usage_error(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "controller", "reconcile", "--metrics-host-name", "status.example:9108"],
        cwd=tmp_path,
        env={**os.environ, "BACKFILLCTL_STORE_URL": f"sqlite:///{tmp_path}/s.db"},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stdout) == (2, "")
    assert done.stderr.splitlines()[-1] == (
        "Error: Invalid value for '--metrics-host-name': 'status.example:9108' is not a host name: letters, "
        "digits, `-` and `.`, without a port"
    )
    assert not (tmp_path / "s.db").exists()
