"""Environments are what they say (pure): each reads only variables of its own, and one that is production under
another name — the same normalised URL, or the same metadata database behind another name — is refused.

A name can lie (a DNS alias, an IP address, a second port forwarded to the same api-server); the ids of a DAG's
versions cannot: each metadata database makes its own (UUIDs), so two Airflows that share one are one database.
"""

from __future__ import annotations

import contextlib
import ipaddress
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from urllib.parse import urlsplit

from controller.core.model.stages import PRODUCTION, PRODUCTION_DEFAULTS, ROLES, Environment

DEFAULT_PORTS = {"http": 80, "https": 443}
AIRFLOW_FAMILY = "BACKFILLCTL_AIRFLOW_"  # production's defaults live here: never another environment's
# the controller's own secrets: never an Airflow's URL or credential (they would be sent to that Airflow)
CONTROLLER_SECRETS = {
    "BACKFILLCTL_AUDIT_KEY": "the audit chain's key",
    "BACKFILLCTL_STORE_URL": "the store's address and password",
    "BACKFILLCTL_OIDC_TOKEN": "the stop workflow's identity token",
    "BACKFILLCTL_ORG_READ_TOKEN": "the organisation read token",
}


def prefix(environment: str) -> str:
    """The variables an environment may name start with this: staging → BACKFILLCTL_STAGING_."""
    return f"BACKFILLCTL_{environment.upper().replace('-', '_')}_"


# --- the variables an environment names ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class VariableProblem:
    environment: str
    key: str  # the policy key naming it (airflow_url_env, token_env, username_env, password_env)
    message: str
    hint: str


def variable_problems(
    env: Environment, production: Sequence[str], others: Sequence[Environment] = ()
) -> Iterator[VariableProblem]:
    """What is wrong with each variable `env` names: another's secret (the controller's, production's — its
    `names` — or another environment's in `others`), a name outside its own prefix, or one variable for two
    things. At most one problem per key."""
    seen: dict[str, str] = {}  # variable → what the first key naming it reads
    for (key, what), variable in zip(ROLES, env.named, strict=True):
        if variable is None:
            continue
        why = _borrowed(env, what, variable, production, others) or _outside(env, key, what, variable)
        if why is None and variable in seen:
            why = (
                f"environment {env.name!r} names {variable} for both its {seen[variable]} and its {what}",
                "a variable holds one thing: name one per key",
            )
        seen.setdefault(variable, what)
        if why is not None:
            yield VariableProblem(env.name, key, *why)


def _borrowed(
    env: Environment, what: str, variable: str, production: Sequence[str], others: Sequence[Environment]
) -> tuple[str, str] | None:
    """The variable holds something that is not this environment's: a controller secret, production's, another's."""
    own = f"name a variable of its own, e.g. {prefix(env.name)}{_SUFFIXES[what]}"
    if variable in CONTROLLER_SECRETS:
        return (
            f"environment {env.name!r} reads its {what} from {variable}, {CONTROLLER_SECRETS[variable]}: it would be "
            f"sent to {env.name}'s Airflow",
            own,
        )
    if env.name == PRODUCTION:
        return None
    if variable in production:
        return _theirs(env.name, what, variable, PRODUCTION), own
    if variable.startswith(AIRFLOW_FAMILY):
        return f"environment {env.name!r} reads its {what} from {variable}: {AIRFLOW_FAMILY}* are production's", own
    other = next((o.name for o in others if o.name != env.name and variable in o.named), None)
    return None if other is None else (_theirs(env.name, what, variable, other), own)


def _theirs(name: str, what: str, variable: str, owner: str) -> str:
    if what == ROLES[0][1]:
        return (
            f"environment {name!r} reads its Airflow URL from {variable}, as {owner} does: its backfills would run in "
            f"{owner}'s Airflow"
        )
    return (
        f"environment {name!r} reads its {what} from {variable}, as {owner} does: {owner}'s {what} would be sent to "
        f"{name}'s Airflow"
    )


def _outside(env: Environment, key: str, what: str, variable: str) -> tuple[str, str] | None:
    """A variable outside the environment's own prefix (production may also name its default for the key)."""
    mine = prefix(env.name)
    default = PRODUCTION_DEFAULTS[_KEYS.index(key)] if env.name == PRODUCTION else None
    if variable.startswith(mine) or variable == default:
        return None
    allowed = f"{mine}*" + ("" if default is None else f" or {default}")
    return (
        f"environment {env.name!r} reads its {what} from {variable}, which is not one of its own ({allowed})",
        f"name a variable under {mine}, e.g. {mine}{_SUFFIXES[what]}: an environment's variables are its own, so "
        "no other secret can be sent to its Airflow",
    )


_KEYS = tuple(key for key, _ in ROLES)
_SUFFIXES = dict(
    zip(
        (what for _, what in ROLES),
        ("AIRFLOW_URL", "AIRFLOW_TOKEN", "AIRFLOW_USERNAME", "AIRFLOW_PASSWORD"),
        strict=True,
    )
)


# --- is it production? ------------------------------------------------------------------------------------------


def normalised_url(url: str) -> str:
    """The api-server a URL reaches, as one text: scheme and host in lower case, an IP address in its one form, the
    scheme's default port and a trailing slash dropped, no user information, query or fragment."""
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").rstrip(".")
    with contextlib.suppress(ValueError):  # a name, not an address
        host = ipaddress.ip_address(host).compressed
    try:
        port = parts.port
    except ValueError:
        port = None  # not a number: the URL is refused where it is read
    shown = f"[{host}]" if ":" in host else host
    at = "" if port is None or port == DEFAULT_PORTS.get(scheme) else f":{port}"
    return f"{scheme}://{shown}{at}{parts.path.rstrip('/')}"


def url_refusal(environment: str, url: str, production_url: str) -> str | None:
    """Why `environment` is production by its URL (None: the URLs differ once normalised)."""
    mine, theirs = normalised_url(url), normalised_url(production_url)
    if mine != theirs:
        return None
    return (
        f"environment {environment!r} is production: its Airflow URL is production's ({mine}); nothing is created "
        f"in either"
    )


def same_airflow(mine: frozenset[str], production: frozenset[str]) -> bool | None:
    """One metadata database (a DAG version id both hold), two (both hold ids, none shared), or None: cannot tell
    (one holds none)."""
    if not mine or not production:
        return None
    return not mine.isdisjoint(production)


def fingerprint_refusal(environment: str, dag_id: str, mine: frozenset[str], production: frozenset[str]) -> str | None:
    """Why `environment` is production under another name, or cannot be told from it (None: two Airflows)."""
    same = same_airflow(mine, production)
    if same is False:
        return None
    if same is None:
        where = environment if not mine else PRODUCTION
        return (
            f"environment {environment!r} cannot be told apart from production: DAG {dag_id} has no versions in "
            f"{where}; nothing is created in either"
        )
    shared = min(mine & production)
    return (
        f"environment {environment!r} is production under another name: DAG {dag_id} has the same version ids in "
        f"both (e.g. {shared}), and each metadata database makes its own; nothing is created in either"
    )
