"""The pull request's sticky plan comment, from the plan and the files the PR changes (pure).

What the PR adds or changes comes first, one table row per spec with its ticket and reason, then one
line for the rest of the plan. Everything that came from a spec file or from Airflow is escaped, so a
reason cannot break the table, open HTML or close a code span. The comment never exceeds GitHub's
65,536-character limit: when it would, whole rows and sections are left out, a note says how many, and
the summary line is kept.

A spec whose runs re-run history on a DAG version that is not the latest (`run_on_latest_version: false`, the
DAG's own `rerun_with_latest_version: false`, or a release without the field) is called out before the table, and
so are the tables each spec rewrites (`writes`) with how to undo it (`rollback`). A spec's details say its
rehearsal slices, its verify DAG and its publish DAG, one line each.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from controller.core.documents.escaping import md_code as code
from controller.core.documents.escaping import md_text as escape
from controller.core.model.capabilities import Capabilities, run_on_latest
from controller.core.model.spec import BackfillSpec, ReprocessBehavior, format_utc
from controller.core.model.stages import Promotion
from controller.core.plan.values import INCOMPLETE, Item, Kind, Plan, summary_counts
from controller.core.render.plan import EXTRAS, LABELS, SYMBOLS, item_load, summary_text

MARKER = "<!-- backfillctl-plan -->"
LIMIT = 65_536  # GitHub's maximum comment body, in characters
REASON_CELL = 200  # characters of a spec's reason shown in the table (the full text is in the details)
ROLLBACK_SHOWN = 300  # characters of a rollback note shown (the spec file has it all)
LISTED = 10  # tables and slices shown by name; the rest are counted
SPEC_SUFFIXES = (".yaml", ".yml")
POLICY_STEM = "policy"
# the rest of the plan in the summary line's words and order: under `--no-store` every applied spec's backfill
# reads as adopted, which is no action of the merge
REST_WORDS = {
    Kind.CREATE: "to create",
    Kind.PAUSE: "to pause",
    Kind.CANCEL: "to cancel",
    Kind.WAIT: "queued",
    Kind.BLOCKED: "blocked",
    Kind.REFUSE: "refused",
    Kind.UNPAUSE: EXTRAS["unpause"],
    Kind.ADOPT: EXTRAS["adopt"],
    Kind.NOOP: "in sync",
}


@dataclass(frozen=True, slots=True)
class SpecNote:
    """What a reviewer needs beside the plan: the spec's ticket and reason (they are in the spec file)."""

    ticket: str
    reason: str


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def label(kind: Kind) -> str:
    return LABELS.get(kind, kind.value)  # the plan's words: `in sync`, `queued`, `refused`, else the kind


