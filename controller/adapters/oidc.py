"""The OIDC issuer's signing keys (httpx): its JWKS, read from ISSUER/.well-known/jwks (GitHub Actions':
https://token.actions.githubusercontent.com/.well-known/jwks). Every failure is an `IssuerError` naming the URL."""

from __future__ import annotations

import json
from typing import Any

import httpx

from controller.errors import ControllerError

JWKS_PATH = "/.well-known/jwks"
TIMEOUT_S = 10.0
MAX_BYTES = 1_048_576  # GitHub's key set is about 3 KB


class IssuerError(ControllerError):
    """The issuer's keys could not be read: no stop can be proven with them."""


def issuer_keys(issuer: str, *, timeout: float = TIMEOUT_S, transport: httpx.BaseTransport | None = None) -> Any:
    """The issuer's JSON Web Key Set, as JSON (`core.rules.oidc` picks the key); redirects are not followed."""
    url = issuer.rstrip("/") + JWKS_PATH
    try:
        with (
            httpx.Client(timeout=timeout, transport=transport, follow_redirects=False) as client,
            client.stream("GET", url, headers={"Accept": "application/json"}) as response,
        ):
            body = _bounded(response)
    except httpx.HTTPError as exc:
        raise IssuerError(f"the issuer's keys at {url} could not be read ({type(exc).__name__})") from None
    if response.status_code != httpx.codes.OK:
        raise IssuerError(f"the issuer's keys at {url} answered HTTP {response.status_code}")
    try:
        return json.loads(body)
    except ValueError:
        raise IssuerError(f"the issuer's keys at {url} are not JSON") from None


def _bounded(response: httpx.Response) -> bytes:
    body = b""
    for chunk in response.iter_bytes():
        body += chunk
        if len(body) > MAX_BYTES:
            raise IssuerError(f"the issuer's keys at {response.request.url} are larger than {MAX_BYTES} bytes")
    return body
