"""The pull request's sticky plan comment, from the plan's JSON and the files the PR changes (pure).

What the PR adds or changes comes first, one table row per spec with its ticket and reason, then one
line for the rest of the plan. Everything that came from a spec file or from Airflow is escaped, so a
reason cannot break the table, open HTML or close a code span. The comment never exceeds GitHub's
65,536-character limit: when it would, whole rows and sections are left out, a note says how many, and
the summary line is kept.
"""

from __future__ import annotations

import html
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from controller.core.documents.escaping import md_code as code
from controller.core.documents.escaping import md_text as escape
from controller.core.plan.values import PLAN_FORMAT_VERSION
from controller.core.render.plan import summary_text
from controller.errors import ConfigError

MARKER = "<!-- backfillctl-plan -->"
LIMIT = 65_536  # GitHub's maximum comment body, in characters
REASON_CELL = 200  # characters of a spec's reason shown in the table (the full text is in the details)
SYMBOLS = {
    "create": "+",
    "adopt": "~",
    "pause": "~",
    "unpause": "~",
    "cancel": "-",
    "noop": "=",
    "wait": "…",
    "refuse": "!",
    "blocked": "!",
    "dry-run": "?",
}
LABELS = {"noop": "in sync", "wait": "queued", "refuse": "refused", "dry-run": "dry run"}
SPEC_SUFFIXES = (".yaml", ".yml")
POLICY_STEM = "policy"
INCOMPLETE = "observation-incomplete"  # the finding kind of a DAG that could not be observed


@dataclass(frozen=True, slots=True)
class SpecNote:
    """What a reviewer needs beside the plan: the spec's ticket and reason (they are in the spec file)."""

    ticket: str
    reason: str


def cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def label(action: str) -> str:
    return LABELS.get(action, action)


def pr_comment(
    plan: Mapping[str, Any],
    changed_paths: Sequence[str],
    notes: Mapping[str, SpecNote],
    limit: int = LIMIT,
) -> str:
    """The comment body (starting with MARKER) for `plan` (`backfillctl plan --format json`).

    `changed_paths` are the files the PR changes below specs/ (`git diff --name-only`), `notes` the
    ticket and reason of the PR's specs by name.
    """
    if plan.get("format_version") != PLAN_FORMAT_VERSION:
        raise ConfigError(
            f"unsupported plan format_version {plan.get('format_version')!r} (this backfillctl reads "
            f"{PLAN_FORMAT_VERSION})",
            hint="render the comment with the backfillctl that made the plan",
        )
    items = {item["spec"]: item for item in plan["items"]}
    names, policy, other = _classify(changed_paths)
    planned = [items[name] for name in names if name in items]
    missing = [name for name in names if name not in items]
    head = [MARKER, "### backfillctl plan", "", *_refused([item for item in planned if item["action"] == "refuse"])]
    if plan.get("complete") is False:
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
        units += [_row(item, notes.get(item["spec"])) for item in planned]
        units += [""] + [_details(item, notes.get(item["spec"])) for item in planned]
    elif not missing and not policy:
        head += ["This pull request changes no spec."]
    units += [
        f"- {code(name)}: not in the plan: the file was deleted or moved. Deleting a spec never cancels "
        "its backfill: an unfinished one is reported as orphaned after the merge."
        for name in missing
    ]
    units += [f"- {code(path)}: the policy changes; it applies to every spec once merged." for path in policy]
    units += [f"- {code(path)}: changed, not a spec." for path in other]
    dags = {item["dag_id"] for item in planned}
    findings = [f for f in plan.get("findings", []) if f["dag_id"] in dags or f["kind"] == INCOMPLETE]
    if findings:
        units += ["", "**Findings**", ""]
        units += [f"- **{escape(f['kind'])}** on {code(f['dag_id'])}: {escape(f['message'])}" for f in findings]
    rest_findings = len(plan.get("findings", [])) - len(findings)
    tail = ["", _rest(plan, set(names), rest_findings), "", f"**{summary_text(plan['summary'])}**", ""]
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


def _refused(items: Sequence[Mapping[str, Any]]) -> list[str]:
    """The comment leads with what the merge would be refused: the check fails (exit 5) for these."""
    if not items:
        return []
    count = f"{len(items)} spec{'' if len(items) == 1 else 's'}"
    return [
        f"**Refused: after the merge, reconcile would refuse {count} this pull request adds or changes** "
        "(this check fails, exit 5):",
        "",
        *[f"- {code(item['spec'])}: {escape(item['reason'])}" for item in items],
        "",
        "Fix the spec (review the dry run's count and set `expected_runs` to it, or narrow the range) and push "
        "again; reconcile creates nothing for a refused spec.",
        "",
    ]


def _row(item: Mapping[str, Any], note: SpecNote | None) -> str:
    runs = "" if item.get("runs_to_create") is None else str(item["runs_to_create"])
    if runs and item.get("runs_in_range") is not None:
        runs += f" of {item['runs_in_range']}"
    action = item["action"]
    ticket = escape(note.ticket) if note else ""
    reason = escape(cut(" ".join(note.reason.split()), REASON_CELL)) if note else ""
    cells = [
        f"`{SYMBOLS.get(action, '?')}`",
        code(item["spec"]),
        code(item["dag_id"]),
        escape(label(action)),
        runs,
        escape(item["phase"]),
        ticket,
        reason,
    ]
    return "| " + " | ".join(cells) + " |"


def _details(item: Mapping[str, Any], note: SpecNote | None) -> str:
    title = f"<code>{html.escape(item['spec'])}</code>: {html.escape(label(item['action']))}"
    lines = [f"<details><summary>{title}</summary>", ""]
    if note:
        lines.append(f"- reason: {escape(note.reason)}")
    for key, value in sorted(item.get("facts", {}).items()):
        if key in ("request", "runs") or value is None:
            continue
        lines.append(f"- {code(key)}: {escape(_show(value))}")
    if item.get("first_date") and item.get("last_date"):
        lines.append(f"- first and last dates to run: {escape(item['first_date'])} … {escape(item['last_date'])}")
    if item.get("reason"):
        lines.append(f"- {'error: ' if item.get('error') else ''}{escape(item['reason'])}")
    return "\n".join([*lines, "", "</details>", ""])


def _show(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return ", ".join(map(_show, value))
    return str(value)


def _rest(plan: Mapping[str, Any], changed: set[str], findings: int) -> str:
    rest = Counter(label(item["action"]) for item in plan["items"] if item["spec"] not in changed)
    parts = ", ".join(f"{count} {what}" for what, count in sorted(rest.items()))
    line = f"Other specs: {sum(rest.values())}" + (f" ({parts})" if parts else "")
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
