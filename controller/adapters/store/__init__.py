"""The controller's own store (SQLAlchemy + Alembic): bindings, the hash-chained audit log, the lease.

SQLite by default, PostgreSQL in production; never Airflow's metadata database.  `Store` is the façade the
commands use; each part owns one concern and reads and writes through the database's one transaction
helper (`Database.tx`):

- `database`: the URL, the engine, transactions and the schema (migrations);
- `audit_log`: the hash-chained, optionally keyed audit log;
- `lease`: the reconcile lease and the thread that renews it;
- `bindings`: what the store remembers of each spec;
- `outbox`: the notifications queued with their audit records;
- `analysis`: each downstream system's metric analysis state between passes;
- `stats`: small read queries for metrics;
- `stops`: the emergency stops, and the fence every create or unpause intent runs;
- `stages`: each spec's rehearsal, verification and publish runs, keyed by what they prove;
- `spec_index`: finished spec files by git blob id, so that a pass does not read them again;
- `rest_summary` (and `revisions`): what a pass found at rest, so that the next one over the same tree reads only
  the live specs (`part_reads`: the reads a pass makes in parts);
- `reconciled`: each commit a pass reconciled, with its valid policy;
- `gate`: the approval gate's decision per spec or policy file version, with the evidence that counted;
- `history`: each Airflow's completed backfills per DAG and their watermark, so a create lists only new ones.

`Store(url, read_only=True)` never creates, migrates or writes; `Store(url, audit_key=…)` keys the chain (and
`previous_audit_keys` are the keys a rotation replaced, for verify and the next rotation).
Every `intent` append re-checks, in its own transaction, that this process still holds the lease it keeps
(a fence): a reconciler whose lease was taken away cannot record an intent, so it makes no further change; in the
same transaction a create or unpause intent is refused while an emergency stop holds its spec (`Stopped`, exit 5).
"""

from __future__ import annotations

import contextlib
from collections.abc import Collection, Iterator, Mapping, Sequence
from datetime import datetime

from sqlalchemy import Connection, Engine

from controller.adapters.store import stats
from controller.adapters.store.analysis import AnalysisStates
from controller.adapters.store.audit_log import AuditLog, EventFilter, FirstCreate
from controller.adapters.store.bindings import Bindings
from controller.adapters.store.database import (
    KNOWN_REVISIONS,
    MIGRATIONS,
    SCHEMA_HEAD,
    Clock,
    Database,
    NoDatabase,
    normalise_url,
    stamp,
    utcnow,
)
from controller.adapters.store.gate import GateDecisions
from controller.adapters.store.history import BackfillHistory
from controller.adapters.store.lease import Lease, LeaseLost, Leases
from controller.adapters.store.outbox import Outbox, OutboxRow
from controller.adapters.store.part_reads import PartReads
from controller.adapters.store.reconciled import Reconciled, ReconciledCommits, TeamScopes
from controller.adapters.store.rest_summary import RestKey, RestSummaries, RestSummary
from controller.adapters.store.spec_index import IndexedHead, IndexedSpec, SpecIndex
from controller.adapters.store.stages import Stages
from controller.adapters.store.stops import Stops
from controller.core.audit.chain import AuditEntry, AuditRecord, ChainLink, Unreadable, VerifyResult
from controller.core.audit.notify import Delivery, Notification
from controller.core.model.binding import Binding, BindingHead, Claim
from controller.core.model.evidence import WAITING, GateDecision
from controller.core.model.secret import Secret
from controller.core.model.stages import Stage, StageRecord
from controller.core.model.stops import EmergencyStop, EmergencyStopKind, StopHistory, StopSource
from controller.core.rules.analysis import AnalysisState

__all__ = [
    "KNOWN_REVISIONS",
    "MIGRATIONS",
    "SCHEMA_HEAD",
    "EventFilter",
    "FirstCreate",
    "IndexedHead",
    "IndexedSpec",
    "Lease",
    "LeaseLost",
    "NoStore",
    "OutboxRow",
    "Reconciled",
    "RestKey",
    "RestSummary",
    "Store",
    "normalise_url",
    "stamp",
]


