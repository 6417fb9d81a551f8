"""The change record's outputs stay byte-identical: `report --format json` (format_version 1) and the offline
markdown and HTML of representative records, against tests/core/render/golden/records/ (captured before the record
became a typed value)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from controller.core.render import heatmap
from controller.core.render.change_record import change_record
from controller.core.render.report_html import report_html
from controller.core.render.report_markdown import report_markdown
from tests.core.render.report_records import RECORDS, names

GOLDEN = Path(__file__).parent / "golden" / "records"


@pytest.mark.parametrize("name", names())
def test_the_json_report_is_byte_identical(name: str) -> None:
    s, binding, events, retries = RECORDS[name]()
    text = json.dumps(change_record(s, binding, events, retries).as_json(), indent=2) + "\n"
    assert text == (GOLDEN / f"{name}.json").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", names())
def test_the_offline_markdown_report_is_unchanged(name: str) -> None:
    s, binding, events, retries = RECORDS[name]()
    record = change_record(s, binding, events, retries)
    text = report_markdown(record, heatmap.from_stored(record.intervals))
    assert text == (GOLDEN / f"{name}.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("name", names())
def test_the_offline_html_report_is_unchanged(name: str) -> None:
    s, binding, events, retries = RECORDS[name]()
    record = change_record(s, binding, events, retries)
    assert report_html(record, heatmap.from_stored(record.intervals)) == (GOLDEN / f"{name}.html").read_text("utf-8")
