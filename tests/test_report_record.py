"""The change record's outputs stay byte-identical: `report --format json` (format_version 1) and the offline
markdown of representative records, against tests/golden/records/ captured before the record became a typed value."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller.commands.report import with_calendar
from controller.core.render import heatmap
from controller.core.render.status import report_json, report_markdown
from tests.report_records import RECORDS, names

GOLDEN = Path(__file__).parent / "golden" / "records"


@pytest.mark.parametrize("name", names())
def test_the_json_report_is_byte_identical(name: str) -> None:
    s, binding, events, retries = RECORDS[name]()
    text = json.dumps(report_json(s, binding, events, retries), indent=2) + "\n"
    assert text == (GOLDEN / f"{name}.json").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", names())
def test_the_offline_markdown_report_is_unchanged(name: str) -> None:
    s, binding, events, retries = RECORDS[name]()
    document = report_json(s, binding, events, retries)
    text = with_calendar(report_markdown(document, events), heatmap.from_stored(document), events)
    assert text == (GOLDEN / f"{name}.md").read_text(encoding="utf-8")
