"""What the CLI writes: stdout, the width to fit, the rich status views, and the view of each reconcile pass.

Every function returns or writes text; none decides an exit code.
"""

# No `from __future__ import annotations` here: typer reads every command's annotations at each start, and
# string annotations would be compiled and evaluated again each time (tens of ms); names imported only for
# type checking are quoted instead.
import os
import shutil
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from controller.adapters.logsetup import TEXT_TIME, json_logs
from controller.core.documents.escaping import plain, plain_lines

if TYPE_CHECKING:  # rich loads only in the views that draw with it
    from rich.console import Group, RenderableType
    from rich.table import Table

    from controller.commands.reconcile.reconciler import PassResult
    from controller.core.render.status import StatusRow


def utc_now() -> datetime:
    """The wall clock the CLI reads (the commands' `now`, the times it prints)."""
    return datetime.now(UTC)


def iso_now() -> str:
    """Now as text log lines show their time."""
    return utc_now().strftime(TEXT_TIME)


def out(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def tty() -> bool:
    return sys.stdout.isatty()


def width() -> int | None:
    """The width to fit: COLUMNS, else the terminal's; none for a pipe or a file (one line a row, for grep)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return shutil.get_terminal_size().columns if tty() else None


class PassView:
    """once: the plan; text: the status table whenever it moved; rich: a live view shows the table. Repeating
    (--watch, --until-complete: a log read later) each line carries its time, and a pass's refusals and errors only
    when they changed."""

    def __init__(self, dry_run: bool, mode: str, watch: bool = False) -> None:
        self.dry_run, self.mode, self.watch, self.shown, self.said = dry_run, mode, watch, "", ""

    def show(self, result: "PassResult") -> None:
        from controller.core.render import plan as plan_render

        if self.dry_run or self.mode == "once":
            out(plan_render.plan_text(result.plan, width(), show_unchanged=False))
        after = {i.spec: i for i in result.current.items}
        out(self._stamp([plan_render.applied_line(i, o, after.get(i.spec)) for i, o in result.applied]))
        if self.mode == "text":  # only this mode shows the table: a --once pass over history need not build it
            from controller.core.render import status

            table = status.status_text(status.status_rows(result.current, {}, result.analysis), width())
            if table != self.shown:
                out(f"[{iso_now()}]\n{table}")
                self.shown = table
        said = plain_lines(
            [f"refused: {line}" for line in result.refused] + [f"error: {line}" for line in result.errors]
        )
        if not self.watch or said != self.said:
            sys.stderr.write(self._stamp(said.splitlines()))
            self.said = said

    def _stamp(self, lines: list[str]) -> str:
        """Under --watch each line with its time, unless it becomes a JSON object (which has its own)."""
        return plain_lines([f"{iso_now()} {line}" for line in lines] if self.watch and not json_logs() else lines)


COLOURS = {
    "Succeeded": "green",
    "CompletedWithFailures": "yellow",
    "Cancelled": "magenta",
    "Blocked": "red",
    "Orphaned": "red",
    "Running": "cyan",
    "Paused": "blue",
}


def status_rich(rows: "list[StatusRow]", width: int) -> "RenderableType":
    """A table when every name fits whole beside a note of some width, else a small block of lines per spec."""
    from controller.core.render.layout import NOTE_MIN
    from controller.core.render.status import STATUS_COLUMNS, cells

    sizes = [max([len(c.header), *(len(cells(r)[n]) for r in rows)]) for n, c in enumerate(STATUS_COLUMNS)]
    fits = sum(sizes) + 3 * (len(sizes) + 1) + 1 + NOTE_MIN <= width  # a box rule and two spaces of padding each
    return _status_table(rows) if fits else _status_blocks(rows)


def _status_blocks(rows: "list[StatusRow]") -> "Group":
    from rich.console import Group
    from rich.text import Text

    from controller.core.render.status import eta_text

    lines: list[RenderableType] = [Text(f"backfillctl status {utc_now().strftime('%H:%M:%S')}", style="bold")]
    for r in rows:
        head = Text(plain(r.spec), style="bold")
        head.append(plain(f"  DAG {r.dag_id}") + (f"  backfill #{r.backfill_id}" if r.backfill_id else ""))
        body = Text("  ")
        body.append(r.phase, style=COLOURS.get(r.phase, ""))
        body.append(f"  {r.progress:.0f}% done, ETA {eta_text(r.eta_seconds)}")
        runs = f"  runs: {r.success} ok, {r.failed} failed, {r.running} running, {r.queued} queued of {r.total}"
        lines += [head, body, Text(runs), *([Text(plain(f"  {r.note}"))] if r.note else [])]
    return Group(*lines)


def _status_table(rows: "list[StatusRow]") -> "Table":
    from rich.markup import escape
    from rich.table import Table

    from controller.core.render.status import eta_text

    table = Table(title=f"backfillctl status {utc_now().strftime('%H:%M:%S')}")
    for column in ("spec", "DAG", "phase", "backfill", "ok", "failed", "running", "queued", "total", "done", "ETA"):
        table.add_column(column, justify="left" if column in ("spec", "DAG", "phase") else "right", no_wrap=True)
    table.add_column("note", overflow="fold")
    for r in rows:
        phase = f"[{COLOURS[r.phase]}]{r.phase}[/]" if r.phase in COLOURS else r.phase
        table.add_row(
            escape(plain(r.spec)),
            escape(plain(r.dag_id)),
            phase,
            str(r.backfill_id or "-"),
            str(r.success),
            str(r.failed),
            str(r.running),
            str(r.queued),
            str(r.total),
            f"{r.progress:.0f}%",
            eta_text(r.eta_seconds),
            escape(plain(r.note)),
        )
    return table