class _GitMemory:
    """What the store remembers of the specs' git history: each reconciled commit (with its valid policy) and the
    approval gate's decision per file version."""

    _reconciled: ReconciledCommits
    _gate: GateDecisions
    _scopes: TeamScopes

    def last_reconciled(self) -> Reconciled | None:
        return self._reconciled.last()

    def last_valid_policy(self) -> str | None:
        return self._reconciled.last_policy()

    def record_reconciled(self, commit: str | None, policy_text: str | None) -> None:
        self._reconciled.record(commit, policy_text)

    def recorded_scopes(self) -> dict[str, str]:
        """Issue 44: each Airflow login's scope (JSON) this store reconciled with."""
        return self._scopes.all()

    def record_scope(self, login: str, scope: str) -> None:
        self._scopes.record(login, scope)

    def gate_decisions(self, paths: Collection[str] | None = None) -> dict[str, GateDecision]:
        """Path → the approval gate's decision kept for its file (of `paths` only, when given)."""
        return self._gate.all(paths)

    def waiting_gate_decisions(self) -> dict[str, GateDecision]:
        """Path → the decision kept for its file, where it waits on evidence (held, or unreviewed): of the paths
        with such a row, the newest row of each decides, as `gate_decisions` reads them."""
        newest = self._gate.all(paths=self._gate.all(verdicts=WAITING).keys())
        return {path: decision for path, decision in newest.items() if decision.verdict in WAITING}

    def save_gate_decisions(
        self, decisions: Sequence[GateDecision], present: Mapping[str, str], scope: Collection[str] | None = None
    ) -> None:
        """Keep `decisions`; forget the paths not `present` (path → blob at HEAD), or whose blob changed (of the
        paths in `scope` only, when given)."""
        self._gate.save(decisions, present, scope)


