"""An RSA private key read from DER (pure): what a GitHub App's .pem holds, for `rs256.sign`. A key read wrong
signs nothing (`rs256.sign` checks each signature against the key's public part)."""

from __future__ import annotations

RSA_ENCRYPTION = bytes.fromhex("06092a864886f70d0101010500")  # DER: OID rsaEncryption, NULL (PKCS#8's algorithm)


def private_key(der: bytes) -> tuple[int, int, int]:
    """(n, e, d) of a DER RSA private key: PKCS#1 `RSAPrivateKey` (a GitHub App's key, "BEGIN RSA PRIVATE KEY") or
    PKCS#8 `PrivateKeyInfo` holding one ("BEGIN PRIVATE KEY"). Raises ValueError saying what is wrong."""
    body, rest = _tlv(der, 0x30)
    if rest:
        raise ValueError("bytes after the key")
    version, body = _tlv(body, 0x02)
    if body.startswith(b"\x30"):  # PKCS#8: the algorithm, then the PKCS#1 key in an OCTET STRING
        algorithm, body = _tlv(body, 0x30)
        if b"\x30" + bytes([len(algorithm)]) + algorithm != b"\x30\x0d" + RSA_ENCRYPTION:
            raise ValueError("not an RSA key")
        inner, _ = _tlv(body, 0x04)
        return private_key(inner)
    if version != b"\x00":
        raise ValueError("not a two-prime RSA key (version 0)")
    numbers = []
    for _ in range(3):
        value, body = _tlv(body, 0x02)
        numbers.append(int.from_bytes(value, "big"))
    n, e, d = numbers
    return n, e, d


def _tlv(data: bytes, tag: int) -> tuple[bytes, bytes]:
    """The value of the DER element of `tag` at the start of `data`, and what follows it."""
    if len(data) < 2 or data[0] != tag:
        raise ValueError("not a DER RSA private key")
    length, start = data[1], 2
    if length & 0x80:
        count = length & 0x7F
        if count == 0 or count > 4 or len(data) < 2 + count:
            raise ValueError("not a DER RSA private key")
        length, start = int.from_bytes(data[2 : 2 + count], "big"), 2 + count
    if len(data) < start + length:
        raise ValueError("the key is cut short")
    return data[start : start + length], data[start + length :]
