"""Is a stop the stop workflow's? A GitHub Actions OIDC token proves it (pure): RS256 over the issuer's keys (JWKS),
its issuer, audience and lifetime, and its `repository` and `job_workflow_ref` claims against the policy's
`stop_workflow`. Anything else is `Unproven`, with a reason that never shows the token.

The token is a compact JWS (RFC 7515): base64url(header).base64url(claims).base64url(signature). Only `alg: RS256`
is accepted — never `none`, never an HMAC algorithm a public key could be misused as the secret of.
"""

from __future__ import annotations

import base64
import json
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from controller.core.model.oidc import AUDIENCE, StopWorkflow
from controller.core.rules.rs256 import key_problem, verify

SKEW_S = 60  # seconds of clock difference allowed around `exp`, `nbf` and `iat`
MAX_TOKEN = 16_384  # characters: GitHub's tokens are about 1,500
_B64URL = re.compile(r"[A-Za-z0-9_-]*")
_SHOWN = 100  # characters of a claim a reason shows


class Unproven(ValueError):
    """Why a token proves nothing; its text is safe to show and record (never the token)."""


@dataclass(frozen=True, slots=True)
class Token:
    header: Mapping[str, Any]
    claims: Mapping[str, Any]
    signed: bytes  # the bytes the signature covers: header.claims as sent
    signature: bytes


@dataclass(frozen=True, slots=True)
class Proof:
    actor: str  # the GitHub login that ran the workflow (who re-ran it, on a re-run)
    repository: str
    job_workflow_ref: str


def parse(text: str) -> Token:
    """The token's parts, its header checked (RS256 and a key id) before any key is fetched."""
    parts = text.strip().split(".")
    if len(text) > MAX_TOKEN or len(parts) != 3:
        raise Unproven("the token is not a JSON Web Token (three base64url parts)")
    header, claims = _json(parts[0], "header"), _json(parts[1], "claims")
    if header.get("alg") != "RS256":
        raise Unproven(f"the token's algorithm is {_shown(header.get('alg'))}, not RS256")
    if "crit" in header:
        raise Unproven("the token names critical header extensions, which are not understood")
    if not isinstance(header.get("kid"), str):
        raise Unproven("the token names no signing key (kid)")
    return Token(header, claims, f"{parts[0]}.{parts[1]}".encode("ascii"), _bytes(parts[2], "the token's signature"))


def prove(token: Token, keys: Any, expected: StopWorkflow, now: datetime) -> Proof:
    """The proof the token gives (its signature, then its claims), or `Unproven`."""
    n, e = _key(keys, str(token.header["kid"]))
    if not verify(n, e, token.signed, token.signature):
        raise Unproven(f"the token's signature does not verify with the issuer's key {_shown(token.header['kid'])}")
    claims = token.claims
    _check_issued(claims, expected, now.timestamp())
    _check_workflow(claims, expected)
    actor = claims.get("triggering_actor") or claims.get("actor")
    if not isinstance(actor, str) or not actor:
        raise Unproven("the token names no actor")
    return Proof(actor, str(claims["repository"]), str(claims["job_workflow_ref"]))


def _check_issued(claims: Mapping[str, Any], expected: StopWorkflow, now: float) -> None:
    """Who issued it, for whom, and when it is valid."""
    if claims.get("iss") != expected.issuer:
        raise Unproven(f"the token's issuer is {_shown(claims.get('iss'))}, not {expected.issuer}")
    audience = claims.get("aud")
    if audience != AUDIENCE and not (isinstance(audience, list) and AUDIENCE in audience):
        raise Unproven(f"the token's audience is {_shown(audience)}, not {AUDIENCE}")
    expires, begins, issued = (_time(claims, name) for name in ("exp", "nbf", "iat"))
    if expires is None:
        raise Unproven("the token has no expiry (exp)")
    if now > expires + SKEW_S:
        raise Unproven(f"the token expired {int(now - expires)} s ago")
    if begins is not None and now < begins - SKEW_S:
        raise Unproven(f"the token is valid only in {int(begins - now)} s (nbf)")
    if issued is not None and now < issued - SKEW_S:
        raise Unproven(f"the token was issued {int(issued - now)} s in the future (iat)")


