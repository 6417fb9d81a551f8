"""A stop workflow's OIDC token, checked without a JWT library: the one valid token proves its actor, and every
forgery — no signature, another key's, alg none or HS256, another audience, issuer, repository or workflow, an
expired or future token, a malformed one — is `Unproven` with its exact reason."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from controller.core.model.oidc import GITHUB_ISSUER, StopWorkflow, parse_stop_workflow
from controller.core.rules.oidc import MAX_TOKEN, SKEW_S, Proof, Unproven, parse, prove
from tests.support.oidc_issuer import NOW, REPOSITORY, WORKFLOW, RsaKey, b64, claims, part, rsa_key, token

ISSUER = "http://127.0.0.1:9"
EXPECTED = StopWorkflow(REPOSITORY, WORKFLOW, issuer=ISSUER)
AT = datetime.fromtimestamp(NOW, UTC)
RS256 = part({"alg": "RS256", "kid": "k"})
NAN, INFINITY = b64(b'{"exp": NaN}'), b64(b'{"exp": Infinity}')  # JSON that Python reads, but not a number


@pytest.fixture(scope="module")
def key() -> RsaKey:
    return rsa_key("github-1")


def jwks(*keys: RsaKey) -> dict[str, Any]:
    return {"keys": [k.jwk() for k in keys]}


def proven(text: str, key: RsaKey, expected: StopWorkflow = EXPECTED, at: datetime = AT) -> Proof:
    return prove(parse(text), jwks(rsa_key("github-0"), key), expected, at)


def why(text: str, key: RsaKey, expected: StopWorkflow = EXPECTED, at: datetime = AT) -> str:
    with pytest.raises(Unproven) as refused:
        proven(text, key, expected, at)
    return str(refused.value)


def test_the_stop_workflows_token_proves_its_actor(key: RsaKey) -> None:
    assert proven(token(key, claims(ISSUER)), key) == Proof("wh-owner", REPOSITORY, f"{WORKFLOW}@refs/tags/v1.4.0")
    rerun = claims(ISSUER, actor="alice", triggering_actor="bob")  # a re-run is the re-runner's
    assert proven(token(key, rerun), key).actor == "bob"
    assert proven(token(key, claims(ISSUER, triggering_actor=None)), key).actor == "wh-owner"
    listed = claims(ISSUER, aud=["other", "backfillctl"], nbf=None, iat=None)
    assert proven(token(key, listed), key).actor == "wh-owner"
    at_in_ref = claims(ISSUER, job_workflow_ref=f"{WORKFLOW}@refs/heads/fix@2")  # a ref may hold an @
    assert proven(token(key, at_in_ref), key).job_workflow_ref == f"{WORKFLOW}@refs/heads/fix@2"
    upper = claims(
        ISSUER, repository="ACME/Backfill-Specs", job_workflow_ref=f"ACME/BackfillCTL/{WORKFLOW.split('/', 2)[2]}@x"
    )
    assert proven(token(key, upper), key).repository == "ACME/Backfill-Specs"  # owner/name in any case


@pytest.mark.parametrize(
    ("changed", "reason"),
    [
        ({"aud": "sts.amazonaws.com"}, "the token's audience is 'sts.amazonaws.com', not backfillctl"),
        ({"aud": ["sts.amazonaws.com"]}, "the token's audience is ['sts.amazonaws.com'], not backfillctl"),
        ({"aud": None}, "the token's audience is None, not backfillctl"),
        ({"iss": GITHUB_ISSUER}, f"the token's issuer is '{GITHUB_ISSUER}', not {ISSUER}"),
        ({"exp": NOW - SKEW_S - 1}, "the token expired 61 s ago"),
        ({"exp": None}, "the token has no expiry (exp)"),
        ({"exp": "soon"}, "the token's exp is not a number of seconds"),
        ({"exp": True}, "the token's exp is not a number of seconds"),
        ({"exp": 10**400}, "the token's exp is not a number of seconds"),
        ({"exp": 10**12}, "the token's exp is not a number of seconds"),
        ({"nbf": NOW + SKEW_S + 5}, "the token is valid only in 65 s (nbf)"),
        ({"iat": NOW + SKEW_S + 7}, "the token was issued 67 s in the future (iat)"),
        (
            {"repository": "mallory/backfill-specs"},
            f"the token's repository is 'mallory/backfill-specs', not {REPOSITORY}",
        ),
        ({"repository": None}, f"the token's repository is None, not {REPOSITORY}"),
        (
            {"job_workflow_ref": f"{REPOSITORY}/.github/workflows/mine.yml@refs/heads/main"},
            f"the token's job_workflow_ref is '{REPOSITORY}/.github/workflows/mine.yml@refs/heads/main', not "
            f"{WORKFLOW}@…",
        ),
        (
            {"job_workflow_ref": WORKFLOW.replace("reusable", "Reusable") + "@v1"},  # a file's path is exact
            f"the token's job_workflow_ref is '{WORKFLOW.replace('reusable', 'Reusable')}@v1', not {WORKFLOW}@…",
        ),
        ({"job_workflow_ref": WORKFLOW}, f"the token's job_workflow_ref is '{WORKFLOW}', not {WORKFLOW}@…"),
        (
            {"job_workflow_ref": "acme/backfillctl@v1"},
            f"the token's job_workflow_ref is 'acme/backfillctl@v1', not {WORKFLOW}@…",
        ),
        ({"job_workflow_ref": None}, f"the token's job_workflow_ref is None, not {WORKFLOW}@…"),
        ({"actor": None, "triggering_actor": None}, "the token names no actor"),
        ({"actor": "", "triggering_actor": ""}, "the token names no actor"),
    ],
)
def test_a_token_of_another_run_proves_nothing(key: RsaKey, changed: dict[str, Any], reason: str) -> None:
    assert why(token(key, claims(ISSUER, **changed)), key) == reason


def test_the_skew_allows_a_minute_either_way(key: RsaKey) -> None:
    edge = claims(ISSUER, exp=NOW - SKEW_S, nbf=NOW + SKEW_S, iat=NOW + SKEW_S)
    assert proven(token(key, edge), key).actor == "wh-owner"


def test_a_pinned_ref_must_match(key: RsaKey) -> None:
    pinned = StopWorkflow(REPOSITORY, WORKFLOW, "refs/heads/main", ISSUER)
    assert proven(token(key, claims(ISSUER)), key, pinned).actor == "wh-owner"
    assert why(token(key, claims(ISSUER, ref="refs/heads/evil")), key, pinned) == (
        "the token's ref is 'refs/heads/evil', not refs/heads/main"
    )


def test_a_workflow_in_the_repository_itself(key: RsaKey) -> None:
    local = StopWorkflow(REPOSITORY, ".github/workflows/stop.yml", issuer=ISSUER)
    assert local.job_workflow == f"{REPOSITORY}/.github/workflows/stop.yml"
    own = claims(ISSUER, job_workflow_ref=f"{REPOSITORY}/.github/workflows/stop.yml@refs/heads/main")
    assert proven(token(key, own), key, local).actor == "wh-owner"
    assert parse_stop_workflow(None) is None
    assert parse_stop_workflow({"repository": "a/b", "workflow": "c/d/.github/workflows/e.yml"}) == StopWorkflow(
        "a/b", "c/d/.github/workflows/e.yml", None, GITHUB_ISSUER
    )
    raw = {"repository": "a/b", "workflow": ".github/workflows/e.yml", "ref": "refs/heads/main", "issuer": ISSUER}
    assert parse_stop_workflow(raw) == StopWorkflow("a/b", ".github/workflows/e.yml", "refs/heads/main", ISSUER)


def test_a_signature_that_does_not_verify_proves_nothing(key: RsaKey) -> None:
    other = rsa_key("github-2")
    forged = token(other, claims(ISSUER), kid=key.kid)  # another key, claiming the issuer's key id
    assert why(forged, key) == "the token's signature does not verify with the issuer's key 'github-1'"
    head, body, signature = token(key, claims(ISSUER)).split(".")
    edited = part(claims(ISSUER, actor="mallory", triggering_actor="mallory"))
    assert why(f"{head}.{edited}.{signature}", key) == (
        "the token's signature does not verify with the issuer's key 'github-1'"
    )
    assert why(f"{head}.{body}.", key) == "the token's signature does not verify with the issuer's key 'github-1'"
    assert why(token(other, claims(ISSUER)), key) == "the issuer has no RS256 signing key 'github-2'"


@pytest.mark.parametrize(
    ("header", "reason"),
    [
        ({"alg": "none"}, "the token's algorithm is 'none', not RS256"),
        ({"alg": "HS256"}, "the token's algorithm is 'HS256', not RS256"),
        ({"alg": "RS512"}, "the token's algorithm is 'RS512', not RS256"),
        ({"alg": None}, "the token's algorithm is None, not RS256"),
        ({"kid": None}, "the token names no signing key (kid)"),
        ({"kid": 7}, "the token names no signing key (kid)"),
        ({"crit": ["exp"]}, "the token names critical header extensions, which are not understood"),
    ],
)
def test_a_header_that_is_not_rs256_with_a_key_is_refused_before_any_key_is_read(
    key: RsaKey, header: dict[str, Any], reason: str
) -> None:
    text = token(key, claims(ISSUER), **header)
    with pytest.raises(Unproven) as refused:
        parse(text)
    assert str(refused.value) == reason


def test_an_unsigned_token_is_refused(key: RsaKey) -> None:
    unsigned = f"{part({'alg': 'none', 'typ': 'JWT'})}.{part(claims(ISSUER))}."
    with pytest.raises(Unproven, match=r"^the token's algorithm is 'none', not RS256$"):
        parse(unsigned)


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "the token is not a JSON Web Token (three base64url parts)"),
        ("a.b", "the token is not a JSON Web Token (three base64url parts)"),
        ("a.b.c.d", "the token is not a JSON Web Token (three base64url parts)"),
        ("e30.e30." + "A" * MAX_TOKEN, "the token is not a JSON Web Token (three base64url parts)"),
        ("e30.e30." + "A" * (MAX_TOKEN - 8), "the token's algorithm is None, not RS256"),  # the longest read
        ("e3=.e30.AA", "the token's header is not base64url"),
        ("e30.e3+.AA", "the token's claims is not base64url"),
        (f"{RS256}.e30.A", "the token's signature is not base64url"),  # a length base64 cannot have
        ("e30.e30.AA", "the token's algorithm is None, not RS256"),
        (f"{b64(b'[1]')}.e30.AA", "the token's header is not a JSON object"),
        (f"{b64(b'{')}.e30.AA", "the token's header is not JSON"),
        (f"{b64(bytes([255]))}.e30.AA", "the token's header is not JSON"),
        (f"{RS256}.{NAN}.AA", "the token's claims is not JSON"),
        (f"{RS256}.{INFINITY}.AA", "the token's claims is not JSON"),
    ],
)
def test_a_malformed_token_is_refused(text: str, reason: str) -> None:
    with pytest.raises(Unproven) as refused:
        parse(text)
    assert str(refused.value) == reason


def test_a_token_with_surrounding_space_is_read(key: RsaKey) -> None:
    assert parse(f"  {token(key, claims(ISSUER))}\n").header["kid"] == "github-1"


@pytest.mark.parametrize(
    ("keys", "reason"),
    [
        ({}, "the issuer has no RS256 signing key 'github-1'"),
        ({"keys": "none"}, "the issuer has no RS256 signing key 'github-1'"),
        ({"keys": ["x"]}, "the issuer has no RS256 signing key 'github-1'"),
        ([], "the issuer has no RS256 signing key 'github-1'"),
    ],
)
def test_a_key_set_without_the_key_proves_nothing(key: RsaKey, keys: Any, reason: str) -> None:
    with pytest.raises(Unproven) as refused:
        prove(parse(token(key, claims(ISSUER))), keys, EXPECTED, AT)
    assert str(refused.value) == reason


@pytest.mark.parametrize(
    ("changed", "reason"),
    [
        ({"kty": "EC"}, "the issuer has no RS256 signing key 'github-1'"),
        ({"use": "enc"}, "the issuer has no RS256 signing key 'github-1'"),
        ({"alg": "RS512"}, "the issuer has no RS256 signing key 'github-1'"),
        (
            {"e": b64(b"\x01")},
            "the issuer's key 'github-1' is refused: the key's exponent 1 is not an odd number from 3 up",
        ),
        ({"n": "AQAB"}, "the issuer's key 'github-1' is refused: the key has 17 bits, fewer than 2048"),
        ({"n": "A=="}, "the issuer's key n is not base64url"),
        ({"n": None}, "the issuer's key 'github-1' is refused: the key has 0 bits, fewer than 2048"),
    ],
)
def test_a_key_that_is_not_an_rs256_signing_key_is_refused(key: RsaKey, changed: dict[str, str], reason: str) -> None:
    keys = {"keys": [{k: v for k, v in {**key.jwk(), **changed}.items() if v is not None}]}
    with pytest.raises(Unproven) as refused:
        prove(parse(token(key, claims(ISSUER))), keys, EXPECTED, AT)
    assert str(refused.value) == reason


def test_a_key_without_use_or_alg_is_a_signing_key(key: RsaKey) -> None:
    bare = {k: v for k, v in key.jwk().items() if k not in ("use", "alg")}
    assert prove(parse(token(key, claims(ISSUER))), {"keys": [bare]}, EXPECTED, AT).actor == "wh-owner"


def test_a_long_claim_is_shown_cut_short(key: RsaKey) -> None:
    long = "x" * 300
    assert why(token(key, claims(ISSUER, repository=long)), key) == (
        f"the token's repository is '{'x' * 98}…, not {REPOSITORY}"
    )
    exact = "y" * 98  # its repr is as long as a reason shows
    assert (
        why(token(key, claims(ISSUER, repository=exact)), key)
        == f"the token's repository is '{exact}', not {REPOSITORY}"
    )
    assert why(token(key, claims(ISSUER, repository="a\nb")), key) == (
        f"the token's repository is 'a\\nb', not {REPOSITORY}"
    )
