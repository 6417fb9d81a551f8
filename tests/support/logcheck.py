"""What the CLI writes to stderr, read as a log platform reads it: text log lines start with their UTC time and
level; under `--log-format json` every line is one JSON object."""

from __future__ import annotations

import json
import re
from typing import Any

TEXT_LINE = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) (debug|info|warning|error|critical): (.*)")
# a pass's `refused:` line under --watch / --until-complete carries its time too (`cli.output`)
REFUSED_LINE = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ (refused: .*)")


def message_of(line: str) -> str:
    """A text log line's message, once the line is checked to start with its UTC time and level."""
    match = TEXT_LINE.fullmatch(line)
    assert match is not None, f"not a text log line with its time: {line!r}"
    return match[3]


def json_objects(stderr: str) -> list[dict[str, Any]]:
    """Every line of `stderr` as the JSON object it must be (a line that is not one fails the test)."""
    objects = []
    for line in stderr.splitlines():
        try:
            value = json.loads(line)
        except json.JSONDecodeError:
            raise AssertionError(f"not a JSON object: {line!r}\nin:\n{stderr}") from None
        assert isinstance(value, dict), f"not a JSON object: {line!r}"
        objects.append(value)
    return objects


def reports(stderr: str) -> list[tuple[str, str, str | None]]:
    """The JSON objects' (level, event, hint), without their times."""
    return [(o["level"], o["event"], o.get("hint")) for o in json_objects(stderr)]


PASS_TAG = re.compile(r" \[pass=[0-9a-f]{12}\]$")  # a text log line's tail inside a reconcile pass


def untimed(stderr: str) -> str:
    """`stderr` with each text log line's time and pass id taken away (`2026-…Z warning: x [pass=…]` → `warning:
    x`)."""
    return "".join(
        PASS_TAG.sub("", REFUSED_LINE.sub(r"\1", TEXT_LINE.sub(r"\2: \3", line))) + "\n" for line in stderr.splitlines()
    )