def _check_workflow(claims: Mapping[str, Any], expected: StopWorkflow) -> None:
    """The run is the policy's stop workflow, in its repository (and at its ref, when the policy names one)."""
    repository = claims.get("repository")
    if not isinstance(repository, str) or repository.lower() != expected.repository.lower():
        raise Unproven(f"the token's repository is {_shown(repository)}, not {expected.repository}")
    ref = claims.get("job_workflow_ref")
    if not isinstance(ref, str) or "@" not in ref or not _same_workflow(ref.partition("@")[0], expected.job_workflow):
        raise Unproven(f"the token's job_workflow_ref is {_shown(ref)}, not {expected.job_workflow}@…")
    if expected.ref is not None and claims.get("ref") != expected.ref:
        raise Unproven(f"the token's ref is {_shown(claims.get('ref'))}, not {expected.ref}")


def _same_workflow(path: str, expected: str) -> bool:
    """OWNER/NAME compare as GitHub does (in any case), the file's path exactly."""
    mine, theirs = path.split("/", 2), expected.split("/", 2)
    return len(mine) == len(theirs) == 3 and (mine[0].lower(), mine[1].lower(), mine[2]) == (
        theirs[0].lower(),
        theirs[1].lower(),
        theirs[2],
    )


def _key(keys: Any, kid: str) -> tuple[int, int]:
    """The issuer's RSA signing key with id `kid`, as (n, e)."""
    listed = keys.get("keys") if isinstance(keys, Mapping) else None
    found = [
        k
        for k in (listed if isinstance(listed, list) else ())
        if isinstance(k, Mapping)
        and k.get("kid") == kid
        and k.get("kty") == "RSA"
        and k.get("use", "sig") == "sig"
        and k.get("alg", "RS256") == "RS256"
    ]
    if not found:
        raise Unproven(f"the issuer has no RS256 signing key {_shown(kid)}")
    n, e = (int.from_bytes(_bytes(str(found[0].get(part, "")), f"the issuer's key {part}"), "big") for part in "ne")
    problem = key_problem(n, e)
    if problem is not None:
        raise Unproven(f"the issuer's key {_shown(kid)} is refused: {problem}")
    return n, e


def _bytes(part: str, what: str) -> bytes:
    """Strict base64url without padding (RFC 7515 §2)."""
    if not _B64URL.fullmatch(part) or len(part) % 4 == 1:
        raise Unproven(f"{what} is not base64url")
    return base64.urlsafe_b64decode(part + "=" * (-len(part) % 4))  # the pattern and length leave no error


def _json(part: str, what: str) -> Mapping[str, Any]:
    raw = _bytes(part, f"the token's {what}")
    try:
        value = json.loads(raw, parse_constant=_no_constant)
    except ValueError:  # not UTF-8, not JSON, or NaN/Infinity (an `exp` that never comes)
        raise Unproven(f"the token's {what} is not JSON") from None
    if not isinstance(value, dict):
        raise Unproven(f"the token's {what} is not a JSON object")
    return value


def _no_constant(name: str) -> None:
    raise ValueError(name)


def _time(claims: Mapping[str, Any], name: str) -> float | None:
    value = claims.get(name)
    if value is None:
        return None
    seconds = float(value) if isinstance(value, (int, float)) and abs(value) < 1e12 else math.nan  # a bool is an int
    if isinstance(value, bool) or math.isnan(seconds):
        raise Unproven(f"the token's {name} is not a number of seconds")
    return seconds


def _shown(value: Any) -> str:
    """A claim as a reason shows it: quoted with escapes (outside text), cut short."""
    text = repr(value)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"
