"""RS256 with the standard library: a signature made with openssl's key verifies, and every other block — another
key's, another message's, another length, another padding or digest — does not."""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import subprocess
from pathlib import Path

import pytest

from controller.core.rules.rs256 import SHA256_DIGEST_INFO, encoded, key_problem, sign, verify
from controller.core.rules.rsakey import private_key
from tests.support import oidc_issuer
from tests.support.oidc_issuer import RsaKey, kept, openssl_pem, rsa_key

MESSAGE = b"eyJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJiYWNrZmlsbGN0bCJ9"


@pytest.fixture(scope="module")
def key() -> RsaKey:
    return rsa_key("k1")


def test_the_encoding_is_rfc_8017s() -> None:
    block = encoded(b"abc", 256)
    digest = hashlib.sha256(b"abc").digest()
    assert len(block) == 256
    assert block == b"\x00\x01" + b"\xff" * 202 + b"\x00" + SHA256_DIGEST_INFO + digest
    assert encoded(b"abc", 62)[:11] == b"\x00\x01" + b"\xff" * 8 + b"\x00"  # the shortest padding: 8 bytes
    with pytest.raises(ValueError, match=r"^a 61-byte modulus is too short for a SHA-256 signature$"):
        encoded(b"abc", 61)


def test_a_signature_verifies_with_its_key_only(key: RsaKey) -> None:
    signature = key.sign(MESSAGE)
    assert verify(key.n, key.e, MESSAGE, signature) is True
    assert verify(key.n, key.e, MESSAGE + b"x", signature) is False
    other = rsa_key("k2")
    assert verify(other.n, other.e, MESSAGE, signature) is False
    assert verify(key.n, key.e, MESSAGE, other.sign(MESSAGE)) is False


def test_a_signature_of_another_length_or_out_of_range_is_refused(key: RsaKey) -> None:
    signature = key.sign(MESSAGE)
    assert verify(key.n, key.e, MESSAGE, b"\x00" + signature) is False
    assert verify(key.n, key.e, MESSAGE, signature[1:]) is False
    assert verify(key.n, key.e, MESSAGE, b"") is False
    shifted = int.from_bytes(signature, "big") + key.n  # the same residue, out of range
    if shifted < 256**key.size:
        assert verify(key.n, key.e, MESSAGE, shifted.to_bytes(key.size, "big")) is False
    assert verify(key.n, key.e, MESSAGE, key.n.to_bytes(key.size, "big")) is False
    assert verify(key.n, key.e, MESSAGE, (key.n - 1).to_bytes(key.size, "big")) is False


def _forged(key: RsaKey, block: bytes) -> bool:
    """Whether a block the key signs raw (whatever its padding) passes as the signature of MESSAGE."""
    return verify(key.n, key.e, MESSAGE, key.raw(block))


def test_only_the_one_encoding_passes(key: RsaKey) -> None:
    good = encoded(MESSAGE, key.size)
    assert _forged(key, good) is True
    digest = hashlib.sha256(MESSAGE).digest()
    info = SHA256_DIGEST_INFO + digest
    sha1 = bytes.fromhex("3021300906052b0e03021a05000414") + hashlib.sha1(MESSAGE).digest()
    forgeries = {
        "block type 2": b"\x00\x02" + good[2:],
        "no leading zero": b"\x01\x01" + good[2:],
        "a zero in the padding": good[:5] + b"\x00" + good[6:],
        "short padding, garbage after the hash": b"\x00\x01"
        + b"\xff" * 8
        + b"\x00"
        + info
        + b"\x00" * (key.size - 11 - len(info)),
        "no separator": b"\x00\x01" + b"\xff" * (key.size - 2 - len(info)) + info,
        "SHA-1": b"\x00\x01" + b"\xff" * (key.size - 3 - len(sha1)) + b"\x00" + sha1,
        "the bare hash": b"\x00\x01" + b"\xff" * (key.size - 3 - len(digest)) + b"\x00" + digest,
        "another hash": good[:-1] + bytes([good[-1] ^ 1]),
        "another DigestInfo parameter": good[: -len(info)] + info.replace(b"\x05\x00", b"\x04\x00", 1),
    }
    assert {name: _forged(key, block) for name, block in forgeries.items()} == dict.fromkeys(forgeries, False)


@pytest.mark.parametrize(
    ("n", "e", "problem"),
    [
        (2**2047 + 1, 65537, None),
        (2**2047 - 1, 65537, "the key has 2047 bits, fewer than 2048"),
        (2**2047 + 1, 1, "the key's exponent 1 is not an odd number from 3 up"),
        (2**2047 + 1, 3, None),
        (2**2047 + 1, 2, "the key's exponent 2 is not an odd number from 3 up"),
        (2**2047 + 1, 65536, "the key's exponent 65536 is not an odd number from 3 up"),
        (2**2047 + 1, 2**2047 + 1, f"the key's exponent {2**2047 + 1} is not an odd number from 3 up"),
        (2**2047 + 3, 2**2047 + 1, None),
    ],
)
def test_a_weak_key_is_refused(n: int, e: int, problem: str | None) -> None:
    assert key_problem(n, e) == problem


