"""Logging setup for the CLI: text (the default) or JSON lines, with secrets redacted from every line.

JSON lines carry `time`, `level`, `event` (the message), `logger`, and when known `spec`, `dag`, `backfill`
and `pass_id` (from a record's `extra`, or the pass id of the current reconcile pass).
"""

from __future__ import annotations

import contextvars
import json
import logging
import sys
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any, TextIO

from controller.core.documents.escaping import json_text, plain
from controller.core.model.secret import redact_urls

PASS_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("backfillctl_pass_id", default=None)
FIELDS = ("spec", "dag", "backfill")


class Redactor(logging.Filter):
    """Replaces every given secret value in the formatted message (and its args) with `[secure]`, and the
    credentials of any URL in it with `***`."""

    def __init__(self, secrets: Iterable[str]) -> None:
        super().__init__()
        self.secrets = sorted({s for s in secrets if s and len(s) >= 4}, key=len, reverse=True)

    def redact(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "[secure]")
        return redact_urls(text)

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self.redact(record.getMessage())
        record.args = None
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "level": record.levelname.lower(),
            "event": record.getMessage(),
            "logger": record.name,
        }
        for name in FIELDS:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        pass_id = getattr(record, "pass_id", None) or PASS_ID.get()
        if pass_id is not None:
            line["pass_id"] = pass_id
        if record.exc_info and record.exc_info[0] is not None:
            line["error"] = record.exc_info[0].__name__  # the type only: a traceback's locals may hold secrets
        return json_text(json.dumps(line, sort_keys=True, ensure_ascii=False, default=str))


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        extra = " ".join(f"{n}={getattr(record, n)}" for n in FIELDS if getattr(record, n, None) is not None)
        pass_id = getattr(record, "pass_id", None) or PASS_ID.get()
        tail = " ".join(p for p in (extra, f"pass={pass_id}" if pass_id else "") if p)
        moment = datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        line = f"{moment} {record.levelname.lower()}: {record.getMessage()}" + (f" [{tail}]" if tail else "")
        return plain(line)


class PlainLastResort(logging.Handler):
    """Python's handler of last resort (no `--log-format`): the bare message on stderr, as one plain line."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(plain(record.getMessage()) + "\n")  # stderr of now: a test may have replaced it
        except Exception:  # logging never raises: the stdlib reports it the same way
            self.handleError(record)


def install_last_resort() -> None:
    """Warnings logged without a configured handler print their text from Airflow as one line too."""
    logging.lastResort = PlainLastResort()


def configure(fmt: str = "text", *, secrets: Iterable[str] = (), stream: TextIO | None = None) -> logging.Handler:
    """Install one handler on the `controller` logger (idempotent: a second call replaces the first)."""
    logger = logging.getLogger("controller")
    for old in [h for h in logger.handlers if getattr(h, "_backfillctl", False)]:
        logger.removeHandler(old)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(Redactor(secrets))
    handler._backfillctl = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.setLevel(logging.INFO if fmt == "json" else logging.WARNING)
    logger.propagate = fmt != "json"
    return handler