class Store(_GitMemory, PartReads):
    def __init__(
        self,
        url: str,
        *,
        clock: Clock = utcnow,
        migrate: bool = True,
        read_only: bool = False,
        audit_key: Secret | None = None,
        previous_audit_keys: Sequence[Secret] = (),
    ) -> None:
        self._open(Database(url, migrate=migrate, read_only=read_only), clock, audit_key, previous_audit_keys)

    def _open(self, db: Database, clock: Clock, key: Secret | None, previous: Sequence[Secret] = ()) -> None:
        self._db, self._clock = db, clock
        self._audit = AuditLog(db, key=key, clock=clock, previous_keys=previous)
        self._leases = Leases(db, clock)
        self._bindings = Bindings(db, clock)
        self._outbox = Outbox(db)
        self._analysis = AnalysisStates(db, clock)
        self._stops = Stops(db, clock)
        self._stages = Stages(db, clock)
        self._index = SpecIndex(db, clock)
        self._summaries = RestSummaries(db, clock)
        self._reconciled = ReconciledCommits(db, clock)
        self._scopes = TeamScopes(db, clock)
        self._gate = GateDecisions(db, clock)
        self._history = BackfillHistory(db, clock)

    @property
    def url(self) -> str:
        return self._db.url

    @property
    def read_only(self) -> bool:
        return self._db.read_only

    @property
    def safe_url(self) -> str:
        return self._db.safe_url

    @property
    def backfill_history(self) -> BackfillHistory:
        """Each Airflow's completed backfills per DAG, read once (`history`)."""
        return self._history

    @property
    def engine(self) -> Engine:
        return self._db.engine

    def close(self) -> None:
        self._leases.close()
        self._db.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    @contextlib.contextmanager
    def batch(self, what: str) -> Iterator[None]:
        """One transaction for this thread's writes until the block ends (all or none): for records that change
        nothing outside the store, never around an intent (committed before its call). One fsync, not one a write."""
        with self._db.batch(what):
            yield

    # --- schema ---------------------------------------------------------------------------------------

    def migrate(self) -> tuple[str | None, str]:
        """Upgrade to the newest schema (see `Database.migrate`): (the revision found, the head)."""
        return self._db.migrate()

    def check_current(self) -> str:
        return self._db.check_current()

    def revision(self) -> str | None:
        return self._db.revision()

    # --- audit ----------------------------------------------------------------------------------------

    def append(
        self, entry: AuditEntry, notifications: Sequence[Notification] = (), *, downstream: Sequence[str] = ()
    ) -> AuditRecord:
        """Append one event to the chain, with its outbox rows if any; an intent only under the kept lease, and a
        create or unpause intent only while no stop holds its spec (or one of its `downstream` systems)."""
        intent = entry.phase == "intent"
        if intent:
            self._leases.check()

        def queue(conn: Connection, record: AuditRecord) -> None:
            self._outbox.queue(conn, record, notifications, stamp(self._clock()))

        def fence(conn: Connection) -> None:
            self._leases.fence(conn)
            self._stops.fence(conn, entry.action, entry.spec_name, downstream)

        # the fences and the outbox rows run inside the append's transaction: committed with it or not at all
        return self._audit.append(entry, fence=fence if intent else None, then=queue if notifications else None)

    def events(
        self, where: EventFilter | None = None, batch: int = 2000, *, last: int | None = None
    ) -> Iterator[AuditRecord | Unreadable]:
        return self._audit.events(where, batch, last=last)

    def links(self, batch: int = 10000) -> Iterator[ChainLink]:
        return self._audit.links(batch)

    def verify(self, expect_head: str | None = None) -> VerifyResult:
        return self._audit.verify(expect_head)

    def adopt_audit_key(self, actor: str, expect_head: str | None = None) -> AuditRecord:  # `audit adopt-key`
        return self._audit.adopt_key(actor, expect_head)

    def rotate_audit_key(self, actor: str) -> AuditRecord:  # `audit rotate-key`: a previous key → the store's key
        return self._audit.rotate_key(actor)

    def last_event_time(self) -> datetime | None:
        return self._audit.last_event_time()

    def audit_head_seq(self) -> int:
        return stats.audit_head_seq(self._db)

    def pending_creates(self) -> dict[str, datetime]:
        return self._audit.pending_creates()

    def recorded_findings(self) -> dict[tuple[str, str, int | None], str]:
        return self._audit.recorded_findings()

    def first_creates(self, names: Collection[str]) -> dict[str, FirstCreate]:
        return self._audit.first_creates(names) if names else {}

    # --- lease ----------------------------------------------------------------------------------------

    def acquire(self, holder: str, ttl: float, now: datetime | None = None) -> tuple[Lease, Lease | None]:
        return self._leases.acquire(holder, ttl, now)

    def heartbeat(self, mine: Lease, ttl: float) -> Lease:
        return self._leases.heartbeat(mine, ttl)

    def keep(self, mine: Lease, ttl: float, every: float) -> None:
        self._leases.keep(mine, ttl, every)

    def lease_ok(self) -> bool:
        return self._leases.ok()

    def check_lease(self) -> None:
        self._leases.check()

    def held_lease(self) -> Lease | None:
        return self._leases.held()

    def release_kept(self) -> None:
        self._leases.release_kept()

    def release(self, mine: Lease) -> None:
        self._leases.release(mine)

    def current_lease(self) -> Lease | None:
        return self._leases.current()

    def unlock(self, lease_id: str) -> Lease:
        return self._leases.unlock(lease_id)

    # --- bindings, and the index of spec files -----------------------------------------------------------

    def save_binding(self, binding: Binding) -> None:
        self._bindings.save(binding)

    def binding(self, spec_name: str) -> Binding | None:
        return self._bindings.get(spec_name)

    def bindings(self, named: Collection[str] | None = None) -> dict[str, Binding]:  # every one, or `named`'s
        return self._bindings.all() if named is None else self._bindings.named(named)

    def index_specs(self, entries: Sequence[IndexedSpec], present: Collection[str] | None) -> None:
        self._index.save(entries, present)  # keep `entries`; forget the blobs not `present` at HEAD

    # --- analysis -----------------------------------------------------------------------------------------

    def analysis_states(self) -> dict[str, AnalysisState]:
        return self._analysis.all()

    def save_analysis_states(self, states: dict[str, AnalysisState]) -> None:
        self._analysis.save(states)

    # --- emergency stops ------------------------------------------------------------------------------

    def add_stop(
        self,
        kind: EmergencyStopKind,
        target: str,
        reason: str,
        actor: str,
        *,
        source: StopSource,
        expires_at: datetime | None = None,
    ) -> EmergencyStop:
        return self._stops.add(kind, target, reason, actor, source=source, expires_at=expires_at)

    def stops(self) -> tuple[EmergencyStop, ...]:
        return self._stops.active()

    def lift_stop(self, stop_id: int, by: str, reason: str) -> EmergencyStop:
        return self._stops.lift(stop_id, by, reason)

    def stop_paused(self, among: Collection[int]) -> frozenset[int]:
        return self._stops.stop_paused(among)

    def stop_history(self, name: str, downstream: Sequence[str]) -> tuple[StopHistory, ...]:
        return self._stops.history(name, downstream)

    # --- stages: rehearsals, verifications, publish -----------------------------------------------------

    def stage(self, spec: str, environment: str, stage: Stage, key: str) -> StageRecord | None:
        return self._stages.get(spec, environment, stage, key)

    def stages(self) -> tuple[StageRecord, ...]:
        return self._stages.all()

    def stages_of(self, spec: str) -> tuple[StageRecord, ...]:
        return self._stages.of_spec(spec)

    def save_stage(self, record: StageRecord) -> StageRecord:
        return self._stages.save(record)

    # --- notifications --------------------------------------------------------------------------------

    def due_notifications(self, now: str, limit: int = 100) -> list[Delivery]:
        return self._outbox.due(now, limit)

    def notification_delivered(self, delivery_id: int, now: str) -> None:
        self._outbox.mark_delivered(delivery_id, now)

    def notification_failed(self, delivery_id: int, error: str, next_attempt_at: str) -> None:
        self._outbox.mark_failed(delivery_id, error, next_attempt_at)

    def undelivered_notifications(self) -> list[OutboxRow]:
        return self._outbox.undelivered()

    def notification_counts(self) -> dict[str, int]:
        return self._outbox.counts()


