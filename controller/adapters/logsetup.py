"""Logging for the CLI: text (the default) or JSON lines, with secrets redacted from every line.

Text lines start with their UTC time to the second (`2026-12-06T10:00:00Z warning: …`). JSON lines are one
object each, with `time` (UTC, to the microsecond), `level`, `event` (the message), `logger`, and when known
`spec`, `dag`, `backfill` and `pass_id` (from a record's `extra`, or the pass id of the current reconcile pass);
a record with an exception carries its type (`error`) and its traceback as one string (`exc_info`); the CLI's
reports carry `hint`, `details`, `usage`, `exit_code` and `crash_log`.

`session` sets a command up: the handler on the `controller` logger, Python warnings as log records, and under
JSON every other line written to `sys.stderr` (the CLI's messages, a library's print, a thread's traceback) as an
object of its own, so a log platform reads stderr line by line.
"""

from __future__ import annotations

import contextlib
import contextvars
import io
import json
import logging
import sys
import threading
import traceback
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any, TextIO

from controller.core.documents.escaping import json_text, plain
from controller.core.model.secret import redact_urls

PASS_ID: contextvars.ContextVar[str | None] = contextvars.ContextVar("backfillctl_pass_id", default=None)
FIELDS = ("spec", "dag", "backfill")
REPORTED = ("hint", "details", "usage", "exit_code", "crash_log")  # the CLI's reports (errors, usage errors)
TEXT_TIME = "%Y-%m-%dT%H:%M:%SZ"
JSON_TIME = "%Y-%m-%dT%H:%M:%S.%fZ"
TRACEBACK = "Traceback (most recent call last):"
# the level of a line something else wrote to stderr, by the word it starts with (`error: …`, `refused: …`)
STRAY_LEVELS = {
    "error": logging.ERROR,
    "refused": logging.ERROR,
    "failed": logging.ERROR,
    "stuck": logging.WARNING,
    "warning": logging.WARNING,
}


class Redactor(logging.Filter):
    """Replaces every given secret value in the formatted message (and its args), the traceback and the CLI's
    report fields with `[secure]`, and the credentials of any URL in them with `***`."""

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
        if record.exc_info and record.exc_info[0] is not None and record.exc_text is None:
            record.exc_text = "".join(traceback.format_exception(*record.exc_info)).rstrip("\n")
        if record.exc_text:
            record.exc_text = self.redact(record.exc_text)
        if record.stack_info:
            record.stack_info = self.redact(record.stack_info)
        for name in REPORTED:
            value = getattr(record, name, None)
            if isinstance(value, str):
                setattr(record, name, self.redact(value))
            elif isinstance(value, list):
                setattr(record, name, [self.redact(str(v)) for v in value])
        return True


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).strftime(JSON_TIME),
            "level": record.levelname.lower(),
            "event": record.getMessage(),
            "logger": record.name,
        }
        for name in FIELDS + REPORTED:
            value = getattr(record, name, None)
            if value is not None:
                line[name] = value
        pass_id = getattr(record, "pass_id", None) or PASS_ID.get()
        if pass_id is not None:
            line["pass_id"] = pass_id
        if record.exc_info and record.exc_info[0] is not None:
            line["error"] = record.exc_info[0].__name__
            record.exc_text = record.exc_text or self.formatException(record.exc_info)
        if record.exc_text:  # the traceback as one string (Python's show no local variables), redacted by the filter
            line["exc_info"] = record.exc_text
        if record.stack_info:
            line["stack_info"] = record.stack_info
        return json_line(line)


def json_line(fields: dict[str, Any]) -> str:
    """One JSON object on one line, safe on a terminal (see `json_text`)."""
    return json_text(json.dumps(fields, sort_keys=True, ensure_ascii=False, default=str))


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        extra = " ".join(f"{n}={getattr(record, n)}" for n in FIELDS if getattr(record, n, None) is not None)
        pass_id = getattr(record, "pass_id", None) or PASS_ID.get()
        tail = " ".join(p for p in (extra, f"pass={pass_id}" if pass_id else "") if p)
        moment = datetime.fromtimestamp(record.created, UTC).strftime(TEXT_TIME)
        line = f"{moment} {record.levelname.lower()}: {record.getMessage()}" + (f" [{tail}]" if tail else "")
        return plain(line)


