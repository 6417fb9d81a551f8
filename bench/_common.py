"""Shared helpers for the side-by-side benchmarks: whole-process timing, medians, tables, a counting proxy.

Standard library only (the Airflow-side floor clients use httpx, which the project already depends on).
Timings are wall-clock medians of whole processes; CPU is user+sys of the child (from wait4), which is
less sensitive to other load on the machine than wall time.
"""

from __future__ import annotations

import compileall
import http.client
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

if TYPE_CHECKING:
    from controller.core.model.binding import Binding

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
AIRFLOW_VENV = Path(
    os.environ.get("BACKFILLCTL_AIRFLOW_VENV", Path.home() / ".cache" / "backfillctl" / "airflow-3.3.2")
)


@dataclass
class Run:
    wall: float
    cpu: float
    rss_kb: int
    returncode: int
    stdout: str = ""
    stderr: str = ""


def run(
    command: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    check: bool = True,
    ok_codes: Sequence[int] = (0,),
) -> Run:
    """Run one whole process; wall time, child CPU (user+sys) and peak RSS from wait4."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        list(command),
        cwd=cwd,
        env=dict(env) if env is not None else None,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    out, err = _communicate(proc)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - started
    code = os.waitstatus_to_exitcode(status)
    proc.returncode = code
    result = Run(wall, usage.ru_utime + usage.ru_stime, usage.ru_maxrss, code, out, err)
    if check and code not in ok_codes:
        sys.exit(f"{shlex.join(command)} exited {code}:\n{out[-3000:]}\n{err[-3000:]}")
    return result


def _communicate(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """Read both pipes without reaping the child (wait4 does that, to get its rusage)."""
    chunks: dict[str, list[str]] = {"out": [], "err": []}

    def drain(name: str, stream: object) -> None:
        chunks[name].append(stream.read())  # type: ignore[attr-defined]

    threads = [
        threading.Thread(target=drain, args=("out", proc.stdout)),
        threading.Thread(target=drain, args=("err", proc.stderr)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return "".join(chunks["out"]), "".join(chunks["err"])


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def alternate(rounds: int, actions: Mapping[str, Callable[[int], float | Run]]) -> dict[str, list[float | Run]]:
    """Run each action once per round, in turn (A B C A B C …), so load changes hit all of them alike."""
    results: dict[str, list[float | Run]] = {name: [] for name in actions}
    for index in range(rounds):
        for name, action in actions.items():
            results[name].append(action(index))
    return results


def load_note() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} cores"


def table(title: str, header: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A small GitHub-markdown table (also readable as plain text)."""
    cells = [[str(c) for c in header], *[[_cell(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = [f"### {title}", ""]
    for n, row in enumerate(cells):
        lines.append("| " + " | ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " |")
        if n == 0:
            lines.append("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines) + "\n"


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def secs(value: float) -> str:
    return f"{value:.3f} s" if value < 1 else f"{value:.2f} s"


def ratio(value: float, floor: float) -> str:
    return f"{value / floor:.2f}×" if floor > 0 else "-"


# --- Airflow ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class AirflowEnv:
    url: str
    username: str | None
    password: str | None
    token: str | None


def airflow_env() -> AirflowEnv:
    """The running local Airflow from BACKFILLCTL_AIRFLOW_*; exits with how to start one when unset."""
    url = os.environ.get("BACKFILLCTL_AIRFLOW_URL", "").rstrip("/")
    if not url:
        sys.exit(
            "BACKFILLCTL_AIRFLOW_URL is not set: this benchmark needs a running local Airflow 3.3.2.\n"
            "  scripts/airflow-local up --dir /tmp/bench-airflow --fresh\n"
            '  eval "$(scripts/airflow-local env --dir /tmp/bench-airflow)"'
        )
    return AirflowEnv(
        url,
        os.environ.get("BACKFILLCTL_AIRFLOW_USERNAME"),
        os.environ.get("BACKFILLCTL_AIRFLOW_PASSWORD"),
        os.environ.get("BACKFILLCTL_AIRFLOW_TOKEN"),
    )


def airflow_cli_env(airflow_dir: Path) -> dict[str, str]:
    """The environment the harness gave Airflow's processes (DIR/airflow.env), for `airflow …` commands."""
    env = dict(os.environ)
    source = airflow_dir / "airflow.env"
    if not source.is_file():
        sys.exit(f"{source} not found: pass --airflow-dir, the --dir given to scripts/airflow-local up")
    for line in source.read_text().splitlines():
        if line.startswith("export "):
            key, _, value = line[len("export ") :].partition("=")
            env[key] = shlex.split(value)[0] if value else ""
    env["PATH"] = f"{AIRFLOW_VENV / 'bin'}:{env.get('PATH', '')}"
    return env


@dataclass
class CountingProxy:
    """A loopback HTTP proxy in front of Airflow that counts requests by (method, route); with `latency`, each
    request waits that long before it is forwarded (a remote Airflow's round trip, which loopback lacks)."""

    target: str
    latency: float = 0.0
    calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    # (method, route, seconds until Airflow answered, status): the server's time, even when the client gave up
    timings: list[tuple[str, str, float, int]] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def reset(self) -> Counter[tuple[str, str]]:
        seen, self.calls = self.calls, Counter()
        self.timings = []
        return seen

    def __enter__(self) -> CountingProxy:
        parts = urlsplit(self.target)
        host, port, proxy = parts.hostname or "127.0.0.1", parts.port or 80, self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body are two writes: Nagle held the body ~40 ms a response

            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                proxy.calls[(self.command, _route(self.path))] += 1
                time.sleep(proxy.latency)
                started = time.perf_counter()
                upstream = http.client.HTTPConnection(host, port, timeout=600)
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "connection")}
                upstream.request(self.command, self.path, body=body, headers=headers)
                response = upstream.getresponse()
                data = response.read()
                took = time.perf_counter() - started
                proxy.timings.append((self.command, _route(self.path), took, response.status))
                upstream.close()
                try:
                    self.send_response(response.status)
                    for key, value in response.getheaders():
                        if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                            self.send_header(key, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (its timeout): Airflow did not
                    self.close_connection = True

            do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _forward

            def log_message(self, *_: object) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *_: object) -> None:
        assert self._server is not None
        self._server.shutdown()
        self._server.server_close()


def _route(path: str) -> str:
    """/api/v2/backfills/12/pause?x → /api/v2/backfills/{id}/pause (numbers and DAG ids folded)."""
    parts = path.split("?", 1)[0].split("/")
    folded = []
    for i, part in enumerate(parts):
        if part.isdigit():
            folded.append("{id}")
        elif i > 0 and parts[i - 1] == "dags" and part != "~":
            folded.append("{dag}")
        else:
            folded.append(part)
    return "/".join(folded)


def calls_text(calls: Counter[tuple[str, str]]) -> str:
    return ", ".join(f"{n}× {m} {r}" for (m, r), n in sorted(calls.items(), key=lambda kv: (-kv[1], kv[0])))


def empty_pass_env(env: Mapping[str, str], specs: Path, store: Path, url: str) -> dict[str, str]:
    """The environment of a `reconcile --once` over the `specs` folder and the SQLite `store`, whose preflight a
    loopback server at `url` answers (`tests.fakes.loopback.serving`)."""
    return {
        **env,
        "BACKFILLCTL_SPECS_DIR": str(specs),
        "BACKFILLCTL_STORE_URL": f"sqlite:///{store}",
        "BACKFILLCTL_AIRFLOW_URL": url,
        "BACKFILLCTL_AIRFLOW_TOKEN": "bench-token",
    }


def backfillctl() -> str:
    return str(BIN / "backfillctl")


def finished_binding(name: str, dag: str, n: int, raw: bytes, airflow_url: str = "") -> Binding:
    """The binding of spec file `raw`, succeeded as the n-th seeded backfill (900000 + n)."""
    from controller.core.model.airflow import RunSummary  # noqa: PLC0415
    from controller.core.model.binding import Binding, Phase  # noqa: PLC0415 - benches import the controller only when seeding
    from controller.core.model.spec import digest  # noqa: PLC0415

    return Binding(
        name,
        dag,
        900000 + n,
        Phase.SUCCEEDED,
        spec_digest=digest(raw),
        reason="1 run(s) succeeded",
        runs=RunSummary({"success": 1}),
        backfills=(900000 + n,),
        airflow_url=airflow_url,
    )


def commit_history(folder: Path, batches: Sequence[Sequence[str]]) -> None:
    """Make `folder` a git repository whose history adds its `specs/NAME.yaml` files batch by batch, one commit a
    batch an hour apart, by 7 authors (one `git fast-import` stream: 1,000 commits in a second)."""
    stream: list[bytes] = []
    for index, names in enumerate(batches):
        who, when = index % 7, 1_600_000_000 + index * 3600
        message = f"add {len(names)} spec(s)\n".encode()
        stream += [
            b"commit refs/heads/main\n",
            f"author Dev{who} <dev{who}@example.com> {when} +0000\n".encode(),
            f"committer Dev{who} <dev{who}@example.com> {when} +0000\n".encode(),
            b"data %d\n%s" % (len(message), message),
        ]
        for name in names:
            data = (folder / "specs" / f"{name}.yaml").read_bytes()
            stream.append(f"M 100644 inline specs/{name}.yaml\n".encode() + b"data %d\n%s\n" % (len(data), data))
    (folder / ".gitignore").write_text("state.db*\nbodies.json\n")
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    subprocess.run(["git", "fast-import", "--quiet"], input=b"".join(stream), cwd=folder, check=True)
    subprocess.run(["git", "checkout", "-q", "-f", "main"], cwd=folder, check=True)


def compile_bytecode(trees: list[Path]) -> None:
    """Write each tree's bytecode beside its modules (PYTHONDONTWRITEBYTECODE only stops a start from writing it):
    both checkouts then start as an installed package does, not one of them compiling every module each start."""
    for tree in trees:
        if not compileall.compile_dir(str(tree.resolve()), quiet=1):
            raise SystemExit(f"cannot compile {tree}")


def for_before(folder: Path, before: Path) -> Path:
    """A copy of `folder` (its git repository and its store) for the checkout at `before`: its store taken down to
    that checkout's schema head when it is older than this one's (a release refuses a store newer than it knows),
    so both releases run side by side on the same history."""
    import re  # noqa: PLC0415

    from sqlalchemy import create_engine  # noqa: PLC0415

    from controller.adapters.store.database import SCHEMA_HEAD, _alembic  # noqa: PLC0415

    compile_bytecode([REPO / "controller", before / "controller"])
    copy = folder.with_name(f"{folder.name}-before")
    shutil.rmtree(copy, ignore_errors=True)
    shutil.copytree(folder, copy, symlinks=True)
    source = (before / "controller" / "adapters" / "store" / "database.py").read_text()
    head = re.search(r'^SCHEMA_HEAD = "(\d+)"', source, re.MULTILINE)
    if head is not None and head[1] < SCHEMA_HEAD and (copy / "state.db").exists():
        engine = create_engine(f"sqlite:///{copy}/state.db")
        with engine.begin() as conn:
            _alembic(conn, "downgrade", head[1])
        engine.dispose()
    return copy
