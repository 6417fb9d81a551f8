"""The result of a reconcile for the pull requests that caused it: what was created, refused, queued or blocked,
with links to Airflow's UI, as a JSON document (`result.json`) and one Markdown comment per pull request.

The reconcile job writes them (`reconcile --result-dir DIR`); the reusable workflow's `pr-result` job, which holds
no production secret, posts each comment on its merged pull request, edited in place under one marker, and only
when it changed: a comment holds no time or commit, so an unchanged state is the same text.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from controller.core.audit.vocabulary import Outcome
from controller.core.documents.escaping import md_code, md_text
from controller.core.model.binding import Phase
from controller.core.plan.values import Item, Kind, Plan
from controller.core.render.links import backfill_link

RESULT_FORMAT_VERSION = 1
MARKER = "<!-- backfillctl-reconcile-result -->"  # the comment the job edits in place


class Told(StrEnum):
    """What this reconcile did with a spec, as the pull request is told."""

    CREATED = "created"
    REFUSED = "refused"
    QUEUED = "queued"
    BLOCKED = "blocked"


@dataclass(frozen=True, slots=True)
class ResultEntry:
    spec: str
    dag_id: str
    outcome: Told
    phase: str
    backfill_id: int | None
    link: str | None
    reason: str
    change: int | None  # the pull request that carried the spec (None: not recorded: told to this run's changes)

    def as_json(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "dag_id": self.dag_id,
            "result": self.outcome.value,
            "phase": self.phase,
            "backfill_id": self.backfill_id,
            "link": self.link,
            "reason": self.reason,
            "change": self.change,
        }


def _outcome(item: Item, created: frozenset[str]) -> Told | None:
    if item.spec in created:
        return Told.CREATED
    if item.kind is Kind.REFUSE or item.approval_refused:
        return Told.REFUSED
    if item.phase is Phase.QUEUED:
        return Told.QUEUED
    if item.phase is Phase.BLOCKED:
        return Told.BLOCKED
    return None


def result_entries(
    current: Plan, applied: Sequence[tuple[Item, str]], changes: Mapping[str, int | None], base: str | None
) -> list[ResultEntry]:
    """The specs this pass created (`applied` creates done), refused, queued or blocked, as `current` shows them;
    `changes`: the pull request of each spec where the store knows it; `base`: Airflow's UI address."""
    created = frozenset(i.spec for i, outcome in applied if outcome == Outcome.CREATED)
    entries = []
    for item in current.items:
        outcome = _outcome(item, created)
        if outcome is None:
            continue
        link = backfill_link(base, None, item.dag_id, item.backfill_id) if item.backfill_id is not None else None
        phase = item.phase.value
        entries.append(
            ResultEntry(
                item.spec, item.dag_id, outcome, phase, item.backfill_id, link, item.reason, changes.get(item.spec)
            )
        )
    return entries


def result_json(commit: str | None, changes: Sequence[int], entries: Sequence[ResultEntry]) -> dict[str, Any]:
    return {
        "format_version": RESULT_FORMAT_VERSION,
        "commit": commit,
        "changes": sorted(changes),
        "results": [e.as_json() for e in entries],
    }


def pr_comments(entries: Sequence[ResultEntry], changes: Sequence[int]) -> dict[int, str]:
    """Pull request number → its comment: the entries of the specs it carried, and those whose change is not
    recorded to each change this run reconciled. A pull request with nothing to say gets no comment."""
    told: dict[int, list[ResultEntry]] = {}
    for entry in entries:
        for number in [entry.change] if entry.change is not None else changes:
            told.setdefault(number, []).append(entry)
    return {number: _comment(found) for number, found in sorted(told.items())}


def _comment(entries: Sequence[ResultEntry]) -> str:
    lines = [
        MARKER,
        "### backfillctl reconcile: the result of this change",
        "",
        "| Spec | Result | Phase | Backfill | Why |",
        "|---|---|---|---|---|",
    ]
    for e in entries:
        backfill = f"#{e.backfill_id}" if e.backfill_id is not None else "—"
        shown = f"[{backfill}]({e.link})" if e.link else backfill
        lines.append(f"| {md_code(e.spec)} | {e.outcome.value} | {e.phase} | {shown} | {md_text(e.reason) or '—'} |")
    lines += ["", "Edited in place as the state changes; `backfillctl status` and the change record say more."]
    return "\n".join(lines) + "\n"