class NoStore(Store):
    """`plan --no-store`: no bindings, no create intents, nothing opened; any other use is refused.

    The plan then reads like a first apply (for pull-request plans that get no store secret).
    """

    def __init__(self) -> None:  # nothing is opened
        self._open(NoDatabase(), utcnow, None)

    def bindings(self, named: Collection[str] | None = None) -> dict[str, Binding]:
        return {}

    def binding_heads(self) -> dict[str, BindingHead]:
        return {}

    def claims(self, named: Collection[str]) -> dict[str, Claim]:
        return {}

    def pending_creates(self) -> dict[str, datetime]:
        return {}

    def recorded_findings(self) -> dict[tuple[str, str, int | None], str]:
        return {}

    def analysis_states(self) -> dict[str, AnalysisState]:
        return {}

    def stops(self) -> tuple[EmergencyStop, ...]:
        return ()

    def stop_paused(self, among: Collection[int]) -> frozenset[int]:
        return frozenset()

    def stages(self) -> tuple[StageRecord, ...]:
        return ()

    def stages_of(self, spec: str) -> tuple[StageRecord, ...]:
        return ()

    def indexed_specs(self, blobs: Collection[str] | None = None) -> dict[str, IndexedSpec]:
        return {}

    def index_heads(self) -> dict[str, IndexedHead]:
        return {}

    def unfinished_names(self) -> list[str]:
        return []

    def finished_revision(self) -> int | None:
        return None

    def last_reconciled(self) -> Reconciled | None:
        return None

    def last_valid_policy(self) -> str | None:
        return None

    def gate_decisions(self, paths: Collection[str] | None = None) -> dict[str, GateDecision]:
        return {}
