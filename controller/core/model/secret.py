"""Secrets never shown: `Secret` (repr/str give `[secure]`, the httpx idea for sensitive headers), and the one
redaction of URLs (user information, credential-looking query values) used wherever a URL is shown."""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit


class Secret:
    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('[secure]')"

    def __str__(self) -> str:
        return "[secure]"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


# --- URLs and settings as they may be shown ------------------------------------------------------------------

MASK = "***"
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]*[^\s'\"<>.,:;)\]}]")  # no trailing punctuation
_PARAMETER = re.compile(r"([?&;#])([^=&;#]*)=([^&;#]*)")
_SECRET_WORDS = ("token", "passw", "pwd", "secret", "signature", "credential", "auth")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def secret_parameter(name: str) -> bool:
    """A query parameter that carries a credential: token, password, secret, signature, sig, (api_)key, … (any case)."""
    key = unquote(name).lower().replace("-", "_")
    return any(word in key for word in _SECRET_WORDS) or key.endswith(("key", "_sig")) or key == "sig"


def redact_url(url: str) -> str:
    """The URL as it may be shown anywhere: its password and credential-looking query values as `***` (a user
    name stays, but a lone one in an http(s) URL may be a token: `https://TOKEN@host`)."""
    return _redact_parameters(_redact_userinfo(url))


def redact_urls(text: str) -> str:
    """Every URL inside a free text (a log line, an error) redacted as `redact_url` does."""
    return _URL_IN_TEXT.sub(lambda found: redact_url(found.group(0)), text)


def _redact_userinfo(url: str) -> str:
    scheme = _SCHEME.match(url)
    start = scheme.end() if scheme else 0
    rest = url[start:]
    end = _userinfo_end(rest) if scheme else rest.rfind("@")
    if end < 0:
        return url
    user, colon, _ = rest[:end].partition(":")
    if not colon and not (scheme and scheme[1].lower() in ("http", "https")):
        return url  # a database's user name alone is an identity, not a secret
    return url[:start] + (f"{user}:{MASK}" if colon else MASK) + rest[end:]


def _userinfo_end(rest: str) -> int:
    """Where the user information ends (its `@`), or -1; an unencoded `/`, `?` or `#` in a password cuts the
    authority short at a port that is not a number, so the last `@` of the whole URL is taken then."""
    authority = re.split(r"[/?#]", rest, maxsplit=1)[0]
    if "@" in authority:
        return authority.rindex("@")
    _, colon, port = authority.rpartition("]")[2].rpartition(":")
    return rest.rfind("@") if colon and not port.isdigit() else -1


def _redact_parameters(url: str) -> str:
    cut = min((i for i in (url.find("?"), url.find("#")) if i >= 0), default=-1)
    if cut < 0:
        return url
    masked = _PARAMETER.sub(
        lambda p: f"{p[1]}{p[2]}={MASK}" if secret_parameter(p[2]) else p[0],
        url[cut:],
    )
    return url[:cut] + masked


def url_problem(url: str, schemes: tuple[str, ...] = ()) -> str | None:
    """What makes `url` unusable, said without any part of it, or None; with `schemes`, it must be one of them
    and name a host."""
    if any(ch.isspace() for ch in url) or _CONTROL.search(url):
        return "contains a space or a control character"
    scheme = _SCHEME.match(url)
    if schemes and (scheme is None or scheme[1].lower() not in schemes):
        return "is not an " + " or ".join(f"{s}://" for s in schemes) + " address"
    parts = urlsplit(url)
    if parts.netloc.count("@") > 1:
        return "has more than one '@' before its host"
    try:
        port = parts.port
    except ValueError:
        port = 0
    if port == 0:
        return "has a port that is not a number from 1 to 65535"
    if schemes and not parts.hostname:
        return "has no host"
    return None


def header_problem(value: str) -> str | None:
    """Why `value` cannot travel in an HTTP header (ASCII, no control character), never the value itself."""
    if _CONTROL.search(value):
        return "contains a line break or another control character"
    return None if value.isascii() else "contains a non-ASCII character"


def text_problem(value: str) -> str | None:
    """Why a setting sent in a JSON body is surely a mistake (a control character), never the value itself."""
    return "contains a line break or another control character" if _CONTROL.search(value) else None
