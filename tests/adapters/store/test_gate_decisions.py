"""The approval gate's decisions on SQLite and PostgreSQL: one per file path, with the evidence that counted;
kept while the file is unchanged, forgotten when it changes or is deleted; a held pass-only verdict (pushed) is
never kept; a row another release wrote is read as no decision."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import insert, select

from controller.adapters.store import Store
from controller.adapters.store.tables import gate_decisions
from controller.core.model.binding import Approval, ApprovedReview
from controller.core.model.evidence import GateDecision, Verdict

T = datetime(2026, 11, 29, 12, tzinfo=UTC)
APPROVAL = Approval(
    41,
    "m" * 40,
    (ApprovedReview("bob", 9001, "h" * 40, "2026-11-01T10:00:00Z"),),
    "https://x/41",
    "b" * 40,
    "h" * 40,
    "p" * 40,
)
APPROVED = GateDecision("specs/a.yaml", "1" * 40, Verdict.APPROVED, "", APPROVAL, "p" * 40, "m" * 40)
HELD = GateDecision("specs/b.yaml", "2" * 40, Verdict.HELD, "held: outage", commit="c" * 40)
PUSHED = GateDecision("specs/c.yaml", "3" * 40, Verdict.PUSHED, "pushed", direct=True)


def test_decisions_are_kept_per_path_and_forgotten_when_the_file_changes_or_goes(store_url: str) -> None:
    with Store(store_url, clock=lambda: T) as store:
        assert store.gate_decisions() == {}
        present = {"specs/a.yaml": "1" * 40, "specs/b.yaml": "2" * 40, "specs/c.yaml": "3" * 40}
        store.save_gate_decisions([APPROVED, HELD, PUSHED], present)
        assert store.gate_decisions() == {"specs/a.yaml": APPROVED, "specs/b.yaml": HELD}  # pushed: said, not kept
        refused = GateDecision("specs/b.yaml", "2" * 40, Verdict.REFUSED, "approval gate at reconcile: no")
        store.save_gate_decisions([refused], present)  # decided again: replaces what was kept for the path
        assert store.gate_decisions() == {"specs/a.yaml": APPROVED, "specs/b.yaml": refused}
        store.save_gate_decisions([], {"specs/a.yaml": "9" * 40, "specs/b.yaml": "2" * 40})  # a changed
        assert store.gate_decisions() == {"specs/b.yaml": refused}
        store.save_gate_decisions([], {})  # b deleted
        assert store.gate_decisions() == {}


def test_a_row_another_release_wrote_is_no_decision(store_url: str) -> None:
    with Store(store_url, clock=lambda: T) as store:
        store.save_gate_decisions([APPROVED], {"specs/a.yaml": "1" * 40})
        with store.engine.begin() as conn:
            row = {"path": "specs/x.yaml", "blob_id": "4" * 40, "policy_blob": "", "verdict": "waived", "reason": ""}
            conn.execute(insert(gate_decisions).values(**row, decided_at="2026-11-29T12:00:00.000000Z"))
        assert store.gate_decisions() == {"specs/a.yaml": APPROVED}
        with store.engine.connect() as conn:
            assert conn.execute(
                select(gate_decisions.c.approval).where(gate_decisions.c.path == "specs/a.yaml")
            ).scalar() == (APPROVAL.as_json())
