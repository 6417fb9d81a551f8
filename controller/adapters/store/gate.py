"""The approval gate's decisions (table `gate_decisions`): per spec or policy file version (path, blob, and the blob
of the policy that judged it), what the gate decided: approved with the evidence that counted (the change, its
SHAs, the reviews), refused, unreviewed or held. A decision is kept while its file is unchanged, so that a change
is never let through because the pass that saw it is over; a file that changed or was deleted forgets it.
"""

from __future__ import annotations

import logging
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from sqlalchemy import ColumnElement, delete, insert, select, true

from controller.adapters.store.database import Clock, Database, batches, stamp
from controller.adapters.store.tables import gate_decisions
from controller.core.model.binding import Approval
from controller.core.model.evidence import GateDecision, Verdict

log = logging.getLogger(__name__)
STORED = frozenset({Verdict.APPROVED, Verdict.REFUSED, Verdict.UNREVIEWED, Verdict.HELD})


class GateDecisions:
    def __init__(self, db: Database, clock: Clock) -> None:
        self._db, self._clock = db, clock

    def all(
        self, paths: Collection[str] | None = None, verdicts: Collection[Verdict] = STORED
    ) -> dict[str, GateDecision]:
        """Path → the decision kept for it, of `paths` only when given, with one of `verdicts` (a row that cannot be
        read back is no decision: decided again)."""
        query = select(gate_decisions).order_by(gate_decisions.c.decided_at)
        if verdicts != STORED:
            query = query.where(gate_decisions.c.verdict.in_(sorted(v.value for v in verdicts)))
        with self._db.tx("reading the approval gate's decisions") as conn:
            rows = [row for where in _among(paths) for row in conn.execute(query.where(where)).mappings().all()]
        found: dict[str, GateDecision] = {}
        for row in rows:
            decision = _decision(dict(row))
            if decision is not None:
                found[decision.path] = decision
        return found

    def save(
        self, decisions: Iterable[GateDecision], present: Mapping[str, str], scope: Collection[str] | None = None
    ) -> None:
        """Keep `decisions` (one per path, replacing what was kept for it), and forget every path that is not
        `present` (path → its blob now) or whose blob changed, in one transaction; with `scope`, only among those
        paths (the rest were not read: a pass over a rest summary at the tree of the folder the last reconciled pass
        forgot by, `commands/reconcile/gate.py`)."""
        now = stamp(self._clock())
        kept = [d for d in decisions if d.verdict in STORED]
        table = gate_decisions.c
        with self._db.tx("saving the approval gate's decisions") as conn:
            query = select(table.path, table.blob_id)
            stored = [row for where in _among(scope) for row in conn.execute(query.where(where)).all()]
            gone = {path for path, blob in stored if present.get(path) != blob} | {d.path for d in kept}
            for path in sorted(gone):
                conn.execute(delete(gate_decisions).where(table.path == path))
            if kept:
                conn.execute(insert(gate_decisions), [_row(d, now) for d in kept])


def _among(paths: Collection[str] | None) -> list[ColumnElement[bool]]:
    """The filters that read the rows of `paths` (every row: None), `batches` of them a query."""
    return [true()] if paths is None else [gate_decisions.c.path.in_(batch) for batch in batches(sorted(paths))]


def _row(decision: GateDecision, now: str) -> dict[str, Any]:
    return {
        "path": decision.path,
        "blob_id": decision.blob,
        "policy_blob": decision.policy_blob,
        "verdict": decision.verdict.value,
        "approval": None if decision.approval is None else decision.approval.as_json(),
        "reason": decision.reason,
        "git_commit": decision.commit,
        "decided_at": now,
    }


def _decision(row: Mapping[str, Any]) -> GateDecision | None:
    try:
        return GateDecision(
            row["path"],
            row["blob_id"],
            Verdict(row["verdict"]),
            row["reason"],
            Approval.from_json(row["approval"]),
            row["policy_blob"],
            row["git_commit"],
        )
    except (ValueError, KeyError, TypeError) as exc:  # a row another release wrote: decided again, never trusted
        log.warning("ignoring the approval gate's decision for %s: %s", row.get("path"), exc)
        return None
