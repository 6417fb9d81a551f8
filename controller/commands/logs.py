"""`--log-format`: install the log handler, with every secret the environment holds redacted from each line."""

from __future__ import annotations

from collections.abc import Mapping

from controller.adapters.logsetup import configure

SECRET_MARKERS = ("TOKEN", "PASSWORD", "WEBHOOK", "SECRET", "STORE_URL")


def configure_logging(fmt: str, env: Mapping[str, str]) -> None:
    """Values of variables whose names look secret (tokens, passwords, webhook URLs) never reach a log line."""
    secrets = [value for name, value in env.items() if any(m in name.upper() for m in SECRET_MARKERS)]
    configure(fmt, secrets=secrets)
