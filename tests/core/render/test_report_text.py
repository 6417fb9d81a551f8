"""The change record for a terminal: the Markdown one without its markup (exact lines)."""

from __future__ import annotations

from controller.core.documents.escaping import md_code, md_text
from controller.core.render.report_text import report_text


def test_the_markdown_record_reads_as_text() -> None:
    markdown = (
        f"# Change record: {md_text('orders_fix')}\n"
        "\n"
        f"- **Outcome**: {md_text('Succeeded (backfill #6)')}\n"
        f"- **Ticket**: {md_text('CHG-1 [x] <b> & $5 | a*b ~c~')}\n"
        f"- **DAG**: {md_code('orders_daily')}, {md_text('run_on_latest_version')}\n"
        "## Audit trail\n"
        "\n"
        "```\n"
        "1 create intent `x`\n"
        "```\n"
    )
    assert "\\(" in markdown  # the input is escaped as report_markdown escapes it
    assert report_text(markdown) == (
        "Change record: orders_fix\n"
        "\n"
        "- Outcome: Succeeded (backfill #6)\n"
        "- Ticket: CHG-1 [x] <b> & $5 | a*b ~c~\n"
        "- DAG: orders_daily, run_on_latest_version\n"
        "AUDIT TRAIL\n"
        "\n"
        "1 create intent `x`\n"  # a fence's lines are kept as they are
    )
