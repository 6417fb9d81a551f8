"""Settings from the environment (and flags); secrets only ever from the environment."""

from __future__ import annotations

import getpass
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from urllib.parse import urlsplit

from controller.core.model.policy import Policy
from controller.core.model.secret import Secret, header_problem, redact_url, text_problem, url_problem
from controller.core.model.stages import PRODUCTION, PRODUCTION_DEFAULTS, Environment
from controller.core.rules.environments import variable_problems
from controller.errors import ConfigError

DEFAULT_STORE_URL = "sqlite:///.backfillctl/state.db"
DEFAULT_AIRFLOW_TIMEOUT = 30.0  # seconds to wait for one Airflow answer (connects give up after 5 s)
# Airflow requests in flight at once: MWAA's, Composer's and Astro's api-servers refuse or throttle a burst
DEFAULT_AIRFLOW_MAX_CONCURRENCY = 2
MAX_CONCURRENCY_VARIABLE = "BACKFILLCTL_AIRFLOW_MAX_CONCURRENCY"
AIRFLOW_MAX_CONCURRENCY_LIMIT = 64  # more in flight only queues in the api-server's workers
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
    airflow_max_concurrency: int = DEFAULT_AIRFLOW_MAX_CONCURRENCY  # BACKFILLCTL_AIRFLOW_MAX_CONCURRENCY
    audit_key: Secret | None = None
    # BACKFILLCTL_AUDIT_KEYS_PREVIOUS, one a line: the keys `audit rotate-key` replaced (verify checks their MACs)
    audit_keys_previous: tuple[Secret, ...] = ()
    allow_untested_airflow: bool = False  # BACKFILLCTL_ALLOW_UNTESTED_AIRFLOW=1: a release newer than tested
    # BACKFILLCTL_ALLOW_ADMIN_IDENTITY=1: running as an identity with more rights than needed is known (a local
    # Airflow's admin): the preflight's least-privilege warning is not said
    allow_admin_identity: bool = False
    # the variables the Airflow URL and credentials came from (another environment names its own in the policy)
    names: tuple[str, str, str, str] = PRODUCTION_DEFAULTS
    environ: Mapping[str, str] = field(default_factory=dict, repr=False, compare=False)  # for other environments
    oidc_token: Secret | None = None  # BACKFILLCTL_OIDC_TOKEN: the stop workflow's GitHub Actions identity token

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
            airflow_max_concurrency=_max_concurrency(env.get(MAX_CONCURRENCY_VARIABLE)),
            audit_key=_audit_key(env.get("BACKFILLCTL_AUDIT_KEY", "")),
            audit_keys_previous=_previous_audit_keys(env.get("BACKFILLCTL_AUDIT_KEYS_PREVIOUS", "")),
            allow_untested_airflow=get("ALLOW_UNTESTED_AIRFLOW") == "1",
            allow_admin_identity=get("ALLOW_ADMIN_IDENTITY") == "1",
            environ=dict(env),
            oidc_token=Secret(oidc) if (oidc := get("OIDC_TOKEN")) else None,
        )

    def for_production(self, policy: Policy) -> Settings:
        """Production's Airflow from the variables the policy names for it (BACKFILLCTL_AIRFLOW_* for those it does
        not name); these settings when they are the ones already read."""
        production = policy.environment(PRODUCTION) or Environment(PRODUCTION)
        return self if production.names == self.names else self.for_environment(production)

    def for_environment(self, environment: Environment) -> Settings:
        """The settings of an environment's Airflow: its URL and credentials from the variables the policy names.
        Only production falls back to BACKFILLCTL_AIRFLOW_*. No environment reads the controller's own secrets or a
        name outside its prefix, and another never production's variables (these settings' `names`): `validate`
        refuses such a policy, and this refuses it again where it would be sent."""
        for problem in variable_problems(environment, self.names):
            raise ConfigError(problem.message, hint=problem.hint)
        names = environment.names
        url, token, username, password = (
            self.environ.get(name, "").strip() or None if name else None for name in names
        )
        return replace(
            self,
            airflow_url=(url or "").rstrip("/") or None,
            airflow_token=Secret(token) if token else None,
            airflow_username=username,
            airflow_password=Secret(password) if password else None,
            names=names,
        )

    def for_notes(self) -> Settings | None:
        """The login that writes Airflow run notes when one of its own is given (BACKFILLCTL_AIRFLOW_NOTES_TOKEN, or
        _USERNAME and _PASSWORD: DAG-run edit on the noted DAGs only), on production's Airflow; None: the
        reconciler's own login writes them."""
        token, username, password = (
            self.environ.get(f"BACKFILLCTL_AIRFLOW_NOTES_{name}", "").strip() or None
            for name in ("TOKEN", "USERNAME", "PASSWORD")
        )
        if token is None and username is None:
            return None
        return replace(
            self,
            airflow_token=Secret(token) if token else None,
            airflow_username=None if token else username,
            airflow_password=Secret(password) if password and not token else None,
        )

    def airflow_address(self) -> str:
        """The Airflow URL, once it and the credentials are known to be sendable: a `ConfigError` names the
        variable and what is wrong with it, never its value (a header cannot carry a line break, httpx would
        print it)."""
        if not self.airflow_url:
            raise ConfigError(
                f"{self.names[0]} is not set",
                hint=f"export {self.names[0]}=http://host:port (and a token or username/password); "
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


def _audit_key(value: str, name: str = "BACKFILLCTL_AUDIT_KEY") -> Secret | None:
    """The chain's HMAC key, taken byte for byte (never stripped); an empty one means no key."""
    if not value:
        return None
    from controller.core.audit.chain import key_bytes  # noqa: PLC0415 - only with a key: `validate` starts without

    if len(key_bytes(value)) < AUDIT_KEY_MIN_BYTES:
        raise ConfigError(
            f"{name} is shorter than {AUDIT_KEY_MIN_BYTES} bytes",
            hint="use a random secret of at least 32 bytes, e.g. `python -c 'import secrets; "
            "print(secrets.token_hex(32))'`, kept in your secret store",
        )
    return Secret(value)


def _previous_audit_keys(value: str) -> tuple[Secret, ...]:
    """The audit keys rotations replaced, one a line (byte for byte; empty lines skipped), checked like the key."""
    lines = value.split("\n")
    keys = (_audit_key(line, f"line {n} of BACKFILLCTL_AUDIT_KEYS_PREVIOUS") for n, line in enumerate(lines, 1))
    return tuple(key for key in keys if key is not None)


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


def _max_concurrency(value: str | None) -> int:
    """Requests in flight at once: a whole number from 1 to the limit (an unset or empty variable: the default)."""
    if value is None or not value.strip():
        return DEFAULT_AIRFLOW_MAX_CONCURRENCY
    text = value.strip()
    count = int(text) if text.isascii() and text.isdigit() else 0
    if not 1 <= count <= AIRFLOW_MAX_CONCURRENCY_LIMIT:
        raise ConfigError(
            f"{MAX_CONCURRENCY_VARIABLE}={value!r} is not a whole number of requests from 1 to "
            f"{AIRFLOW_MAX_CONCURRENCY_LIMIT}",
            hint=f"e.g. {MAX_CONCURRENCY_VARIABLE}=2 (the default) for MWAA, Cloud Composer or Astro; unset it for "
            "the default",
        )
    return count


def _os_user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"