class PlainLastResort(logging.Handler):
    """Python's handler of last resort (a logger outside `controller`, or no command set up): the text line of
    a configured handler, on the stderr of the moment."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.setFormatter(TextFormatter())

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")  # stderr of now: a test may have replaced it
        except Exception:  # logging never raises: the stdlib reports it the same way
            self.handleError(record)


def install_last_resort() -> None:
    """Warnings logged without a configured handler print as one text line too."""
    logging.lastResort = PlainLastResort()


def configure(fmt: str = "text", *, secrets: Iterable[str] = (), stream: TextIO | None = None) -> logging.Handler:
    """Install one handler on the `controller` logger (idempotent: a second call replaces the first). Text shows
    warnings and errors, JSON info too (for log platforms)."""
    logger = logging.getLogger("controller")
    for old in [h for h in logger.handlers if getattr(h, "_backfillctl", False)]:
        logger.removeHandler(old)
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    handler.addFilter(Redactor(secrets))
    handler.setLevel(logging.INFO if fmt == "json" else logging.WARNING)
    handler._backfillctl = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    if fmt == "json":
        logger.setLevel(logging.INFO)
    logger.propagate = fmt != "json"
    return handler


def json_logs() -> bool:
    """Whether the `controller` logger writes JSON lines now (the CLI then says everything through it)."""
    handlers = logging.getLogger("controller").handlers
    return any(getattr(h, "_backfillctl", False) and isinstance(h.formatter, JsonFormatter) for h in handlers)


@contextlib.contextmanager
def session(fmt: str, secrets: Iterable[str] = ()) -> Iterator[None]:
    """One command's logging (see the module's doc); everything as it was found afterwards."""
    install_last_resort()
    raw, logger = sys.stderr, logging.getLogger("controller")
    warned = logging.getLogger("py.warnings")
    found = (logger.level, logger.propagate, warned.propagate, threading.excepthook, sys.unraisablehook)
    handler = configure(fmt, secrets=secrets, stream=raw)
    warned.addHandler(handler)
    warned.propagate = fmt != "json"
    logging.captureWarnings(True)
    lines = StrayLines(raw, logging.getLogger("controller.stderr")) if fmt == "json" else None
    if lines is not None:
        sys.stderr = lines
        threading.excepthook, sys.unraisablehook = _thread_failed, _unraisable
    try:
        yield
    finally:
        if lines is not None:
            lines.drain()
            if sys.stderr is lines:
                sys.stderr = raw
        logging.captureWarnings(False)
        logger.removeHandler(handler)
        warned.removeHandler(handler)
        level, logger.propagate, warned.propagate, threading.excepthook, sys.unraisablehook = found
        logger.setLevel(level)  # through setLevel: it clears the loggers' cached levels


def _thread_failed(args: threading.ExceptHookArgs) -> None:
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    exc_info = (args.exc_type, args.exc_value or args.exc_type(), args.exc_traceback)
    logging.getLogger("controller.thread").error("unexpected error in thread %s", name, exc_info=exc_info)


def _unraisable(args: Any) -> None:
    """`sys.unraisablehook` (an error in a finaliser, say): one record, not Python's lines on stderr."""
    exc_info = (args.exc_type, args.exc_value or args.exc_type(), args.exc_traceback)
    what = args.err_msg or "Exception ignored in"
    logging.getLogger("controller.unraisable").error("%s: %r", what, args.object, exc_info=exc_info)


class StrayLines(io.TextIOBase):
    """`sys.stderr` under JSON logs: each line written to it becomes a record of `logger` (one JSON object), its
    level from the word it starts with; indented lines right after it in the same write are its `details` (an
    indented `hint: …` its `hint`), and a traceback Python prints line by line is one record, its text in
    `exc_info`. Blank lines are dropped. Writes to the file descriptor itself (a child process, C code) are not
    seen."""

    def __init__(self, raw: TextIO, logger: logging.Logger) -> None:
        super().__init__()
        self.raw, self.logger = raw, logger
        self._partial = ""
        self._trace: list[str] | None = None  # a traceback's lines so far, until its exception's own line
        self._guard = threading.RLock()
        self._inside = threading.local()  # a record being logged: what logging itself writes goes to `raw`

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return getattr(self.raw, "encoding", None) or "utf-8"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self.raw.fileno()

    def flush(self) -> None:
        self.raw.flush()

    def write(self, text: str) -> int:
        if getattr(self._inside, "now", False):  # logging's own complaint about a failed record
            return self.raw.write(text)
        with self._guard:
            *lines, self._partial = (self._partial + text).split("\n")
            self._take(lines)
        return len(text)

    def drain(self) -> None:
        """Log a last line that never got its newline, and a traceback cut short."""
        with self._guard:
            rest, self._partial = self._partial, ""
            self._take([rest])
            if self._trace is not None:
                self._traced()

    def _take(self, lines: list[str]) -> None:
        """A traceback ends with its exception's own line (the first unindented one after its head), in whichever
        write it comes; the other lines are grouped within their write."""
        others: list[str] = []
        for line in lines:
            if self._trace is None and not line.startswith(TRACEBACK):
                others.append(line)
            elif self._trace is None:
                self._said(others)
                others, self._trace = [], [line]
            else:
                self._trace.append(line)
                if line.strip() and not line[:1].isspace():
                    self._traced()
        self._said(others)

    def _said(self, lines: list[str]) -> None:
        for head, details in _groups(lines):
            hint = next((d.removeprefix("hint: ") for d in details if d.startswith("hint: ")), None)
            rest = [d for d in details if not d.startswith("hint: ")]
            level = STRAY_LEVELS.get(head.split(":", 1)[0].strip().lower(), logging.INFO)
            extra = {"hint": hint, "details": rest or None}
            self._handle(self.logger.makeRecord(self.logger.name, level, "(stderr)", 0, head, (), None, extra=extra))

    def _traced(self) -> None:
        trace, self._trace = self._trace or [], None
        last = next((line.strip() for line in reversed(trace) if line.strip()), TRACEBACK)
        record = self.logger.makeRecord(self.logger.name, logging.ERROR, "(stderr)", 0, last, (), None)
        record.exc_text = "\n".join(trace).strip("\n")
        self._handle(record)

    def _handle(self, record: logging.LogRecord) -> None:
        self._inside.now = True
        try:
            self.logger.handle(record)
        finally:
            self._inside.now = False


def _groups(lines: list[str]) -> Iterator[tuple[str, list[str]]]:
    """Each unindented line with the indented lines after it (stripped); blank lines dropped."""
    head: str | None = None
    details: list[str] = []
    for line in lines:
        if not line.strip():
            continue
        if line[:1].isspace() and head is not None:
            details.append(line.strip())
            continue
        if head is not None:
            yield head, details
        head, details = line.strip() if line[:1].isspace() else line, []
    if head is not None:
        yield head, details
