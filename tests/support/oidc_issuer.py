"""A local OIDC issuer for the stop workflow's tokens: RSA keys made by `openssl genrsa` (read back with
`openssl rsa -text -noout`), tokens signed in the test with pow(m, d, n), and the key set served by a loopback
http.server, as GitHub serves https://token.actions.githubusercontent.com/.well-known/jwks."""

from __future__ import annotations

import base64
import functools
import http.server
import json
import os
import re
import subprocess
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.core.rules.rs256 import encoded

REPOSITORY = "acme/backfill-specs"
WORKFLOW = "acme/backfillctl/.github/workflows/reusable-backfill-stop.yml"
NOW = 1_767_225_600  # 2026-01-01T00:00:00Z
# generated keys are kept per machine: `openssl genrsa 2048` takes 0.1–2 s, and every process would pay it again (each
# mutant that mutation testing runs is a process of its own: 3 s a mutant of core/rules/rs256.py without this)
KEPT = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "backfillctl" / "test-keys"


@dataclass(frozen=True)
class RsaKey:
    n: int
    e: int
    d: int
    kid: str

    @property
    def size(self) -> int:
        return (self.n.bit_length() + 7) // 8

    def sign(self, message: bytes) -> bytes:
        """RS256: EMSA-PKCS1-v1_5 of SHA-256, then the private-key operation."""
        return self.raw(encoded(message, self.size))

    def raw(self, block: bytes) -> bytes:
        """The private-key operation on any block (a test forges padding with it)."""
        return pow(int.from_bytes(block, "big"), self.d, self.n).to_bytes(self.size, "big")

    def jwk(self) -> dict[str, str]:
        return {
            "kty": "RSA",
            "kid": self.kid,
            "use": "sig",
            "alg": "RS256",
            "n": b64(_bytes(self.n)),
            "e": b64(_bytes(self.e)),
        }


@functools.cache
def rsa_key(kid: str, bits: int = 2048) -> RsaKey:
    """An RSA key from openssl, one per kid and size (made once on this machine, then kept: `KEPT`)."""
    assert re.fullmatch(r"[\w-]+", kid), f"{kid!r} names a kept file: letters, digits, - and _"
    numbers = kept(f"rsa-{kid}-{bits}.json", lambda: _numbers(generated(bits)), _numbers_or_none)
    assert numbers is not None
    return RsaKey(int(numbers["n"], 16), int(numbers["e"]), int(numbers["d"], 16), kid)


def generated(bits: int, *form: str) -> bytes:
    """A new private key in PEM as `openssl genrsa` writes it (`form`: e.g. `-traditional`, PKCS#1)."""
    return subprocess.run(["openssl", "genrsa", *form, str(bits)], capture_output=True, check=True).stdout


@functools.cache
def openssl_version() -> str:
    """This machine's openssl release (kept PEMs are per release: a new one may write another form)."""
    return subprocess.run(["openssl", "version"], capture_output=True, text=True, check=True).stdout.split()[1]


def openssl_pem(bits: int, *form: str) -> bytes:
    """`generated(bits, *form)`, made once per openssl release on this machine, then kept."""
    name = f"openssl-{openssl_version()}-genrsa{''.join(form)}-{bits}.pem"
    pem: bytes = kept(name, lambda: generated(bits, *form), _pem_or_none)
    return pem


def _pem_or_none(data: bytes) -> bytes | None:
    return data if data.startswith(b"-----BEGIN ") and data.rstrip().endswith(b"-----") else None


def kept(name: str, make: Callable[[], bytes], read: Callable[[bytes], Any]) -> Any:
    """`read` of what `make()` made once and `KEPT` keeps as `name` (made again when `read` finds it unreadable:
    None); written whole or not at all, so a process that reads it beside one that writes it never sees half."""
    path = KEPT / name
    try:
        found = read(path.read_bytes())
    except OSError:
        found = None
    if found is not None:
        return found
    data = make()
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f".{name}.{os.getpid()}")
    partial.write_bytes(data)
    os.replace(partial, path)
    return read(data)


def _numbers(pem: bytes) -> bytes:
    text = subprocess.run(
        ["openssl", "rsa", "-text", "-noout"], input=pem, capture_output=True, check=True
    ).stdout.decode()
    numbers = {"n": f"{_field(text, 'modulus'):x}", "e": _exponent(text), "d": f"{_field(text, 'privateExponent'):x}"}
    return json.dumps(numbers).encode()


def _numbers_or_none(data: bytes) -> dict[str, Any] | None:
    try:
        numbers = json.loads(data)
    except ValueError:
        return None
    return numbers if isinstance(numbers, dict) and {"n", "e", "d"} <= numbers.keys() else None


def _field(text: str, name: str) -> int:
    block = re.search(rf"^{name}:\n((?:\s+[0-9a-f:]+\n)+)", text, re.MULTILINE)
    assert block is not None, f"openssl printed no {name}"
    return int(re.sub(r"[\s:]", "", block.group(1)), 16)


def _exponent(text: str) -> int:
    found = re.search(r"^publicExponent: (\d+)", text, re.MULTILINE)
    assert found is not None
    return int(found.group(1))


def _bytes(value: int) -> bytes:
    return value.to_bytes((value.bit_length() + 7) // 8, "big")


def b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def part(value: Any) -> str:
    return b64(json.dumps(value).encode())


def claims(issuer: str, at: int = NOW, **changed: Any) -> dict[str, Any]:
    """What GitHub's token for the stop workflow says, issued at `at` (a claim set to None is left out)."""
    base = {
        "iss": issuer,
        "aud": "backfillctl",
        "sub": f"repo:{REPOSITORY}:ref:refs/heads/main",
        "repository": REPOSITORY,
        "repository_owner": "acme",
        "ref": "refs/heads/main",
        "actor": "wh-owner",
        "triggering_actor": "wh-owner",
        "event_name": "workflow_dispatch",
        "workflow_ref": f"{REPOSITORY}/.github/workflows/backfill-stop.yml@refs/heads/main",
        "job_workflow_ref": f"{WORKFLOW}@refs/tags/v1.4.0",
        "iat": at - 10,
        "nbf": at - 10,
        "exp": at + 290,
    }
    return {k: v for k, v in {**base, **changed}.items() if v is not None}


def token(key: RsaKey, body: Mapping[str, Any], **header: Any) -> str:
    """A compact JWS signed with `key` (its header: RS256 and the key's id, unless changed)."""
    head = part({"typ": "JWT", "alg": "RS256", "kid": key.kid, **header})
    signed = f"{head}.{part(body)}"
    return f"{signed}.{b64(key.sign(signed.encode()))}"


@contextmanager
def issuer(*keys: RsaKey) -> Iterator[str]:
    """A loopback issuer serving `keys` at /.well-known/jwks; yields its URL. Every path it was asked is kept in
    the handler's `asked` (the key set is read only when a token's header passed)."""
    body = json.dumps({"keys": [k.jwk() for k in keys]}).encode()
    asked: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            asked.append(self.path)
            found = self.path == "/.well-known/jwks"
            self.send_response(200 if found else 404)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body if found else b"{}")

        def log_message(self, *_args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}"
        ISSUED[url] = asked
        yield url
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


ISSUED: dict[str, list[str]] = {}  # issuer URL → the paths it was asked (while it serves)
