"""`--log-format`: a command's logging, with every secret the environment holds redacted from each line."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping

from controller.adapters.logsetup import session

SECRET_MARKERS = ("TOKEN", "PASSWORD", "WEBHOOK", "SECRET", "STORE_URL")


@contextlib.contextmanager
def logging_for(fmt: str, env: Mapping[str, str]) -> Iterator[None]:
    """Values of variables whose names look secret (tokens, passwords, webhook URLs) never reach a log line."""
    secrets = [value for name, value in env.items() if any(m in name.upper() for m in SECRET_MARKERS)]
    with session(fmt, secrets):
        yield