def pr_comment(
    plan: Plan,
    changed_paths: Sequence[str],
    notes: Mapping[str, SpecNote],
    limit: int = LIMIT,
    *,
    airflow: Capabilities | None = None,
) -> str:
    """The comment body (starting with MARKER) for `plan`.

    `changed_paths` are the files the PR changes below specs/ (`git diff --name-only`), `notes` the
    ticket and reason of the PR's specs by name, `airflow` the release the plan was made against (None: not
    read, and no spec is called out for its code).
    """
    items = {item.spec: item for item in plan.items}
    names, policy, other = _classify(changed_paths)
    planned = [items[name] for name in names if name in items]
    missing = [name for name in names if name not in items]
    head = [
        MARKER,
        "### backfillctl plan",
        "",
        *_refused([item for item in planned if item.kind is Kind.REFUSE or item.refused_at_head is not None]),
    ]
    head += _older_code(planned, airflow)
    head += _triggered(planned)
    head += _drained(planned)
    head += _writes(planned)
    if not plan.complete:
        head += [
            "**Incomplete plan**: not every DAG could be observed in Airflow (findings below), so it shows less "
            "than reconcile would do. Fix the cause and run the check again.",
            "",
        ]
    units: list[str] = []
    if planned:
        head += [f"**Specs this pull request adds or changes ({len(planned)})**", ""]
        head += [
            "| | spec | DAG | action | runs | phase | ticket | reason |",
            "|---|---|---|---|---|---|---|---|",
        ]
        units += [_row(item, notes.get(item.spec)) for item in planned]
        units += [""] + [_details(item, notes.get(item.spec)) for item in planned]
    elif not missing and not policy:
        head += ["This pull request changes no spec."]
    units += [
        f"- {code(name)}: not in the plan: the file was deleted or moved. Deleting a spec never cancels "
        "its backfill: an unfinished one is reported as orphaned after the merge."
        for name in missing
    ]
    units += [f"- {code(path)}: the policy changes; it applies to every spec once merged." for path in policy]
    units += [f"- {code(path)}: changed, not a spec." for path in other]
    dags = {item.dag_id for item in planned}
    findings = [f for f in plan.findings if f.dag_id in dags or f.kind is INCOMPLETE]
    if findings:
        units += ["", "**Findings**", ""]
        units += [f"- **{escape(f.kind.value)}** on {code(f.dag_id)}: {escape(f.message)}" for f in findings]
    rest_findings = len(plan.findings) - len(findings)
    tail = ["", _rest(plan, set(names), rest_findings), "", f"**{summary_text(summary_counts(plan))}**", ""]
    return _fit(head, units, tail, limit)


def changed_specs(paths: Sequence[str]) -> list[str]:
    """The names of the specs the changed paths add or change (a spec's name is its file's stem)."""
    return _classify(paths)[0]


def _classify(paths: Sequence[str]) -> tuple[list[str], list[str], list[str]]:
    """Changed spec names (in path order, once each), changed policy files, other changed files."""
    names: list[str] = []
    policy: list[str] = []
    other: list[str] = []
    for path in sorted({p.strip() for p in paths if p.strip()}):
        base = path.rsplit("/", 1)[-1]
        stem, dot, suffix = base.rpartition(".")
        if not dot or f".{suffix}" not in SPEC_SUFFIXES:
            other.append(path)
        elif stem == POLICY_STEM:
            policy.append(path)
        elif stem not in names:
            names.append(stem)
    return names, policy, other


def _refused(items: Sequence[Item]) -> list[str]:
    """The comment leads with what the merge would be refused: the check fails (exit 5) for these."""
    if not items:
        return []
    count = f"{len(items)} spec{'' if len(items) == 1 else 's'}"
    return [
        f"**Refused: after the merge, reconcile would refuse {count} this pull request adds or changes** "
        "(this check fails, exit 5):",
        "",
        *[f"- {code(item.spec)}: {escape(item.reason)}" for item in items],
        "",
        "Fix the spec (review the dry run's count and set `expected_runs` to it, or narrow the range) and push "
        "again; reconcile creates nothing for a refused spec.",
        "",
    ]


def _older_code(items: Sequence[Item], airflow: Capabilities | None) -> list[str]:
    """The PR's specs whose re-runs will not run the DAG's latest code, each with why and the plan's code line."""
    lines = [f"- {code(item.spec)}: {escape(why)}" for item in items if (why := _why_older(item, airflow))]
    if not lines:
        return []
    return [
        "**Re-runs on older code: these specs re-run history on the DAG version each run first ran with, not the "
        "latest** (new runs use the latest):",
        "",
        *lines,
        "",
        "If history needs the current code, set `run_on_latest_version: true` in the spec.",
        "",
    ]


def _triggered(items: Sequence[Item]) -> list[str]:
    """The PR's creates whose runs trigger other DAGs through the assets they emit (apache/airflow#52665)."""
    lines = [
        f"- {code(item.spec)}: {escape(line)}"
        for item in items
        if item.load is not None and item.runs_to_create is not None
        for line in item_load(item)
        if line.startswith("each run emits asset ")
    ]
    if not lines:
        return []
    return [
        "**Asset-triggered DAGs: each backfilled run emits its asset events, so these DAGs run too** (their owners "
        "should approve; name them in the spec's `downstream`):",
        "",
        *lines,
        "",
    ]


