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


def test_a_read_or_a_save_scoped_to_paths_reads_and_forgets_only_those(store_url: str) -> None:
    """A pass over a rest summary names its paths: the other decisions are neither read nor forgotten (600 named
    paths: more than one query's batch)."""
    refused = GateDecision("specs/d.yaml", "4" * 40, Verdict.REFUSED, "approval gate at reconcile: no")
    unreviewed = GateDecision("specs/e.yaml", "5" * 40, Verdict.UNREVIEWED, "no reviewed pull request", commit="e" * 40)
    with Store(store_url, clock=lambda: T) as store:
        decisions = [APPROVED, HELD, refused, unreviewed]
        store.save_gate_decisions(decisions, {d.path: d.blob for d in decisions})
        named = [f"specs/x-{n:03d}.yaml" for n in range(598)] + ["specs/b.yaml", "specs/e.yaml"]
        assert store.gate_decisions(named) == {"specs/b.yaml": HELD, "specs/e.yaml": unreviewed}
        assert store.gate_decisions([]) == {}
        assert store.waiting_gate_decisions() == {"specs/b.yaml": HELD, "specs/e.yaml": unreviewed}
        store.save_gate_decisions([], {}, scope=["specs/b.yaml"])  # b gone; the others are not in scope
        assert store.gate_decisions() == {"specs/a.yaml": APPROVED, "specs/d.yaml": refused, "specs/e.yaml": unreviewed}
        store.save_gate_decisions([], {"specs/a.yaml": "1" * 40}, scope=[])  # nothing in scope: nothing forgotten
        assert len(store.gate_decisions()) == 3
        store.save_gate_decisions([], {"specs/a.yaml": "1" * 40})  # no scope: every path not present is forgotten
        assert store.gate_decisions() == {"specs/a.yaml": APPROVED}


def test_what_waits_on_evidence_is_the_newest_row_of_a_path(store_url: str) -> None:
    """Two rows of one path (written by hand, or by another release): the newest decides, as the gate reads them, so
    an older held row behind a newer approval waits on nothing."""
    later = datetime(2026, 11, 29, 13, tzinfo=UTC)
    with Store(store_url, clock=lambda: T) as store:
        store.save_gate_decisions([HELD], {HELD.path: HELD.blob})
        approved = {"path": HELD.path, "blob_id": "9" * 40, "policy_blob": "", "verdict": "approved", "reason": ""}
        with store.engine.begin() as conn:
            conn.execute(insert(gate_decisions).values(**approved, decided_at=later.strftime("%Y-%m-%dT%H:%M:%S.%fZ")))
        assert store.gate_decisions()[HELD.path].verdict is Verdict.APPROVED
        assert store.waiting_gate_decisions() == {}
