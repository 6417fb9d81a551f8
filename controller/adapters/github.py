"""GitHub's REST API (httpx), read only: what the approval gate's evidence needs of a merged commit — its pull
requests, a pull request, its reviews (every page), a reviewer's permission — as `.github/scripts/evidence` asks it.

Authentication: a GitHub App (`AppKey`: a JWT signed RS256 with the App's private key, `core/rules/rs256.py`, is
exchanged for an installation token scoped to the specs repository, with read permissions on contents, pull
requests and metadata, renewed before it expires) or a fine-grained read-only token. No token is ever shown:
errors name the method, the path and the status only.

Every request has a total deadline (`answers.py`: bounded bodies, JSON read safely) within the pass's. Rate limits
are honoured: a 429, or a 403 that says so (`x-ratelimit-remaining: 0`, `retry-after`, a secondary limit), waits
for `retry-after` or `x-ratelimit-reset` (a secondary limit without either: a minute, as GitHub asks) when that
ends before the deadline; otherwise, as on any outage, `GitHubUnavailable`: the caller holds that commit's changes.
Pages follow the `Link` header's `next`, on the API's own origin only, at most `MAX_PAGES` of them.
"""

from __future__ import annotations

import base64
import json
import logging
import re
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx

from controller.adapters.answers import AnswerRefused, decode_json, read_body, timeout_until
from controller.core.model.secret import Secret
from controller.core.rules import rs256, rsakey
from controller.errors import ConfigError, ControllerError, truncate

log = logging.getLogger(__name__)
API_URL = "https://api.github.com"
API_VERSION = "2022-11-28"
MAX_BYTES = 8 * 2**20  # a page of 100 reviews with long bodies is well under 1 MiB
MAX_PAGES = 100  # 10,000 reviews: the evidence schema's bound
REQUEST_S = 20.0  # one request's deadline when the pass gives none
CONNECT_S = 5.0
RATE_LIMIT_WAITS = 5  # a request waits for a rate limit at most this often (within the deadline too)
SECONDARY_WAIT_S = 60.0  # a secondary rate limit that names no time: wait a minute (GitHub's advice)
TOKEN_MARGIN_S = 300.0  # an installation token is renewed this long before it expires
PERMISSIONS = {"contents": "read", "pull_requests": "read", "metadata": "read"}
REPOSITORY = re.compile(r"^[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}$")
LOGIN = re.compile(r"^[A-Za-z0-9-]{1,39}(\[bot\])?$")
SHA = re.compile(r"^[0-9a-f]{40}$")
_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="next"')


class GitHubError(ControllerError):
    """GitHub's API did not answer as asked: a misconfiguration (401, 403, 404) or the app's key."""


class GitHubUnavailable(GitHubError):
    """GitHub could not be reached, failed, or is rate limiting past the deadline: evidence is unavailable now."""


@dataclass(frozen=True, slots=True)
class AppKey:
    """A GitHub App: its id and private key (PEM text)."""

    app_id: str
    key: Secret

    @classmethod
    def from_file(cls, app_id: str, path: Path) -> AppKey:
        if not app_id.isdigit():
            raise ConfigError(
                f"BACKFILLCTL_GITHUB_APP_ID={truncate(app_id, 40)!r} is not a GitHub App id",
                hint="the App's numeric id, from its settings page (About: App ID)",
            )
        try:
            text = path.read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(
                f"BACKFILLCTL_GITHUB_APP_KEY_FILE={path}: cannot read the App's private key "
                f"({getattr(exc, 'strerror', None) or type(exc).__name__})",
                hint="the .pem file GitHub gave when the App's private key was generated, readable by this user",
            ) from None
        made = cls(app_id, Secret(text))
        made.numbers(str(path))  # a key that cannot sign is refused now, not at the first pass
        return made

    def numbers(self, where: str) -> tuple[int, int, int]:
        lines = self.key.reveal().strip().splitlines()
        known = ("-----BEGIN RSA PRIVATE KEY-----", "-----BEGIN PRIVATE KEY-----")
        try:
            if not lines or lines[0] not in known:
                raise ValueError("not a PEM RSA private key")
            return rsakey.private_key(base64.b64decode("".join(lines[1:-1]), validate=True))
        except ValueError as exc:
            raise ConfigError(
                f"BACKFILLCTL_GITHUB_APP_KEY_FILE={where}: not a usable RSA private key ({exc})",
                hint="generate a private key on the App's settings page and give that .pem file",
            ) from None

    def jwt(self, now: float) -> str:
        """The App's JWT (RS256): issued a minute ago (clock drift), valid nine minutes (GitHub allows ten)."""
        n, e, d = self.numbers("the App's key")
        header = _b64(json.dumps({"alg": "RS256", "typ": "JWT"}, separators=(",", ":")).encode())
        claims = {"iat": int(now) - 60, "exp": int(now) + 540, "iss": self.app_id}
        payload = _b64(json.dumps(claims, separators=(",", ":")).encode())
        signed = f"{header}.{payload}".encode()
        return f"{header}.{payload}.{_b64(rs256.sign((n, e, d), signed, secrets.randbelow(n - 3) + 2))}"


