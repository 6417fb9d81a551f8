"""Render a plan as Terraform-like text, Markdown (the PR comment) or versioned JSON (pure)."""

from __future__ import annotations

import html
import json
from collections import Counter
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, time

from controller.core.documents.escaping import md_code, md_text, plain_lines
from controller.core.model.binding import Phase
from controller.core.model.load import load_lines
from controller.core.model.spec import format_utc
from controller.core.plan.values import INCOMPLETE, Finding, Item, Kind, Plan, in_flight_text, summary_counts
from controller.core.render.layout import NOTE_INDENT, hang, wrap
from controller.core.rules.chunks import chunk_text
from controller.errors import truncate

SYMBOLS = {
    Kind.CREATE: "+",
    Kind.ADOPT: "~",
    Kind.PAUSE: "~",
    Kind.UNPAUSE: "~",
    Kind.CANCEL: "-",
    Kind.NOOP: "=",
    Kind.WAIT: "…",
    Kind.REFUSE: "!",
    Kind.BLOCKED: "!",
}
LABELS = {Kind.NOOP: "in sync", Kind.WAIT: "queued", Kind.REFUSE: "refused"}
NO_CHECKSUM = "none: the observation was incomplete, so this plan can be neither reviewed nor applied"
MARKDOWN_TEXT_LIMIT = 300  # server-supplied text in a PR comment is cut to this


def label(item: Item) -> str:
    return LABELS.get(item.kind, item.kind.value)


def range_text(first: datetime, last: datetime) -> str:
    """Dates when both ends are at 00:00 UTC, else the date-times (an hourly range ends at 23:00, not on a date)."""
    ends = (first.astimezone(UTC), last.astimezone(UTC))
    if all(e.time() == time(0) for e in ends):
        return f"{ends[0].date()} → {ends[1].date()}"
    return f"{format_utc(first)} → {format_utc(last)}"


def fact_parts(item: Item) -> list[str]:
    """The key facts of an action, each a unit that is never broken across lines."""
    spec = item.source
    if spec is None:
        return []
    parts = [
        range_text(spec.from_date, spec.to_date),
        f"reprocess {spec.reprocess_behavior.value}",
        f"max_active_runs {spec.max_active_runs}",
        "backwards" if spec.run_backwards else "forward",
    ]
    if item.runs_to_create is not None:
        in_range = f" of {item.runs_in_range} in range" if item.runs_in_range is not None else ""
        parts.append(f"runs {item.runs_to_create}{in_range}" + partitions_text(item, ", "))
    chunks = chunks_text(item)
    if chunks:
        parts.append(chunks)
    if item.task_ceiling is not None:
        parts.append(f"up to {item.task_ceiling} tasks at once")
    if item.code is not None:
        parts.append(item.code)
    parts += [f"approvers {', '.join(spec.approvers)}", f"ticket {spec.ticket}"]
    if item.backfill_id:
        parts.insert(0, f"backfill #{item.backfill_id}")
    return parts


def facts(item: Item) -> str:
    if item.source is None:
        return item.reason
    text = "  ".join(fact_parts(item))
    return f"{text}  — {item.reason}" if item.reason else text


def chunks_text(item: Item) -> str:
    """`8,760 runs in 52 chunks of ≤ 168; canary 24` for a new chunked spec, `chunk 3 of 7` for one under way."""
    if item.chunking is not None and item.runs_to_create is not None:  # set on a first chunk's create only
        return item.chunking.describe(item.runs_to_create)
    if item.chunk is not None:
        return chunk_text(item.chunk)
    return ""


def partitions_text(item: Item, sep: str) -> str:
    """`, partitions FIRST … LAST` for a partitioned DAG's dry run (partition keys, not logical dates)."""
    if item.partitions is None:
        return ""
    return f"{sep}partitions {item.partitions[0]} … {item.partitions[1]}"


def applied_line(item: Item, outcome: str, after: Item | None) -> str:
    """`+ create orders-fix: created backfill #14 (chunk 2 of 5)`: what a change did, to which backfill."""
    now = after or item
    target = f" backfill #{now.backfill_id}" if now.backfill_id and item.kind is Kind.CREATE else ""
    chunk = f" ({chunk_text(now.chunk)})" if now.chunk is not None else ""
    return f"{SYMBOLS[item.kind]} {item.kind.value} {item.spec}: {outcome}{target}{chunk}"


def summary_line(plan: Plan) -> str:
    return summary_text(summary_counts(plan))