def _drained(items: Sequence[Item]) -> list[str]:
    """The PR's creates that drain their DAG: what they hold back and what unpausing it does (owners approve)."""
    lines = [f"- {code(item.spec)}: {escape(line)}" for item in items if item.drain for line in item.drain.lines()]
    if not lines:
        return []
    return [
        "**Drains: these specs stop their DAG's own runs while they run and leave it paused** (the owners of the "
        "systems it loads approve; backfillctl never unpauses it):",
        "",
        *lines,
        "",
    ]


def _writes(items: Sequence[Item]) -> list[str]:
    """What the PR's specs rewrite and how each is undone: what a reviewer weighs before approving."""
    lines = [
        f"- {code(item.spec)}: {_rewrites(spec)}"
        for item in items
        if (spec := item.source) is not None and (spec.writes or spec.rollback is not None)
    ]
    if not lines:
        return []
    return ["**Tables these specs rewrite, and how to undo it:**", "", *lines, ""]


def _rewrites(spec: BackfillSpec) -> str:
    parts = [f"rewrites {_listed([code(table) for table in spec.writes])}"] if spec.writes else []
    if spec.rollback is None:
        parts.append("no rollback note")
    else:
        parts.append(f"rollback: {escape(cut(' '.join(spec.rollback.split()), ROLLBACK_SHOWN))}")
    return "; ".join(parts)


def _listed(shown: Sequence[str]) -> str:
    more = len(shown) - LISTED
    return ", ".join(shown[:LISTED]) + (f" and {more} more" if more > 0 else "")


def _stages(spec: BackfillSpec | None) -> list[str]:
    """One line each for the rehearsal, the verify DAG and the publish DAG the spec sets."""
    if spec is None:
        return []
    lines = []
    if spec.rehearsal is not None:
        slices = [f"{_day(s.from_date)} … {_day(s.to_date)}" for s in spec.rehearsal.slices]
        count = f"{len(slices)} slice{'' if len(slices) == 1 else 's'}"
        lines.append(f"rehearsal (attempt {spec.rehearsal.attempt}), {count}: {_listed(slices)}")
    if spec.verify is not None:
        task = f", result task {code(spec.verify.result_task)}" if spec.verify.result_task else ""
        canary = spec.execution is not None and spec.execution.promotion is Promotion.ON_VERIFICATION
        lines.append(
            f"verify: {code(spec.verify.dag_id)} (timeout {spec.verify.timeout_minutes} min{task})"
            + ("; its pass after the canary continues the spec" if canary else "")
        )
    if spec.publish is not None:
        lines.append(f"publish: {code(spec.publish.dag_id)}, once, after the final verification passed")
    return lines


def _day(value: datetime) -> str:
    """A date when the instant is midnight UTC (how specs usually say it), else the full date-time."""
    utc = format_utc(value)
    return utc[:10] if utc.endswith("T00:00:00Z") else utc


def _why_older(item: Item, airflow: Capabilities | None) -> str | None:
    spec = item.source
    if airflow is None or spec is None or item.kind not in (Kind.CREATE, Kind.WAIT):
        return None
    if spec.reprocess_behavior is ReprocessBehavior.NONE:
        return None  # nothing is re-run: every run is new, on the latest version
    asked = item.request.run_on_latest_version if item.request is not None else spec.run_on_latest_version
    resolved = run_on_latest(airflow, asked)
    if resolved is True:
        return None
    if resolved is None:
        why = f"Airflow {airflow.version} has no run_on_latest_version (3.1.6 or newer)"
    elif spec.run_on_latest_version is False:
        why = "the spec sets run_on_latest_version: false"
    else:
        why = "the DAG sets rerun_with_latest_version: false, and the spec does not say"
    runs = f"reprocess {spec.reprocess_behavior.value} re-runs existing runs; {why}"
    return runs + (f". Code: {item.code}" if item.code else "")


