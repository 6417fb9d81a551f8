"""Record: the audit log and the bindings, kept in memory for the pass and written through to the store.

The store's bindings are read once per pass; every change goes to the in-memory copy and the store
together, so later steps of the same pass (re-observation, phase records) never read them again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime, timedelta
from enum import Enum
from typing import Any

from controller import __version__
from controller.adapters.store import Store
from controller.commands.reconcile.applied import applied_of, applied_yet
from controller.commands.runtime.settings import Settings
from controller.core.audit.chain import AuditEntry, AuditRecord, controller_event
from controller.core.audit.notify import outbox_rows
from controller.core.audit.vocabulary import Action, AuditPhase, Outcome
from controller.core.model.airflow import RunSummary
from controller.core.model.binding import Approval, Binding, CreateFacts, Phase
from controller.core.model.chunks import Progress
from controller.core.model.guards import Guard
from controller.core.model.policy import DEFAULT_POLICY, Policy
from controller.core.model.spec import BackfillSpec, DesiredState
from controller.core.plan.provenance import UNKNOWN_ORIGIN, SpecOrigin
from controller.core.plan.values import Item, Kind, Plan

LIVENESS_EVERY = timedelta(hours=1)  # an idle reconciler's one record an hour: it is alive, the log stays small


class Kept(Enum):
    """A binding field an update leaves as it was (where None means "clear it")."""

    KEEP = "keep"


class Recorder:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        commit: str | None,
        provenance: Mapping[str, SpecOrigin],
        airflow_url: str,
        *,
        policy: Policy = DEFAULT_POLICY,  # its `notify` decides the outbox rows of each record
        bindings: Mapping[str, Binding] | None = None,  # already read this pass (read once, kept in memory)
    ) -> None:
        self.settings, self.store, self.commit, self.provenance = settings, store, commit, provenance
        self.airflow_url, self.policy = airflow_url, policy
        self.bindings: dict[str, Binding] = dict(bindings) if bindings is not None else store.bindings()
        self.written = 0  # records this pass appended: a pass that found or changed nothing writes none
        self.approvals: dict[str, Approval] = {}  # spec → who approved it, as this pass's gate checked
        self._ended: set[str] = set()  # specs whose phase became terminal this pass (their coverage is measured)

    # --- audit --------------------------------------------------------------------------------------------

    def audit(
        self,
        action: Action,
        phase: AuditPhase,
        spec: BackfillSpec | None,
        *,
        outcome: Outcome | Phase | None = None,
        notify: bool = True,
        **fields: Any,
    ) -> AuditRecord:
        named: dict[str, Any] = {  # a record about a spec whose file is not read (invalid) names it in `fields`
            "spec_commit": self.provenance.get(spec.path, UNKNOWN_ORIGIN).commit if spec else None,
            "spec_name": spec.name if spec else None,
            "spec_path": spec.path if spec else None,
            "spec_digest": spec.digest if spec else None,
            "dag_id": spec.dag_id if spec else None,
        }
        entry = AuditEntry(
            action=action,
            phase=phase,
            actor=self.settings.actor,
            controller_version=__version__,
            git_commit=self.commit,
            outcome=outcome,
            **(named | fields),
        )
        return self._append(entry, spec, notify=notify)

    def _append(self, entry: AuditEntry, spec: BackfillSpec | None, *, notify: bool = True) -> AuditRecord:
        """The record, and the notifications it triggers (`notify`), in one transaction (the outbox)."""
        rows = outbox_rows(entry, self.policy.notify, spec) if notify else []
        self.written += 1
        if spec is not None and spec.downstream:  # a stop of one of its systems refuses its create or unpause
            return self.store.append(entry, rows, downstream=spec.downstream)
        return self.store.append(entry, rows) if rows else self.store.append(entry)

    def dirty(self, files: list[str]) -> None:
        """--allow-dirty applied files no commit holds: said in the log, as the reviewed ones are not these."""
        message = f"--allow-dirty: applying spec files that differ from HEAD: {', '.join(files)}"
        self._append(controller_event(Action.RECONCILE, self.settings.actor, Outcome.ALLOW_DIRTY, message), None)

    def refusal(self, message: str) -> None:
        self._append(controller_event(Action.RECONCILE, self.settings.actor, Outcome.REFUSED, message), None)

    def findings(self, plan: Plan, specs: Mapping[str, BackfillSpec]) -> None:
        """The planner's findings, each audited when it appears or its message changes."""
        recorded = self.store.recorded_findings()
        for f in plan.findings:
            spec = specs.get(f.spec) if f.spec is not None else None
            self.finding(
                f.kind, f.dag_id, f.message, spec_name=f.spec, backfill_id=f.backfill_id, spec=spec, recorded=recorded
            )

    def finding(
        self,
        kind: str,  # the planner's `FindingKind`, or `Outcome.STUCK`
        dag_id: str,
        message: str,
        *,
        spec_name: str | None,
        backfill_id: int | None,
        spec: BackfillSpec | None,
        recorded: Mapping[tuple[str, str, int | None], str],
    ) -> bool:
        """Every finding's one way to the audit log, with the notification its kind is: audited when it appears or
        its message changes (`recorded`: the latest message of each, by kind, DAG and backfill), not every pass."""
        if recorded.get((kind, dag_id, backfill_id)) == message:
            return False
        entry = self._observed(
            Action.FINDING, spec_name=spec_name, dag_id=dag_id, backfill_id=backfill_id, outcome=kind, message=message
        )
        self._append(entry, spec)
        return True

    def _observed(self, action: Action, **fields: Any) -> AuditEntry:
        """An observation of this pass not made from a spec file (a finding, a deleted spec's outcome)."""
        return AuditEntry(
            action=action,
            phase=AuditPhase.OBSERVATION,
            actor=self.settings.actor,
            controller_version=__version__,
            git_commit=self.commit,
            **fields,
        )

    def pass_done(self, plan: Plan, changed: int, now: datetime) -> None:
        """A pass that changed or found something is recorded; an idle one only as liveness, at most hourly."""
        if changed or self.written:
            outcome = Outcome.APPLIED if changed else Outcome.NO_CHANGES
        elif self._quiet_since(now):
            outcome = Outcome.IDLE
        else:
            return
        message = f"{changed} change(s); plan {plan.checksum()}"
        self.audit(Action.RECONCILE, AuditPhase.OBSERVATION, None, outcome=outcome, message=message)

    def _quiet_since(self, now: datetime) -> bool:
        """The log has had no record for LIVENESS_EVERY (or none at all)."""
        last = self.store.last_event_time()
        return last is None or now - last >= LIVENESS_EVERY

    # --- bindings -----------------------------------------------------------------------------------------

    def bind(  # noqa: PLR0917 - one call shape for every binding update
        self,
        spec: BackfillSpec,
        backfill_id: int | None,
        phase: Phase,
        reason: str,
        runs: RunSummary | None = None,
        applied_state: DesiredState | None = None,
        created: CreateFacts | None = None,
        guard: Guard | Kept | None = Kept.KEEP,  # the guard whose pause this is; None clears it
        progress: Progress | None = None,  # a chunked spec's progress; None keeps it
        refused: bool = False,  # this pass refused its create: what `status` shows until a pass decides again
        approval: Approval | None = None,  # who approved its pull request; None keeps it
        approval_refused: bool = False,  # the refusal is the approval gate's
    ) -> Binding:
        """Save what is known of the spec now; runs, applied state and create facts survive unless given."""
        before = self.bindings.get(spec.name)
        binding = Binding(
            spec_name=spec.name,
            dag_id=spec.dag_id,
            backfill_id=backfill_id,
            phase=phase,
            applied_state=applied_state or (before.applied_state if before else DesiredState.ACTIVE),
            spec_digest=spec.digest,
            reason=reason,
            runs=runs if runs is not None else (before.runs if before else None),
            created=created or (before.created if before else None),
            backfills=_owned(before, backfill_id, progress),
            git_commit=self.commit,
            airflow_url=self.airflow_url,
            guard=guard if not isinstance(guard, Kept) else (before.guard if before else None),
            progress=progress if progress is not None else (before.progress if before else None),
            refused=refused,
            approval_refused=refused and approval_refused,
            approval=approval or (before.approval if before else None),
            applied=before.applied if before is not None and before.applied is not None else None,
            noted=before.noted if before is not None else None,  # per backfill: another one starts again
            coverage=before.coverage if before is not None and phase.terminal else None,  # measured at its end
            ahead=before.ahead if before is not None and before.ahead and before.ahead.digest == spec.digest else None,
        )
        if phase.terminal and (before is None or not before.phase.terminal):
            self._ended.add(spec.name)
        if binding.applied is None and applied_yet(binding):  # what it asked, kept from its first apply on
            binding = replace(binding, applied=applied_of(spec, self.commit))
        self.store.save_binding(binding)
        self.bindings[spec.name] = binding
        return binding

    def ended(self) -> list[Binding]:
        """The specs that ended in this pass (their phase became terminal), as bound now."""
        return [self.bindings[name] for name in sorted(self._ended) if self.bindings[name].phase.terminal]

    def keep(self, name: str, **fields: Any) -> None:
        """Keep what a pass measured of a bound spec (its `coverage` when it ended, its `ahead` while queued)."""
        binding = replace(self.bindings[name], **fields)
        self.store.save_binding(binding)
        self.bindings[name] = binding

    def outcomes(self, plan: Plan, specs: Mapping[str, BackfillSpec]) -> None:
        """The outcomes the plan observed, before its changes are applied: a backfill's final runs are stored
        before a create of this pass can re-run its dates (a crash in between must not lose them)."""
        finished = replace(plan, items=tuple(i for i in plan.items if i.phase.terminal))
        self.phases(finished, specs, skip={i.spec for i in plan.items if i.kind.change})
        for item in plan.settled:
            self._settle(item)

    def _settle(self, item: Item) -> None:
        """A deleted spec's finished backfill: its outcome in its binding (shown again if the spec comes back)."""
        before = self.bindings[item.spec]
        entry = self._observed(
            Action.OBSERVE,
            spec_name=item.spec,
            dag_id=item.dag_id,
            backfill_id=item.backfill_id,
            outcome=item.phase,
            message=f"{item.reason} (the spec file is deleted)",
        )
        self._append(entry, None)
        binding = replace(before, phase=item.phase, reason=item.reason, runs=item.runs, git_commit=self.commit)
        self.store.save_binding(binding)
        self.bindings[item.spec] = binding

    def phases(self, plan: Plan, specs: Mapping[str, BackfillSpec], skip: set[str]) -> None:
        """Audit and store every phase change the plan observed (specs just acted on are skipped)."""
        for shown in plan.items:
            if shown.held is not None and not shown.held.phase.terminal:
                continue  # what holds it (an edit, an invalid policy) is shown, never stored as its phase
            item = shown.held or shown  # a held spec's backfill may still finish: its outcome is recorded
            spec = specs.get(item.spec)
            if spec is None or item.spec in skip or item.kind.mutating or item.unobserved:
                continue  # a planned phase, or nothing observed at all: never recorded as what was seen
            before = self.bindings.get(item.spec)
            refused = item.kind is Kind.REFUSE
            changed = (
                before is None
                or before.phase is not item.phase
                or before.backfill_id != item.backfill_id
                or before.refused is not refused
                or (refused and before.reason != item.reason)  # refused again for another count: a new decision
            )
            if changed:
                self.audit(
                    Action.OBSERVE,
                    AuditPhase.OBSERVATION,
                    spec,
                    outcome=item.phase,
                    backfill_id=item.backfill_id,
                    message=item.reason,
                )
            moved = before is not None and (
                (item.progress is not None and before.progress != item.progress)
                or (item.runs is not None and before.runs != item.runs)  # the counts an outage view shows
            )
            if changed or moved:
                self.bind(
                    spec,
                    item.backfill_id,
                    item.phase,
                    item.reason,
                    item.runs,
                    progress=item.progress,
                    refused=refused,
                    approval_refused=item.approval_refused,
                )


def _owned(before: Binding | None, backfill_id: int | None, progress: Progress | None) -> tuple[int, ...]:
    """Every backfill the spec has owned, in order: a chunked spec's adopted chunks too."""
    owned = before.owning(backfill_id) if before else (() if backfill_id is None else (backfill_id,))
    return tuple(dict.fromkeys((*(progress.ids if progress is not None else ()), *owned)))
