"""RS256 signatures — RSASSA-PKCS1-v1_5 with SHA-256 (RFC 8017 §8.2.2) — checked (and made, for a GitHub App's JWT)
with the standard library (pure).

The public-key operation is pow(s, e, n); what it gives must be, byte for byte, the one encoding EMSA-PKCS1-v1_5
makes of the message's SHA-256 (0x00 0x01, 0xFF padding, 0x00, the DigestInfo prefix, the hash). Comparing the
whole block, never parsing it, refuses every other length, padding and digest (the forgeries of lax parsers).
"""

from __future__ import annotations

import hashlib
import hmac

SHA256_DIGEST_INFO = bytes.fromhex("3031300d060960864801650304020105000420")  # DER: SEQUENCE{sha256, NULL}, OCTET 32
MIN_BITS = 2048  # a shorter RSA key is refused (NIST SP 800-131A)


def encoded(message: bytes, size: int) -> bytes:
    """EMSA-PKCS1-v1_5 (RFC 8017 §9.2) of `message`'s SHA-256, `size` bytes long (the modulus's length)."""
    digest = SHA256_DIGEST_INFO + hashlib.sha256(message).digest()
    padding = size - len(digest) - 3
    if padding < 8:
        raise ValueError(f"a {size}-byte modulus is too short for a SHA-256 signature")
    return b"\x00\x01" + b"\xff" * padding + b"\x00" + digest


def key_problem(n: int, e: int) -> str | None:
    """What makes a public key unfit to trust a signature by (None: fit)."""
    if n.bit_length() < MIN_BITS:
        return f"the key has {n.bit_length()} bits, fewer than {MIN_BITS}"
    if e < 3 or e % 2 == 0 or e >= n:
        return f"the key's exponent {e} is not an odd number from 3 up"
    return None


def verify(n: int, e: int, message: bytes, signature: bytes) -> bool:
    """Whether `signature` is the RS256 signature of `message` under the public key (n, e)."""
    size = (n.bit_length() + 7) // 8
    if key_problem(n, e) is not None or len(signature) != size:
        return False
    s = int.from_bytes(signature, "big")
    if s >= n:  # out of range (RFC 8017 §5.2.2): s and s + n would both pass
        return False
    return hmac.compare_digest(pow(s, e, n).to_bytes(size, "big"), encoded(message, size))


def sign(key: tuple[int, int, int], message: bytes, blind: int) -> bytes:
    """The RS256 signature of `message` under the private key (n, e, d), blinded by `blind` (a random number
    coprime to n, from the caller: this module draws nothing): the private exponent works on m·r^e, never on m
    itself, so its time says nothing of the message (RFC 8017 names blinding against timing attacks). The
    signature is checked with the public key before it is returned (a fault never leaves as a signature)."""
    n, e, d = key
    problem = key_problem(n, e)
    if problem is not None:
        raise ValueError(problem)
    size = (n.bit_length() + 7) // 8
    m = int.from_bytes(encoded(message, size), "big")
    blinded = pow(pow(blind, e, n) * m % n, d, n)
    signature = (blinded * pow(blind, -1, n) % n).to_bytes(size, "big")
    if not verify(n, e, message, signature):
        raise ValueError("the private key does not match its public part: no signature made")
    return signature
