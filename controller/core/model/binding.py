"""What the store remembers of a spec (pure): the backfills it owns, its phase and last observed runs.

A spec owns an ordered list of backfills (one, or a chunked spec's chunks: see `core/model/chunks.py`). The store maps
its rows to these values and back in one place; nothing above it sees a row.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from controller.core.model.airflow import RunSummary
from controller.core.model.chunks import Progress
from controller.core.model.coverage import Coverage
from controller.core.model.guards import Guard
from controller.core.model.ranges import DateRange, expand, ranges_from_json, ranges_json
from controller.core.model.spec import DesiredState


class Phase(StrEnum):
    PENDING = "Pending"
    QUEUED = "Queued"
    RUNNING = "Running"
    PAUSED = "Paused"
    SUCCEEDED = "Succeeded"
    COMPLETED_WITH_FAILURES = "CompletedWithFailures"
    CANCELLED = "Cancelled"
    BLOCKED = "Blocked"
    ORPHANED = "Orphaned"
    AWAITING_PROMOTION = "AwaitingPromotion"  # a chunked spec's canary chunk finished; waits for `promote: true`
    HALTED = "Halted"  # too many of a chunked spec's runs failed; waits for a new `resume` value
    AWAITING_REHEARSAL = "AwaitingRehearsal"  # production waits for a rehearsal with the current key to succeed
    VERIFICATION_FAILED = "VerificationFailed"  # every run succeeded, the final verification did not

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


# the phases a spec ends in; a set, as a pass asks this of every spec several times (10,000 finished: ~90,000)
TERMINAL = frozenset({Phase.SUCCEEDED, Phase.COMPLETED_WITH_FAILURES, Phase.CANCELLED, Phase.VERIFICATION_FAILED})


@dataclass(frozen=True, slots=True)
class CreateFacts:
    """What the dry run said when the spec's backfill was created (kept for the change record)."""

    runs_to_create: int | None = None
    runs_in_range: int | None = None
    first_date: datetime | None = None
    last_date: datetime | None = None
    first_partition: str | None = None
    last_partition: str | None = None
    dates: tuple[DateRange, ...] | None = None  # the dates the backfill made or re-ran (None: not known)
    whole: bool | None = None  # an adopted backfill's runs were all the backfill runs of its range

    @property
    def own_dates(self) -> list[datetime] | None:
        return None if self.dates is None else expand(self.dates)

    @property
    def run_count(self) -> int | None:
        """How many runs the recorded dates are (None: not recorded)."""
        return None if self.dates is None else sum(r.count for r in self.dates)

    @property
    def whole_range(self) -> bool:
        """The recorded dates are every backfill run of the range: the range's state counts are the spec's own."""
        if self.dates is None:
            return False
        return bool(self.whole) or (self.runs_to_create is not None and self.runs_to_create == self.runs_in_range)

    def as_json(self) -> dict[str, Any]:
        own = {} if self.dates is None else {"dates": ranges_json(self.dates), "dates_whole": self.whole}
        return own | {
            "runs_to_create": self.runs_to_create,
            "runs_in_range": self.runs_in_range,
            "first_date": None if self.first_date is None else self.first_date.isoformat(),
            "last_date": None if self.last_date is None else self.last_date.isoformat(),
            "first_partition": self.first_partition,
            "last_partition": self.last_partition,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> CreateFacts | None:
        if data.get("runs_to_create") is None and data.get("runs_in_range") is None and data.get("dates") is None:
            return None
        return cls(
            data.get("runs_to_create"),
            data.get("runs_in_range"),
            _time(data.get("first_date")),
            _time(data.get("last_date")),
            data.get("first_partition"),
            data.get("last_partition"),
            ranges_from_json(data.get("dates")),
            data.get("dates_whole"),
        )


def _time(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


@dataclass(frozen=True, slots=True)
class ApprovedReview:
    login: str
    review_id: int | None
    commit_id: str
    submitted_at: str  # GitHub's time of the review, as it gave it

    def text(self, pr_number: int) -> str:
        review = f"review {self.review_id}" if self.review_id is not None else "review id unknown"
        return f"{self.login} in #{pr_number} ({review}, {_minutes(self.submitted_at)})"


@dataclass(frozen=True, slots=True)
class Ahead:
    """A queued, never-applied spec version's dry run, made ahead of its turn once a version by reconcile and kept,
    so `status` and the status page judge it against the policy of the moment without a dry run of their own."""

    digest: str  # the spec version dry-run
    at: str  # when (UTC, RFC 3339)
    runs_to_create: int | None = None  # for a `select` spec, the selected intervals (None: its selection unknown)
    runs_in_range: int | None = None
    sub_ranges: int | None = None  # a `select` spec's backfills (its contiguous sub-ranges); None without select
    failed: str = ""  # why its dry run failed ("": it did not): tried again after a while, not every pass
    mergeable: int | None = None  # a `select` spec's sub-ranges `merge_sub_ranges` could join (None: without select)

    def as_json(self) -> dict[str, Any]:
        return (
            {
                "digest": self.digest,
                "at": self.at,
                "runs_to_create": self.runs_to_create,
                "runs_in_range": self.runs_in_range,
                "sub_ranges": self.sub_ranges,
            }
            | ({"failed": self.failed} if self.failed else {})
            | ({"mergeable": self.mergeable} if self.mergeable is not None else {})
        )

    @classmethod
    def from_json(cls, data: Any) -> Ahead | None:
        """None for what this release cannot read: the spec version is then dry-run again, as if never judged."""
        if not isinstance(data, Mapping) or not all(isinstance(data.get(k), str) for k in ("digest", "at")):
            return None
        counts = [data.get(k) for k in ("runs_to_create", "runs_in_range", "sub_ranges", "mergeable")]
        if not all(v is None or (isinstance(v, int) and not isinstance(v, bool)) for v in counts):
            return None
        failed = data.get("failed", "")
        if not isinstance(failed, str):
            return None
        to_create, in_range, sub_ranges, mergeable = counts
        return cls(data["digest"], data["at"], to_create, in_range, sub_ranges, failed, mergeable)


@dataclass(frozen=True, slots=True)
class Approval:
    """Who approved a spec's pull request: the evidence the gate counted, kept with the create. A record made from
    an evidence document also names the change (its URL, base and head), and the policy the gate judged it by."""

    pr_number: int
    merged_commit: str | None  # the branch's commit that carries the change (the merge, squash or last rebased one)
    reviews: tuple[ApprovedReview, ...]
    url: str = ""  # the change's web address ("": not known)
    base_sha: str | None = None  # the branch's commit it landed on
    head_sha: str | None = None  # the commit the approvals are on (None: not checked, the deprecated flags)
    policy_blob: str | None = None  # the git blob of the base's policy the gate applied ("": none, the default)

    def text(self) -> str:
        return ", ".join(r.text(self.pr_number) for r in self.reviews)

    def change_text(self) -> str:
        """`#41 <url>: base 1a2b3c4d5e6f, head …, merged as …; policy blob …` (what only an evidence record knows)."""
        shas = [
            f"{what} {sha[:12]}"
            for what, sha in (("base", self.base_sha), ("head", self.head_sha), ("merged as", self.merged_commit))
            if sha
        ]
        where = f" {self.url}" if self.url else ""
        policy = "" if self.policy_blob is None else f"; policy {self.policy_blob[:12] or 'none (the default)'}"
        return f"#{self.pr_number}{where}: {', '.join(shas) or 'commits not recorded'}{policy}"

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "pr_number": self.pr_number,
            "merged_commit": self.merged_commit,
            "reviews": [
                {"login": r.login, "review_id": r.review_id, "commit_id": r.commit_id, "submitted_at": r.submitted_at}
                for r in self.reviews
            ],
        }
        extra = {"url": self.url or None, "base_sha": self.base_sha, "head_sha": self.head_sha}
        extra["policy_blob"] = self.policy_blob
        return data | {k: v for k, v in extra.items() if v is not None}  # an older record's shape, when unknown

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Approval | None:
        if not data:
            return None
        reviews = tuple(
            ApprovedReview(r["login"], r.get("review_id"), r.get("commit_id", ""), r.get("submitted_at", ""))
            for r in data.get("reviews", ())
        )
        return cls(
            int(data["pr_number"]),
            data.get("merged_commit"),
            reviews,
            data.get("url") or "",
            data.get("base_sha"),
            data.get("head_sha"),
            data.get("policy_blob"),
        )


def _minutes(moment: str) -> str:
    """`2026-11-01T10:00:00Z` as `2026-11-01T10:00Z` (the change record's precision); anything else as given."""
    if len(moment) == 20 and moment[10] == "T" and moment.endswith("Z"):
        return moment[:16] + "Z"
    return moment or "time unknown"


@dataclass(frozen=True, slots=True)
class Applied:
    """What a spec asked when it was first applied (its first backfill created or adopted, or its outcome first
    recorded): the create-time fields (`BackfillSpec.identity`), the commit that applied them and whether the spec
    was chunked then. Every pass compares the spec file with it: an edit in place is never "in sync"."""

    identity: Mapping[str, Any]
    commit: str | None = None
    chunked: bool = False
    derived: str = ""  # how a store from before this record learned it ("" when recorded at apply time)

    def as_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {"identity": dict(self.identity), "commit": self.commit, "chunked": self.chunked}
        return data | ({"derived": self.derived} if self.derived else {})

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> Applied | None:
        if not data or not isinstance(data.get("identity"), Mapping):
            return None
        return cls(dict(data["identity"]), data.get("commit"), bool(data.get("chunked")), data.get("derived") or "")


@dataclass(frozen=True, slots=True)
class NotesMark:
    """How far the runs of a backfill carry their Airflow run note (the policy's `airflow_notes`): every date of
    `backfill_id` up to `through` is noted; another backfill (a restart, the next chunk) starts again."""

    backfill_id: int
    through: datetime

    def as_json(self) -> dict[str, Any]:
        return {"backfill_id": self.backfill_id, "through": self.through.isoformat()}

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> NotesMark | None:
        through = _time(data.get("through")) if data else None
        if data is None or through is None:
            return None
        return cls(int(data["backfill_id"]), through)


def is_applied(backfill_id: int | None, chunked: bool, phase: Phase) -> bool:
    """A spec is applied once it has a backfill (or chunks), or its outcome was recorded from a dry run of nothing
    to do."""
    return backfill_id is not None or chunked or phase is Phase.SUCCEEDED


@dataclass(frozen=True, slots=True)
class BindingHead:
    """What a pass reads of every binding before it knows which specs rest (`Store.binding_heads`): the whole
    binding is read only for the specs it plans (10,000 finished ones cost 0.24 s read whole)."""

    spec_name: str
    dag_id: str
    phase: Phase
    spec_digest: str = ""
    applied: bool = False  # `is_applied`


@dataclass(frozen=True, slots=True)
class Claim:
    """What a binding claims on its DAG, all the walk over the DAG's queue needs of a finished spec at rest
    (`Store.claims`): its backfills (never another spec's to adopt; a listed one is the queue's own) and its drain
    (the DAG paused when the drain ended)."""

    spec_name: str
    dag_id: str
    backfill_id: int | None  # its current backfill
    owned: tuple[int, ...] = ()  # every backfill it owned, its chunks and current one included, in order
    drained: bool = False  # it was applied with drain_dag

    @classmethod
    def of(
        cls, spec_name: str, dag_id: str, backfill_id: int | None, owned: Iterable[int | None], drained: bool
    ) -> Claim:
        """`owned` in order, each once, None left out (the current backfill is appended when it is new)."""
        ids = tuple(i for i in dict.fromkeys((*owned, backfill_id)) if i is not None)
        return cls(spec_name, dag_id, backfill_id, ids, drained)


@dataclass(frozen=True, slots=True)
class Binding:
    spec_name: str
    dag_id: str
    backfill_id: int | None  # the spec's current backfill (the last of `backfills`)
    phase: Phase
    applied_state: DesiredState = DesiredState.ACTIVE
    spec_digest: str = ""
    reason: str = ""
    runs: RunSummary | None = None  # last observed
    created: CreateFacts | None = None
    backfills: tuple[int, ...] = ()  # every backfill the spec has owned, in order
    git_commit: str | None = None
    airflow_url: str = ""
    updated_at: str | None = None  # when the store last saved it (set by the store)
    guard: Guard | None = None  # the guard whose pause holds the backfill now (None when no guard paused it)
    progress: Progress | None = None  # a chunked spec's chunks, canary and halt state
    refused: bool = False  # reconcile refused its create (exit 5) when it last recorded the spec
    approval_refused: bool = False  # that refusal was the approval gate's: it holds until the spec changes
    approval: Approval | None = None  # who approved its pull request, as reconcile checked it (None: not recorded)
    applied: Applied | None = None  # what it asked when first applied (None: not applied yet)
    noted: NotesMark | None = None  # how far its backfill's runs carry the run note (None: none yet)
    coverage: Coverage | None = None  # version coverage measured when it ended (None: not measured)
    ahead: Ahead | None = None  # a queued spec version's look-ahead, as reconcile recorded it (None: not judged)

    def head(self) -> BindingHead:
        chunked = self.progress is not None and bool(self.progress.chunks)
        applied = is_applied(self.backfill_id, chunked, self.phase)
        return BindingHead(self.spec_name, self.dag_id, self.phase, self.spec_digest, applied)

    def claim(self) -> Claim:
        chunks = self.progress.ids if self.progress is not None else ()
        drained = self.applied is not None and bool(self.applied.identity.get("drain_dag"))
        return Claim.of(self.spec_name, self.dag_id, self.backfill_id, (*self.backfills, *chunks), drained)

    def owning(self, backfill_id: int | None) -> tuple[int, ...]:
        """`backfills` with `backfill_id` appended when it is new."""
        if backfill_id is None or backfill_id in self.backfills:
            return self.backfills
        return (*self.backfills, backfill_id)
