"""The evidence of a merged change (pure): one forge-neutral document per change that reached the branch
(`schemas/evidence.schema.json`, read by `commands/reconcile/evidence.py`), as typed values.

A change is a pull request (GitHub's word; a merge request elsewhere) merged by any method: `base_sha` is the
branch's commit it landed on, `head_sha` the commit its reviewers saw last, `merge_sha` the commit on the branch
that carries it (the merge commit, the squash commit, or the last rebased commit). `change: None` says the commit
reached the branch without one (a direct push). The reviews are what the forge recorded, each with the commit it
reviewed and the reviewer's permission on the repository.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from controller.core.model.binding import Approval

EVIDENCE_VERSION = 1


class MergeMethod(StrEnum):
    MERGE = "merge"
    SQUASH = "squash"
    REBASE = "rebase"


class ReviewState(StrEnum):
    APPROVED = "approved"
    CHANGES_REQUESTED = "changes_requested"
    COMMENTED = "commented"
    DISMISSED = "dismissed"


@dataclass(frozen=True, slots=True)
class ForgeReview:
    """One review of the change, as the forge recorded it."""

    review_id: int | None
    reviewer: str
    state: ReviewState
    commit: str  # the commit the review was made on ("": not known)
    permission: str | None  # the reviewer's permission on the repository (admin, maintain, write, …; None: unknown)
    submitted_at: str
    association: str = ""  # GitHub's author_association (the deprecated reviews file only: OWNER counts)


@dataclass(frozen=True, slots=True)
class MergedChange:
    number: int
    url: str
    author: str
    base_sha: str  # the branch's commit the change landed on ("": none, a root commit)
    head_sha: str | None  # the commit the reviews must approve (None: not known, the deprecated flags)
    merge_sha: str  # the branch's commit that carries it
    merge_method: MergeMethod | None = None


@dataclass(frozen=True, slots=True)
class Evidence:
    """One evidence document: the change behind `commit` (None: a direct push), and its reviews."""

    forge: str
    commit: str  # the branch's commit the document speaks of (a change's merge_sha)
    change: MergedChange | None
    reviews: tuple[ForgeReview, ...] = ()
    source: str = ""  # where it was read (shown in errors and in the change record's words)
    # what the forge says of the change's commits when they are not in the clone (a squash's head, fetched by the
    # watch process's provider, `commands/loop/forge.py`): repository-relative path → the e-mails of the authors of its
    # commits that touched it, merges left out (None: read from git, as a document's always is)
    authors: Mapping[str, tuple[str, ...]] | None = None


class Verdict(StrEnum):
    """What the approval gate decided of a spec or policy file's version (`core/plan/provenance.py`)."""

    APPROVED = "approved"  # its change's approvals are there: it may start work (who approved is recorded)
    REFUSED = "refused"  # its change's approvals are not there: refused until the file changes or evidence comes
    UNREVIEWED = "unreviewed"  # no reviewed pull request behind it where one is required: refused until evidence
    HELD = "held"  # its evidence could not be fetched: held, decided again next pass
    PUSHED = "pushed"  # pushed without a pull request where none is required: goes on, flagged (never stored)

    @property
    def blocks(self) -> bool:
        """A start of the file's spec is refused or held."""
        return self in (Verdict.REFUSED, Verdict.UNREVIEWED, Verdict.HELD)


WAITING = frozenset({Verdict.HELD, Verdict.UNREVIEWED})  # a change that waits on evidence (`evidence needed`)


@dataclass(frozen=True, slots=True)
class GateDecision:
    """The gate's decision for one version (`blob`) of a file (`path`, repository-relative), as the store keeps it
    (one per path): kept while the file is unchanged; a held one is decided again every pass."""

    path: str
    blob: str
    verdict: Verdict
    reason: str = ""  # what a refused or held start says
    approval: Approval | None = None  # an approved change's evidence: who approved, where
    policy_blob: str = ""  # the blob of the policy the gate judged it by ("": none, the default policy)
    commit: str | None = None  # the branch's commit that carried it, when known
    direct: bool = False  # that commit reached the branch without a pull request (said once, never stored)
