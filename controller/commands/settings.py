"""Settings from the environment (and flags); secrets only ever from the environment."""

from __future__ import annotations

import getpass
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from controller.core.secret import Secret
from controller.errors import ConfigError

DEFAULT_STORE_URL = "sqlite:///.backfillctl/state.db"
DEFAULT_AIRFLOW_TIMEOUT = 30.0  # seconds to wait for one Airflow answer (connects give up after 5 s)


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
    allow_untested_airflow: bool = False  # BACKFILLCTL_ALLOW_UNTESTED_AIRFLOW=1: a release newer than tested

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
            allow_untested_airflow=get("ALLOW_UNTESTED_AIRFLOW") == "1",
        )


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