EXTRAS = {
    "unpause": "to unpause",
    # nothing is created for these: a backfill already in Airflow is recorded as the spec's (after a lost answer,
    # a lost store, or in a plan without the store, where every applied spec's backfill reads so)
    "adopt": "already in Airflow (adopted, nothing created)",
}


def summary_text(c: Mapping[str, int]) -> str:
    """`Plan: 2 to create, 1 to pause, 0 to cancel, 1 queued, 1 blocked.`, then the counts that are not zero."""
    line = (
        f"Plan: {c['create']} to create, {c['pause']} to pause, {c['cancel']} to cancel, {c['queued']} queued, "
        f"{c['blocked']} blocked."
    )
    extras = [f"{c[k]} {words}" for k, words in EXTRAS.items() if c.get(k)]
    return line[:-1] + (", " + ", ".join(extras) + "." if extras else ".")


def checksum_text(plan: Plan) -> str:
    return plan.checksum() if plan.complete else NO_CHECKSUM


def findings(plan: Plan) -> Iterator[tuple[str, str]]:
    """(kind, message) once per finding; DAGs that failed to be observed for one cause share one line."""
    shared: dict[str, list[Finding]] = {}
    for finding in plan.findings:
        if finding.kind == INCOMPLETE and finding.cause:
            shared.setdefault(finding.cause, []).append(finding)
        else:
            yield finding.kind, finding.message
    for cause, group in shared.items():
        if len(group) == 1:
            yield INCOMPLETE, group[0].message
        else:
            yield INCOMPLETE, f"DAGs {', '.join(f.dag_id for f in group)} were not fully observed: {cause}"


def plan_text(plan: Plan, width: int | None = None, *, show_unchanged: bool = True) -> str:
    """One line per action, its first columns aligned; a line longer than `width` puts the facts on indented
    lines below it (a fact is never broken, a name never cut). Without `show_unchanged`, the specs in sync are one
    summary line (Terraform shows only changes); everything else — changes, queued, blocked, orphaned — is listed."""
    shown = [i for i in plan.items if show_unchanged or not unchanged(i)]
    spec_w = max((len(i.spec) for i in shown), default=0)
    dag_w = max((len(i.dag_id) for i in shown), default=0)
    lines = []
    for i in shown:
        head = f"{SYMBOLS[i.kind]} {label(i):<9} {i.spec:<{spec_w}}  {i.dag_id:<{dag_w}}"
        line = f"{head}  {facts(i)}  [{i.phase.value}]"
        lines += [line] if width is None or len(line) <= width else _folded(i, f"{head}  [{i.phase.value}]", width)
        flying = in_flight_text(i)
        lines += hang(f"    {flying}", width) if flying else []
        lines += hang(f"    {i.code_in_range.text()}", width) if i.code_in_range is not None else []
        lines += hang(f"    {i.selection.text()}", width) if i.selection is not None else []
        lines += [w for extra in item_load(i) for w in hang(f"    {extra}", width)]
    lines += [w for kind, message in findings(plan) for w in hang(f"! {kind}: {message}", width)]
    lines += [w for b in plan.budgets for w in hang(f"Load: {b.text()}", width)]
    hidden = len(plan.items) - len(shown) + plan.at_rest.count
    lines += [unchanged_line(plan)] if hidden else []
    lines += [summary_line(plan), f"Checksum: {checksum_text(plan)}"]
    return plain_lines(lines)


def unchanged(item: Item) -> bool:
    """In sync: nothing to do and nothing to see (a deleted spec's backfill still running is something to see)."""
    return item.kind is Kind.NOOP and not item.error and item.phase is not Phase.ORPHANED


def unchanged_line(plan: Plan) -> str:
    """`12 specs unchanged (10 Succeeded, 2 Running): --show-unchanged lists them`; the specs at rest counted in."""
    phases = Counter(i.phase.value for i in plan.items if unchanged(i))
    phases.update({phase.value: n for phase, n in plan.at_rest.phases})
    count = sum(phases.values())
    by_phase = ", ".join(f"{n} {phase}" for phase, n in sorted(phases.items(), key=lambda p: (-p[1], p[0])))
    return f"{count} spec{'' if count == 1 else 's'} unchanged ({by_phase}): --show-unchanged lists them"


def _folded(item: Item, aligned: str, width: int) -> list[str]:
    """The action's first line (aligned if it fits, else its names unpadded, else the DAG and then the phase go
    below), then
    the facts packed into indented lines of `width`, then the reason."""
    start, phase = f"{SYMBOLS[item.kind]} {label(item):<9} {item.spec}", f"[{item.phase.value}]"
    if len(aligned) <= width:
        return [aligned, *_below(item, fact_parts(item), width)]
    if len(f"{start}  {item.dag_id}  {phase}") <= width:
        return [f"{start}  {item.dag_id}  {phase}", *_below(item, fact_parts(item), width)]
    if len(f"{start}  {phase}") <= width:
        return [f"{start}  {phase}", *_below(item, [f"DAG {item.dag_id}", *fact_parts(item)], width)]
    return [start, *_below(item, [phase, f"DAG {item.dag_id}", *fact_parts(item)], width)]


