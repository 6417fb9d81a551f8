"""Settings from the environment (and flags); secrets only ever from the environment."""

from __future__ import annotations

import getpass
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

from controller.core.model.secret import Secret, header_problem, redact_url, text_problem, url_problem
from controller.core.model.stages import PRODUCTION, Environment
from controller.errors import ConfigError

DEFAULT_STORE_URL = "sqlite:///.backfillctl/state.db"
DEFAULT_AIRFLOW_TIMEOUT = 30.0  # seconds to wait for one Airflow answer (connects give up after 5 s)
PRODUCTION_NAMES = (
    "BACKFILLCTL_AIRFLOW_URL",
    "BACKFILLCTL_AIRFLOW_TOKEN",
    "BACKFILLCTL_AIRFLOW_USERNAME",
    "BACKFILLCTL_AIRFLOW_PASSWORD",
)
AUDIT_KEY_MIN_BYTES = 32  # HMAC-SHA256's own output size: a shorter key is weaker than the MAC


@dataclass(frozen=True, slots=True)
class Settings:
    specs_dir: Path = Path("specs")
    store_url: str = DEFAULT_STORE_URL
    airflow_url: str | None = None
    airflow_token: Secret | None = None
    airflow_username: str | None = None
    airflow_password: Secret | None = None
    actor: str = "unknown"
    airflow_timeout: float = DEFAULT_AIRFLOW_TIMEOUT
    audit_key: Secret | None = None
    allow_untested_airflow: bool = False  # BACKFILLCTL_ALLOW_UNTESTED_AIRFLOW=1: a release newer than tested
    # BACKFILLCTL_ALLOW_ADMIN_IDENTITY=1: running as an identity with more rights than needed is known (a local
    # Airflow's admin): the preflight's least-privilege warning is not said
    allow_admin_identity: bool = False
    # the variables the Airflow URL and credentials came from (another environment names its own in the policy)
    names: tuple[str, str, str, str] = PRODUCTION_NAMES
    environ: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)  # for other environments

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> Settings:
        def get(name: str) -> str | None:
            value = env.get(f"BACKFILLCTL_{name}", "").strip()
            return value or None

        token, password = get("AIRFLOW_TOKEN"), get("AIRFLOW_PASSWORD")
        return cls(
            specs_dir=Path(get("SPECS_DIR") or "specs"),
            store_url=get("STORE_URL") or DEFAULT_STORE_URL,
            airflow_url=(get("AIRFLOW_URL") or "").rstrip("/") or None,
            airflow_token=Secret(token) if token else None,
            airflow_username=get("AIRFLOW_USERNAME"),
            airflow_password=Secret(password) if password else None,
            actor=get("ACTOR") or env.get("GITHUB_ACTOR") or _os_user(),
            airflow_timeout=_timeout(get("AIRFLOW_TIMEOUT")),
            audit_key=_audit_key(env.get("BACKFILLCTL_AUDIT_KEY", "")),
            allow_untested_airflow=get("ALLOW_UNTESTED_AIRFLOW") == "1",
            allow_admin_identity=get("ALLOW_ADMIN_IDENTITY") == "1",
            environ=dict(env),
        )

    def for_environment(self, environment: Environment) -> Settings:
        """The settings of another environment's Airflow: its URL and credentials from the variables the policy
        names. Only production falls back to BACKFILLCTL_AIRFLOW_* (another environment never borrows them)."""
        fallback = PRODUCTION_NAMES if environment.name == PRODUCTION else ("", "", "", "")
        given = (environment.airflow_url_env, environment.token_env, environment.username_env, environment.password_env)
        names = tuple(name or default for name, default in zip(given, fallback, strict=True))
        url, token, username, password = (
            self.environ.get(name, "").strip() or None if name else None for name in names
        )
        return replace(
            self,
            airflow_url=(url or "").rstrip("/") or None,
            airflow_token=Secret(token) if token else None,
            airflow_username=username,
            airflow_password=Secret(password) if password else None,
            names=(names[0], names[1], names[2], names[3]),
        )

    def airflow_address(self) -> str:
        """The Airflow URL, once it and the credentials are known to be sendable: a `ConfigError` names the
        variable and what is wrong with it, never its value (a header cannot carry a line break, httpx would
        print it)."""
        if not self.airflow_url:
            raise ConfigError(
                f"{self.names[0]} is not set",
                hint="export BACKFILLCTL_AIRFLOW_URL=http://host:port (and a token or username/password); "
                'for a local one: eval "$(scripts/airflow-local env)"',
            )
        problem, hint = self._airflow_url_problem(self.airflow_url)
        if problem is not None:
            raise ConfigError(f"{self.names[0]}={redact_url(self.airflow_url)!r} {problem}", hint=hint)
        sent = (
            (self.names[1], self.airflow_token and self.airflow_token.reveal(), header_problem),
            (self.names[2], self.airflow_username, text_problem),
            (self.names[3], self.airflow_password and self.airflow_password.reveal(), text_problem),
        )
        for name, value, check in sent:
            if value and (problem := check(value)) is not None:
                raise ConfigError(f"{name} {problem}", hint=f"set {name} to the value alone, on one line")
        return self.airflow_url

    def _airflow_url_problem(self, url: str) -> tuple[str | None, str]:
        """What is wrong with the Airflow URL, and the fix; a base URL's query would replace every path."""
        problem = url_problem(url, ("http", "https"))
        if problem is not None:
            return problem, URL_FIX
        parts = urlsplit(url)
        if parts.query or parts.fragment:
            return "has a query or a fragment: the api-server's base address takes neither", URL_FIX
        logs_in = self.airflow_token is not None or (self.airflow_username and self.airflow_password)
        if (parts.username or parts.password) and logs_in:  # httpx sends them as Basic auth, over the Bearer token
            return "has a user name or password, which would be sent in place of the token", USERINFO_FIX
        return None, ""


USERINFO_FIX = "take user:password@ out of the URL: BACKFILLCTL_AIRFLOW_USERNAME/PASSWORD carry the login"
URL_FIX = (
    "set it to the api-server's base address, e.g. http://127.0.0.1:8080; percent-encode an @ / ? # in a "
    "user name or password (%40 %2F %3F %23)"
)


def _audit_key(value: str) -> Secret | None:
    """The chain's HMAC key, taken byte for byte (never stripped); an empty one means no key."""
    if not value:
        return None
    from controller.core.audit.chain import key_bytes  # noqa: PLC0415 - only with a key: `validate` starts without

    if len(key_bytes(value)) < AUDIT_KEY_MIN_BYTES:
        raise ConfigError(
            f"BACKFILLCTL_AUDIT_KEY is shorter than {AUDIT_KEY_MIN_BYTES} bytes",
            hint="use a random secret of at least 32 bytes, e.g. `python -c 'import secrets; "
            "print(secrets.token_hex(32))'`, kept in your secret store",
        )
    return Secret(value)


def _timeout(value: str | None) -> float:
    if value is None:
        return DEFAULT_AIRFLOW_TIMEOUT
    try:
        seconds = float(value)
    except ValueError:
        seconds = -1.0
    if not 1.0 <= seconds <= 3600.0:
        raise ConfigError(
            f"BACKFILLCTL_AIRFLOW_TIMEOUT={value!r} is not a number of seconds from 1 to 3600",
            hint="e.g. BACKFILLCTL_AIRFLOW_TIMEOUT=120 for a server that answers large creates slowly",
        )
    return seconds


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