Auth = Secret | AppKey  # a fine-grained token, or a GitHub App


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


@dataclass(frozen=True, slots=True)
class Answer:
    status: int
    data: Any
    next_url: str | None


class GitHubClient:
    def __init__(
        self,
        repository: str,
        auth: Auth,
        *,
        api_url: str = API_URL,
        transport: httpx.BaseTransport | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        if not REPOSITORY.match(repository):
            raise ConfigError(
                f"BACKFILLCTL_GITHUB_REPOSITORY={truncate(repository, 80)!r} is not OWNER/NAME",
                hint="the specs repository, e.g. example-org/backfill-specs",
            )
        parts = urlsplit(api_url)
        if parts.scheme not in ("https", "http") or not parts.netloc or parts.query or parts.fragment:
            raise ConfigError(
                f"BACKFILLCTL_GITHUB_API_URL={truncate(api_url, 120)!r} is not an http(s) URL",
                hint="https://api.github.com, or GitHub Enterprise Server's https://HOST/api/v3",
            )
        self.repository, self.auth = repository, auth
        self.api_url = api_url.rstrip("/")
        self._origin = f"{parts.scheme}://{parts.netloc}"
        self._sleep, self._clock = sleep, clock
        self._http = httpx.Client(transport=transport, follow_redirects=False)
        self._token: tuple[Secret, float] | None = None  # an App's installation token, and when it expires
        self.deadline: float | None = None  # monotonic: no request, wait or retry goes past it (the pass's)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> GitHubClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- what the evidence needs --------------------------------------------------------------------------

    def commit_pulls(self, sha: str) -> list[dict[str, Any]]:
        """The pull requests associated with a commit (its merge, or one that holds it)."""
        return self._list(f"/repos/{self.repository}/commits/{_sha(sha)}/pulls", "the commit's pull requests")

    def pull(self, number: int) -> dict[str, Any]:
        data = self._get(f"/repos/{self.repository}/pulls/{int(number)}").data
        if not isinstance(data, dict):
            raise GitHubUnavailable(f"GET /repos/{self.repository}/pulls/{number}: the answer is no pull request")
        return data

    def reviews(self, number: int) -> list[dict[str, Any]]:
        """Every review of the pull request, page after page."""
        return self._list(f"/repos/{self.repository}/pulls/{int(number)}/reviews?per_page=100", "reviews")

    def pull_commits(self, number: int) -> list[dict[str, Any]]:
        """The pull request's commits (GitHub lists 250 at most), oldest first."""
        return self._list(f"/repos/{self.repository}/pulls/{int(number)}/commits?per_page=100", "commits")

    def commit(self, sha: str) -> dict[str, Any]:
        """One commit: its author, parents and the files it changed."""
        data = self._get(f"/repos/{self.repository}/commits/{_sha(sha)}").data
        if not isinstance(data, dict):
            raise GitHubUnavailable(f"GET /repos/{self.repository}/commits/{sha}: the answer is no commit")
        return data

    def permission(self, login: str) -> str | None:
        """The login's permission on the repository (admin, maintain, write, triage, read; None: not a
        collaborator, or a login GitHub does not know)."""
        if not LOGIN.match(login):
            return None
        answer = self._get(f"/repos/{self.repository}/collaborators/{quote(login)}/permission", missing_ok=True)
        if answer.status == httpx.codes.NOT_FOUND or not isinstance(answer.data, dict):
            return None
        role = answer.data.get("permission")  # admin, write, read, none: what the workflow's script reads too
        return role.lower() if isinstance(role, str) and role.isalpha() else None

    # --- requests -----------------------------------------------------------------------------------------

    def _list(self, path: str, what: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        url: str | None = self.api_url + path
        for _ in range(MAX_PAGES):
            if url is None:
                return items
            answer = self._get(url)
            if not isinstance(answer.data, list) or not all(isinstance(i, dict) for i in answer.data):
                raise GitHubUnavailable(f"GET {_shown(url)}: the answer is no list of {what}")
            items += answer.data
            url = answer.next_url
        if url is not None:
            raise GitHubUnavailable(f"GET {_shown(path)}: more than {MAX_PAGES} pages of {what}")
        return items

    def _get(self, path_or_url: str, *, missing_ok: bool = False) -> Answer:
        url = path_or_url if path_or_url.startswith(self._origin + "/") else self.api_url + path_or_url
        return self._send("GET", url, self._bearer(), missing_ok=missing_ok)

    def _bearer(self) -> Secret:
        if isinstance(self.auth, Secret):
            return self.auth
        if self._token is not None and self._token[1] - TOKEN_MARGIN_S > self._clock():
            return self._token[0]
        app = Secret(self.auth.jwt(self._clock()))
        installation = self._send("GET", f"{self.api_url}/repos/{self.repository}/installation", app).data
        number = installation.get("id") if isinstance(installation, dict) else None
        if not isinstance(number, int):
            raise GitHubError(f"GET /repos/{self.repository}/installation: the answer names no installation")
        body = {"repositories": [self.repository.split("/", 1)[1]], "permissions": PERMISSIONS}
        made = self._send("POST", f"{self.api_url}/app/installations/{number}/access_tokens", app, body=body).data
        token, expires = (made.get("token"), made.get("expires_at")) if isinstance(made, dict) else (None, None)
        if not isinstance(token, str) or not isinstance(expires, str):
            raise GitHubError(f"POST /app/installations/{number}/access_tokens: the answer holds no token")
        try:
            until = datetime.fromisoformat(expires.replace("Z", "+00:00")).timestamp()
        except ValueError:
            until = self._clock() + 3600
        self._token = (Secret(token), until)
        return self._token[0]

    def _send(
        self, method: str, url: str, bearer: Secret, *, body: Mapping[str, Any] | None = None, missing_ok: bool = False
    ) -> Answer:
        shown = f"{method} {_shown(url)}"
        failed_once = False
        waits = 0
        while True:
            deadline = self._deadline()
            headers = {
                "Accept": "application/vnd.github+json",
                "X-GitHub-Api-Version": API_VERSION,
                "Authorization": f"Bearer {bearer.reveal()}",
                "User-Agent": "backfillctl",
            }
            try:
                request = self._http.build_request(
                    method, url, headers=headers, json=body, timeout=timeout_until(deadline, CONNECT_S)
                )
                response = self._http.send(request, stream=True)
                try:
                    raw = read_body(response, deadline=deadline, cap=MAX_BYTES)
                finally:
                    response.close()
            except (httpx.HTTPError, AnswerRefused) as exc:
                why = str(exc) if isinstance(exc, AnswerRefused) else type(exc).__name__
                if failed_once or isinstance(exc, AnswerRefused):
                    raise GitHubUnavailable(f"{shown} failed: {why}") from None
                failed_once = True
                continue
            status = response.status_code
            wait = _rate_limited(response, raw, self._clock())
            if wait is not None:
                if waits == RATE_LIMIT_WAITS:
                    raise GitHubUnavailable(f"{shown}: still rate limited after {RATE_LIMIT_WAITS} waits")
                waits += 1
                self._wait(wait, shown)
                continue
            if status >= 500 and not failed_once:
                failed_once = True
                continue
            if status == httpx.codes.NOT_FOUND and missing_ok:
                return Answer(status, None, None)
            if status not in (httpx.codes.OK, httpx.codes.CREATED):
                raise _status_error(shown, status, raw)
            try:
                data = decode_json(raw)
            except AnswerRefused as exc:
                raise GitHubUnavailable(f"{shown}: {exc}") from None
            return Answer(status, data, self._next(response))

    def _deadline(self) -> float:
        return self.deadline if self.deadline is not None else time.monotonic() + REQUEST_S

    def _wait(self, seconds: float, shown: str) -> None:
        left = self._deadline() - time.monotonic()
        if seconds > left:
            raise GitHubUnavailable(f"{shown}: rate limited for {seconds:.0f}s more, past this pass's deadline")
        log.warning("GitHub rate limit: %s waits %.0fs", shown, seconds)
        self._sleep(seconds)

    def _next(self, response: httpx.Response) -> str | None:
        found = _NEXT.search(response.headers.get("link", ""))
        if found is None:
            return None
        url = found.group(1)
        if not url.startswith(self._origin + "/"):  # a next page elsewhere is not followed (nor sent the token)
            raise GitHubUnavailable(f"the next page of {_shown(str(response.request.url))} is on another origin")
        return url


def _sha(sha: str) -> str:
    if not SHA.match(sha):
        raise ValueError(f"not a full commit SHA: {sha!r}")
    return sha


def _shown(url: str) -> str:
    """A URL as shown: its path only (never a query that could carry a token)."""
    return urlsplit(url).path or "/"


def _rate_limited(response: httpx.Response, raw: bytes, now: float) -> float | None:
    """Seconds to wait when the answer is a rate limit (None: it is not one)."""
    status = response.status_code
    if status not in (httpx.codes.FORBIDDEN, httpx.codes.TOO_MANY_REQUESTS):
        return None
    headers = response.headers
    retry_after = headers.get("retry-after", "")
    if retry_after.isdigit():
        return float(retry_after)
    reset = headers.get("x-ratelimit-reset", "")
    if headers.get("x-ratelimit-remaining") == "0" and reset.isdigit():
        return max(0.0, float(reset) - now) + 1.0
    if status == httpx.codes.TOO_MANY_REQUESTS or b"secondary rate limit" in raw[:2048].lower():
        return SECONDARY_WAIT_S
    return None


def _status_error(shown: str, status: int, raw: bytes) -> GitHubError:
    detail = ""
    try:
        data = decode_json(raw)
        if isinstance(data, dict) and isinstance(data.get("message"), str):
            detail = f": {truncate(data['message'], 160)}"
    except AnswerRefused:
        pass
    if status >= 500:
        return GitHubUnavailable(f"{shown} failed: HTTP {status}{detail}")
    return GitHubError(
        f"{shown} failed: HTTP {status}{detail}",
        hint="the App's installation (or the token) must read the specs repository's contents, pull requests and "
        "metadata (docs/deploy.md)",
    )