def test_a_weak_key_verifies_nothing(key: RsaKey) -> None:
    signature = key.sign(MESSAGE)
    assert verify(key.n, 1, MESSAGE, signature) is False
    block = encoded(MESSAGE, key.size)
    assert verify(key.n, 1, MESSAGE, block) is False  # e = 1 would make the block its own signature
    small = rsa_key("small", 1024)
    assert verify(small.n, small.e, MESSAGE, small.sign(MESSAGE)) is False


@pytest.mark.parametrize("form", ["-traditional", ""])  # PKCS#1 (a GitHub App's key) and PKCS#8
def test_a_signature_made_here_is_one_openssl_verifies(form: str, tmp_path: Path) -> None:
    pem = tmp_path / "key.pem"  # openssl's own, in that form (made once on this machine, then kept)
    pem.write_bytes(openssl_pem(2048, *([form] if form else [])))
    lines = pem.read_text().splitlines()
    assert lines[0] == ("-----BEGIN RSA PRIVATE KEY-----" if form else "-----BEGIN PRIVATE KEY-----")
    n, e, d = private_key(base64.b64decode("".join(lines[1:-1])))
    signature = sign((n, e, d), MESSAGE, blind=secrets.randbelow(n - 3) + 2)
    assert signature == sign((n, e, d), MESSAGE, blind=7)  # blinding changes the work, never the signature
    (tmp_path / "message").write_bytes(MESSAGE)
    (tmp_path / "signature").write_bytes(signature)
    public = subprocess.run(["openssl", "pkey", "-in", str(pem), "-pubout"], check=True, capture_output=True).stdout
    (tmp_path / "public.pem").write_bytes(public)
    done = subprocess.run(
        ["openssl", "dgst", "-sha256", "-verify", "public.pem", "-signature", "signature", "message"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode, done.stdout) == (0, "Verified OK\n")


def test_a_key_whose_parts_do_not_match_signs_nothing(key: RsaKey) -> None:
    with pytest.raises(ValueError, match=r"^the private key does not match its public part: no signature made$"):
        sign((key.n, key.e, key.d + 2), MESSAGE, blind=7)
    with pytest.raises(ValueError, match=r"^the key has 1024 bits, fewer than 2048$"):
        sign((2**1023 + 1, 65537, 3), MESSAGE, blind=7)


@pytest.mark.parametrize(
    ("der", "problem"),
    [
        (b"", "not a DER RSA private key"),
        (b"\x30\x03\x02\x01\x01", "not a two-prime RSA key (version 0)"),
        (b"\x30\x05\x02\x01\x00\x02\x09", "the key is cut short"),
        (b"\x30\x03\x02\x01\x00\x00", "bytes after the key"),
        (b"\x30\x12\x02\x01\x00\x30\x0d\x06\x09\x2a\x86\x48\x86\xf7\x0d\x01\x01\x02\x05\x00", "not an RSA key"),
    ],
)
def test_a_private_key_that_is_not_one_says_why(der: bytes, problem: str) -> None:
    with pytest.raises(ValueError, match=f"^{re.escape(problem)}$"):
        private_key(der)


def test_a_kept_key_that_is_not_one_is_made_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(oidc_issuer, "KEPT", tmp_path)
    (tmp_path / "rsa-x-2048.json").write_bytes(b'{"n": "ab"')  # cut short
    made: list[int] = []

    def make() -> bytes:
        made.append(1)
        return b'{"n": "ab", "e": 3, "d": "cd"}'

    numbers = kept("rsa-x-2048.json", make, oidc_issuer._numbers_or_none)
    assert (numbers, made) == ({"n": "ab", "e": 3, "d": "cd"}, [1])
    assert kept("rsa-x-2048.json", make, oidc_issuer._numbers_or_none) == numbers
    assert made == [1]  # kept: not made again
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rsa-x-2048.json"]  # no partial file left


def test_a_kept_pem_that_is_not_one_is_made_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(oidc_issuer, "KEPT", tmp_path)
    name = f"openssl-{oidc_issuer.openssl_version()}-genrsa-traditional-2048.pem"
    (tmp_path / name).write_bytes(b"")  # empty: a crash before the data reached the disk
    pem = openssl_pem(2048, "-traditional")
    assert pem.startswith(b"-----BEGIN RSA PRIVATE KEY-----\n")
    assert (tmp_path / name).read_bytes() == pem