def _below(item: Item, parts: list[str], width: int) -> list[str]:
    lines: list[str] = []
    for part in parts:
        if lines and len(lines[-1]) + 2 + len(part) <= width:
            lines[-1] += f"  {part}"
        else:
            lines.append(f"{NOTE_INDENT}{part}")
    reason = (f"— {item.reason}" if item.source is not None else item.reason) if item.reason else ""
    return lines + ([NOTE_INDENT + w for w in wrap(reason, width - len(NOTE_INDENT))] if reason else [])


def item_load(item: Item, *, drain: bool = True) -> list[str]:
    """A create's hidden-load lines: the DAGs its asset events trigger, its pools, its metadata rows, and with
    `drain_dag` (unless `drain` is False: said elsewhere) the DAG's own runs it holds back."""
    drained = item.drain.lines() if item.drain is not None and drain else []
    if item.load is None or item.runs_to_create is None:
        return drained
    return load_lines(item.load, item.runs_to_create) + drained


def md(text: str, limit: int = MARKDOWN_TEXT_LIMIT) -> str:
    """Text from users or servers, safe inside a Markdown table cell or list item: one line, cut, escaped."""
    return md_text(truncate(text, limit))


def value_text(value: object) -> str:
    """A fact as a person reads it: lists joined, yes/no, no Python reprs."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value) or "none"
    return str(value)


def plan_markdown(plan: Plan, heading: str = "### backfillctl plan") -> str:
    rows = ["| | spec | DAG | action | runs | phase |", "|---|---|---|---|---|---|"]
    for i in plan.items:
        runs = (
            ""
            if i.runs_to_create is None
            else f"{i.runs_to_create}" + (f" of {i.runs_in_range}" if i.runs_in_range is not None else "")
        )
        rows.append(
            f"| `{SYMBOLS[i.kind]}` | {md_code(i.spec)} | {md_code(i.dag_id)} | {label(i)} | {runs} | {i.phase.value} |"
        )
    details = [_details(i) for i in plan.items]
    notes = [f"- **{kind}**: {md(message)}" for kind, message in findings(plan)]
    checksum = f"`{plan.checksum()}`" if plan.complete else NO_CHECKSUM
    parts = [
        heading,
        "",
        *rows,
        "",
        *details,
        *(["**Findings**", "", *notes, ""] if notes else []),
        *(["**Load**", "", *[f"- {md(b.text())}" for b in plan.budgets], ""] if plan.budgets else []),
        f"**{summary_line(plan)}** Checksum: {checksum}",
    ]
    return "\n".join(parts) + "\n"


_NOT_LISTED = (
    "request",
    "runs",
    "first_partition",
    "last_partition",
    "in_flight",
    "in_flight_more",
    "code_in_range",
    "selection",
    "chunk",
    "chunking",
    "load",
    "drain",
)


def _details(item: Item) -> str:
    lines = [f"<details><summary><code>{html.escape(item.spec)}</code>: {label(item)}</summary>", ""]
    lines += [
        f"- {k}: {md(value_text(v))}" for k, v in sorted(item.facts.items()) if k not in _NOT_LISTED and v is not None
    ]
    if item.partitions is not None:
        lines.append(f"- partitions to run: {md(item.partitions[0])} … {md(item.partitions[1])}")
    elif item.first_date is not None and item.last_date is not None:
        lines.append(f"- first and last dates to run: {format_utc(item.first_date)} … {format_utc(item.last_date)}")
    flying = in_flight_text(item)
    if flying:
        lines.append(f"- {md(flying)}")
    if item.code_in_range is not None:
        lines.append(f"- {md(item.code_in_range.text())}")
    if item.selection is not None:
        lines.append(f"- {md(item.selection.text())}")
    chunks = chunks_text(item)
    if chunks:
        lines.append(f"- chunks: {chunks}")
    lines += [f"- {md(extra)}" for extra in item_load(item)]
    if item.reason:
        lines.append(f"- {md(item.reason)}")
    return "\n".join([*lines, "", "</details>", ""])


def plan_json(plan: Plan) -> str:
    return json.dumps(plan.as_json(), indent=2, sort_keys=True) + "\n"