def _row(item: Item, note: SpecNote | None) -> str:
    runs = "" if item.runs_to_create is None else str(item.runs_to_create)
    if runs and item.runs_in_range is not None:
        runs += f" of {item.runs_in_range}"
    ticket = escape(note.ticket) if note else ""
    reason = escape(cut(" ".join(note.reason.split()), REASON_CELL)) if note else ""
    cells = [
        f"`{SYMBOLS.get(item.kind, '?')}`",
        code(item.spec),
        code(item.dag_id),
        escape(label(item.kind)),
        runs,
        escape(item.phase.value),
        ticket,
        reason,
    ]
    return "| " + " | ".join(cells) + " |"


def _details(item: Item, note: SpecNote | None) -> str:
    title = f"<code>{html.escape(item.spec)}</code>: {html.escape(label(item.kind))}"
    lines = [f"<details><summary>{title}</summary>", ""]
    if note:
        lines.append(f"- reason: {escape(note.reason)}")
    for key, value in sorted(item.facts.items()):  # the spec's facts as the plan's JSON says them
        if key in ("request", "runs", "load", "drain", "code_in_range", "selection") or value is None:
            continue
        lines.append(f"- {code(key)}: {escape(_show(value))}")
    lines += [f"- {line}" for line in _stages(item.source)]
    if item.first_date is not None and item.last_date is not None:
        first, last = format_utc(item.first_date), format_utc(item.last_date)
        lines.append(f"- first and last dates to run: {escape(first)} … {escape(last)}")
    lines += [f"- {escape(extra)}" for extra in item_load(item, drain=False)]  # the drain is said at the top
    if item.code_in_range is not None:  # which code made the runs it re-runs, before the merge
        lines.append(f"- {escape(item.code_in_range.text())}")
    if item.selection is not None:  # what a `select` spec re-runs, before the merge
        lines.append(f"- {escape(item.selection.text())}")
    if item.reason:
        lines.append(f"- {'error: ' if item.error else ''}{escape(item.reason)}")
    return "\n".join([*lines, "", "</details>", ""])


def _show(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(map(_show, value))
    return str(value)


def _rest(plan: Plan, changed: set[str], findings: int) -> str:
    rest = Counter(item.kind for item in plan.items if item.spec not in changed)
    parts = ", ".join(f"{rest[kind]} {words}" for kind, words in REST_WORDS.items() if rest[kind])
    line = f"Other specs ({sum(rest.values())}): {parts}" if parts else "No other specs"
    if findings:
        line += f"; {findings} other finding{'' if findings == 1 else 's'}"
    return line + ". Run `backfillctl plan` for the full plan."


def _fit(head: list[str], units: list[str], tail: list[str], limit: int) -> str:
    """Head, as many units as fit in order, a note on what was cut, and the tail (the summary) always."""
    full = "\n".join([*head, *units, *tail])
    if len(full) <= limit:
        return full
    rows = sum(1 for unit in units if unit.startswith("| "))
    kept: list[str] = []
    for unit in units:
        if len(_joined(head, [*kept, unit], _cut_note([*kept, unit], rows), tail)) > limit:
            break
        kept.append(unit)
    return _joined(head, kept, _cut_note(kept, rows), tail)


def _joined(head: list[str], kept: list[str], note: str, tail: list[str]) -> str:
    gap = [] if kept and kept[-1].endswith("\n") else [""]  # a details block already ends with a blank line
    return "\n".join([*head, *kept, *gap, note, *tail])


def _cut_note(kept: list[str], rows: int) -> str:
    shown = sum(1 for unit in kept if unit.startswith("| "))
    details = sum(1 for unit in kept if unit.startswith("<details>"))
    return (
        f"_Cut to fit GitHub's {LIMIT:,}-character comment limit: the table shows {shown} of {rows} changed "
        f"specs, {details} with details. Run `backfillctl plan` for the full plan._"
    )
