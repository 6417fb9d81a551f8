"""The only orchestrator: load specs → observe Airflow → dry-run queue heads → plan → apply, audited.

Every mutating Airflow call is preceded by a committed `intent` record and followed by an `outcome`;
if the intent cannot be written, the call is not made (fail closed). A create that may have landed
(timeout, 5xx, 503) is never blindly repeated: the DAG's backfills are listed first and a matching one
created after the intent is adopted.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from controller import __version__
from controller.adapters.airflow import AirflowClient
from controller.adapters.gitsource import GitSource
from controller.adapters.store import Store
from controller.commands.settings import Settings
from controller.commands.validate import validate_paths
from controller.core.audit import AuditEntry, AuditRecord, controller_event
from controller.core.model import Backfill, BackfillRequest, Phase, RunSummary, summarise
from controller.core.notify import outbox_rows
from controller.core.partitions import partition_range, runs_of
from controller.core.plan import (
    INCOMPLETE,
    UNOBSERVED,
    Binding,
    DagObservation,
    DryRun,
    Item,
    Kind,
    Plan,
    World,
    iter_changes,
    make_plan,
    matches,
)
from controller.core.plan_render import findings
from controller.core.policy import DEFAULT_POLICY, Policy
from controller.core.retrying import Backoff
from controller.core.spec import BackfillSpec, ReprocessBehavior
from controller.errors import (
    AirflowAmbiguous,
    AirflowConflict,
    AirflowError,
    AirflowNotFound,
    ConfigError,
    InvalidSpecs,
    StalePlan,
)

log = logging.getLogger(__name__)
CREATE_BACKOFF = Backoff(attempts=3)  # creates whose answer was lost: observe, then try again after this delay


@dataclass
class PassResult:
    plan: Plan  # what this pass decided
    applied: list[tuple[Item, str]] = field(default_factory=list)  # (item, outcome)
    errors: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    after: Plan | None = None  # re-observed after applying changes (None when nothing changed)

    @property
    def current(self) -> Plan:
        return self.after or self.plan

    @property
    def settled(self) -> bool:
        """Nothing more will happen without a human: finished, orphaned, paused or blocked."""
        waiting = (Phase.PENDING, Phase.QUEUED, Phase.RUNNING)
        return all(i.phase not in waiting for i in self.current.items)


def make_client(settings: Settings, *, preflight: bool = True) -> AirflowClient:
    """A client for the configured Airflow, checked once (reachable, Airflow 3, credentials accepted)."""
    if not settings.airflow_url:
        raise ConfigError(
            "BACKFILLCTL_AIRFLOW_URL is not set",
            hint="export BACKFILLCTL_AIRFLOW_URL=http://host:port (and a token or username/password); "
            'for a local one: eval "$(scripts/airflow-local env)"',
        )
    scheme, _, rest = settings.airflow_url.partition("://")
    if scheme not in ("http", "https") or not rest:
        raise ConfigError(
            f"BACKFILLCTL_AIRFLOW_URL={settings.airflow_url!r} is not an http:// or https:// address",
            hint="set it to the api-server's base address, e.g. http://127.0.0.1:8080",
        )
    client = AirflowClient(
        settings.airflow_url,
        token=settings.airflow_token,
        username=settings.airflow_username,
        password=settings.airflow_password,
        timeout=settings.airflow_timeout,
    )
    if preflight:
        try:
            client.preflight()
        except BaseException:
            client.close()
            raise
    return client


class Reconciler:
    def __init__(
        self,
        settings: Settings,
        store: Store,
        client: AirflowClient,
        *,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        sleep: Callable[[float], None] = time.sleep,
        git: GitSource | None = None,
    ) -> None:
        self.settings, self.store, self.client, self.clock, self.sleep = settings, store, client, clock, sleep
        self.git = git or GitSource(settings.specs_dir)
        self.commit = self.git.head()
        self.provenance: dict[str, tuple[str, str]] = {}  # spec path → (last commit, introducing author)
        self.airflow_url = settings.airflow_url or client.base_url
        self.policy = DEFAULT_POLICY  # this pass's policy: its `notify` decides the outbox rows of each record

    # --- reading the world --------------------------------------------------------------------------------

    def load(self) -> tuple[list[BackfillSpec], Policy]:
        result = validate_paths([], self.settings.specs_dir, self.clock())
        if not result.ok:
            first = result.errors[0]
            raise InvalidSpecs(
                f"{len(result.errors)} invalid spec error(s); first: {first.text()}",
                hint="run `backfillctl validate` and fix every error; nothing was changed",
            )
        return self.queue_order(list(result.specs)), result.policy

    def queue_order(self, specs: list[BackfillSpec]) -> list[BackfillSpec]:
        """First merged first: the commit that added the spec file, then the name."""
        intros = self.git.introductions(self.settings.specs_dir) if self.git.available else {}
        last = self.git.last_commits(self.settings.specs_dir) if self.git.available else {}
        for spec in specs:
            relative = self.git.relative(Path(spec.path)) if intros else ""
            if relative in last:
                intro = intros.get(relative)
                self.provenance[spec.path] = (last[relative].sha, intro.author_email if intro else "")

        def key(spec: BackfillSpec) -> tuple[float, str]:
            found = intros.get(self.git.relative(Path(spec.path))) if intros else None
            return (found.timestamp if found else float("inf"), spec.name)

        return sorted(specs, key=key)

    def bindings(self) -> dict[str, Binding]:
        return {
            name: Binding(
                name,
                row["dag_id"],
                row["backfill_id"],
                Phase(row["phase"]),
                row.get("applied_state") or "active",
                row["spec_digest"],
                reason=(row.get("detail") or {}).get("reason", ""),
                runs=row.get("run_counts"),
            )
            for name, row in self.store.bindings().items()
        }

    def observe(self, specs: Sequence[BackfillSpec], bindings: Mapping[str, Binding]) -> dict[str, DagObservation]:
        names = {s.name for s in specs}
        live = {s.dag_id for s in specs if not (s.name in bindings and bindings[s.name].phase.terminal)}
        live |= {b.dag_id for n, b in bindings.items() if n not in names and not b.phase.terminal and b.backfill_id}
        return {dag_id: self._observe_dag(dag_id, specs, bindings) for dag_id in sorted(live)}

    def _observe_dag(
        self, dag_id: str, specs: Sequence[BackfillSpec], bindings: Mapping[str, Binding]
    ) -> DagObservation:
        try:
            backfills = tuple(self.client.list_backfills(dag_id))
            try:
                info = self.client.dag(dag_id, with_tasks=False)  # the dry run enforces depends_on_past
            except AirflowNotFound:
                info = None
            wanted = self._runs_wanted(dag_id, backfills, specs, bindings)
            runs = {b.id: self._summary(b, partitioned=info is not None and info.partitioned) for b in wanted}
        except AirflowError as exc:
            return DagObservation(dag_id, None, error=exc.message)
        return DagObservation(dag_id, info, backfills, runs)

    def _summary(self, backfill: Backfill, *, partitioned: bool) -> RunSummary:
        """The backfill's runs by state. A partitioned DAG's range can hold runs of earlier backfills beside
        this one's (reprocessing creates new runs), so only the runs this backfill created are counted."""
        runs = self.client.dag_runs(backfill.dag_id, backfill.from_date, backfill.to_date, partitioned=partitioned)
        return summarise(runs_of(backfill, runs) if partitioned else runs)

    @staticmethod
    def _runs_wanted(
        dag_id: str, backfills: Sequence[Backfill], specs: Sequence[BackfillSpec], bindings: Mapping[str, Binding]
    ) -> list[Backfill]:
        bound = {b.backfill_id for b in bindings.values() if b.dag_id == dag_id and not b.phase.terminal}
        unbound = [s for s in specs if s.dag_id == dag_id and s.name not in bindings]
        return [b for b in backfills if b.active or b.id in bound or any(matches(s, b) for s in unbound)]

    def dry_runs(self, names: Sequence[str], specs: Mapping[str, BackfillSpec]) -> dict[str, DryRun]:
        return {name: self._dry_run(specs[name]) for name in names}

    def _dry_run(self, spec: BackfillSpec) -> DryRun:
        """Runs the create would make, and runs in range (a second dry run with reprocess `completed`)."""
        try:
            planned = self.client.planned_runs(BackfillRequest.from_spec(spec))
            everything = (
                planned
                if spec.reprocess_behavior is ReprocessBehavior.COMPLETED
                else self.client.planned_runs(BackfillRequest.from_spec(spec, reprocess="completed"))
            )
        except AirflowError as exc:
            return DryRun(error=exc.detail or exc.message)
        return DryRun(tuple(p.date for p in planned), len(everything), partitions=partition_range(planned))

    def plan(self, *, with_dry_runs: bool = True) -> tuple[Plan, list[BackfillSpec], World]:
        specs, policy = self.load()
        plan, world = self.plan_for(specs, policy, with_dry_runs=with_dry_runs)
        return plan, specs, world

    def plan_for(self, specs: list[BackfillSpec], policy: Policy, *, with_dry_runs: bool) -> tuple[Plan, World]:
        """Observe Airflow and plan for specs already loaded (the spec files and git are not read again)."""
        bindings = self.bindings()
        world = World(self.observe(specs, bindings), bindings, {}, self.store.pending_creates(), now=self.clock())
        plan = make_plan(specs, policy, world)
        if with_dry_runs and plan.needs_dry_run():
            by_name = {s.name: s for s in specs}
            dry_runs = self.dry_runs(plan.needs_dry_run(), by_name)
            world = World(world.observations, bindings, dry_runs, world.intents, now=world.now)
            plan = make_plan(specs, policy, world)
        return plan, world

    # --- one pass -----------------------------------------------------------------------------------------

    def run_once(self, *, dry_run: bool = False, plan_checksum: str | None = None) -> PassResult:
        specs, policy = self.load()
        self.policy = policy
        plan, world = self.plan_for(specs, policy, with_dry_runs=True)
        if plan_checksum is not None and not plan.complete:
            self._audit_refusal(f"plan checksum {plan_checksum} given, but the observation is incomplete")
            raise StalePlan(
                f"cannot check the reviewed plan {plan_checksum}: the observation of Airflow is incomplete",
                hint="fix what the findings name (Airflow reachable, permissions), then run again",
            )
        if plan_checksum is not None and plan_checksum != plan.checksum():
            self._audit_refusal(
                f"plan checksum {plan_checksum} does not match the plan computed now, {plan.checksum()}"
            )
            raise StalePlan(
                f"stale plan: checksum={plan_checksum} does not match computed={plan.checksum()}",
                hint="run `backfillctl plan` again, review it, and pass its checksum",
            )
        result = PassResult(plan)
        result.refused += [f"{i.spec}: {i.reason}" for i in plan.items if i.kind is Kind.REFUSE]
        result.errors += plan_errors(plan)
        if dry_run:
            return result
        by_name = {s.name: s for s in specs}
        for item in iter_changes(plan):
            result.applied.append((item, self._apply(item, by_name[item.spec], world, result)))
        self._record_phases(plan, by_name, skip={item.spec for item, _ in result.applied})
        if result.applied:  # re-observe, so phases and status reflect what the changes did
            result.after = self.plan_for(specs, policy, with_dry_runs=False)[0]
            self._record_phases(result.after, by_name, skip=set())
        self._audit_findings(result.current)
        self._audit_pass(plan, result)
        return result

    def _apply(self, item: Item, spec: BackfillSpec, world: World, result: PassResult) -> str:
        if item.kind is Kind.ADOPT:
            return self._adopt(item, spec)
        if item.kind is Kind.CREATE:
            return self._create(spec, world, result, _dry_run_detail(item))
        return self._steer(item, spec, result)

    def _adopt(self, item: Item, spec: BackfillSpec) -> str:
        self._audit("adopt", "observation", spec, outcome="adopted", backfill_id=item.backfill_id, message=item.reason)
        self._bind(spec, item.backfill_id, item.phase, item.reason, item.facts.get("runs"))
        return "adopted"

    def _steer(self, item: Item, spec: BackfillSpec, result: PassResult) -> str:
        backfill_id = item.backfill_id
        assert backfill_id is not None
        call = {Kind.PAUSE: self.client.pause, Kind.UNPAUSE: self.client.unpause, Kind.CANCEL: self.client.cancel}
        path = f"/api/v2/backfills/{backfill_id}/{item.kind.value}"
        self._audit(
            item.kind.value,
            "intent",
            spec,
            backfill_id=backfill_id,
            request={"method": "PUT", "path": path},
            message=item.reason,
        )
        try:
            self.store.check_lease()  # the intent was fenced; a lease lost since then stops the call too
            call[item.kind](backfill_id)
            outcome, status = "done", 200
            status_: int | None = status
        except AirflowConflict as exc:
            outcome, status_ = "already-completed", exc.status
        except AirflowError as exc:
            self._audit(
                item.kind.value,
                "outcome",
                spec,
                outcome="failed",
                backfill_id=backfill_id,
                response={"status": exc.status, "detail": exc.detail},
                message=exc.message,
            )
            result.errors.append(f"{spec.name}: {exc.message}")
            return "failed"
        self._audit(
            item.kind.value, "outcome", spec, outcome=outcome, backfill_id=backfill_id, response={"status": status_}
        )
        applied = {Kind.PAUSE: "paused", Kind.UNPAUSE: "active", Kind.CANCEL: "cancelled"}[item.kind]
        # a cancelled backfill becomes terminal once observed (its runs counted), not when asked
        phase = Phase.RUNNING if item.kind is Kind.CANCEL else item.phase
        self._bind(spec, backfill_id, phase, item.reason, item.facts.get("runs"), applied_state=applied)
        return outcome

    # --- create, with crash and ambiguity handling ---------------------------------------------------------

    def _create(self, spec: BackfillSpec, world: World, result: PassResult, counts: dict[str, Any]) -> str:
        if spec.name in world.intents:
            self._audit(
                "create",
                "observation",
                spec,
                outcome="abandoned",
                message=f"an earlier create intent ({world.intents[spec.name].isoformat()}) left no backfill",
            )
        body = BackfillRequest.from_spec(spec)
        author = self.provenance.get(spec.path, ("", ""))[1] or "unknown"
        intent = self._audit(
            "create",
            "intent",
            spec,
            request={"method": "POST", "path": "/api/v2/backfills", "body": body.body()},
            message=f"requested by {spec.requested_by}, spec authored by {author}, approved by "
            f"{', '.join(spec.approvers)}; ticket {spec.ticket}",
        )
        since = datetime.strptime(intent.time, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
        self._bind(spec, None, Phase.PENDING, "creating", None, keep=counts)
        for attempt in range(1, CREATE_BACKOFF.attempts + 1):
            self.store.check_lease()  # retries reuse the first intent: check the lease before each POST
            outcome = self._try_create(spec, body, since, attempt, result)
            if outcome is not None:
                return outcome
            if attempt < CREATE_BACKOFF.attempts:
                self.sleep(CREATE_BACKOFF.delay(attempt, random.random()))  # noqa: S311 - jitter, not a secret
        return self._create_failed(spec, "gave up after ambiguous answers; nothing was created", result)

    def _try_create(
        self, spec: BackfillSpec, body: BackfillRequest, since: datetime, attempt: int, result: PassResult
    ) -> str | None:
        try:
            created = self.client.create(body)
        except AirflowConflict:
            return self._recover(spec, since, "adopted-after-409") or self._queued_after_conflict(spec)
        except AirflowAmbiguous as exc:
            recovered = self._recover(spec, since, "recovered-after-ambiguous")
            if recovered is None:
                log.warning(
                    "attempt #%d/%d failed; will retry after checking nothing was created: %s",
                    attempt,
                    CREATE_BACKOFF.attempts,
                    exc.message,
                )
            return recovered
        except AirflowError as exc:
            return self._create_failed(spec, exc.message, result, exc.status, exc.detail)
        self._audit(
            "create",
            "outcome",
            spec,
            outcome="created",
            backfill_id=created.id,
            response={"status": 200, "backfill_id": created.id},
        )
        self._bind(spec, created.id, Phase.RUNNING, "created", None)
        return "created"

    def _recover(self, spec: BackfillSpec, since: datetime, outcome: str) -> str | None:
        found = [b for b in self.client.list_backfills(spec.dag_id) if matches(spec, b) and b.created_at >= since]
        if not found:
            return None
        backfill = max(found, key=lambda b: b.id)
        self._audit(
            "create",
            "outcome",
            spec,
            outcome=outcome,
            backfill_id=backfill.id,
            message=f"found backfill #{backfill.id} created at {backfill.created_at.isoformat()}; adopted",
        )
        # never terminal here: the outcome comes from the backfill's runs, observed right after this pass's changes
        self._bind(spec, backfill.id, Phase.RUNNING, outcome, None)
        return outcome

    def _queued_after_conflict(self, spec: BackfillSpec) -> str:
        self._audit(
            "create",
            "outcome",
            spec,
            outcome="conflict",
            response={"status": 409},
            message="another backfill became active on this DAG; queued",
        )
        self._bind(spec, None, Phase.QUEUED, "another backfill is active on this DAG", None)
        return "conflict"

    def _create_failed(
        self, spec: BackfillSpec, message: str, result: PassResult, status: int | None = None, detail: str = ""
    ) -> str:
        self._audit(
            "create",
            "outcome",
            spec,
            outcome="rejected",
            response={"status": status, "detail": detail},
            message=message,
        )
        self._bind(spec, None, Phase.BLOCKED, message, None)
        result.errors.append(f"{spec.path}: {spec.name}: {message}")
        return "rejected"

    # --- recording --------------------------------------------------------------------------------------

    def _record_phases(self, plan: Plan, specs: Mapping[str, BackfillSpec], skip: set[str]) -> None:
        """Audit and store every phase change the plan observed (specs just acted on are skipped)."""
        bindings = self.bindings()
        for item in plan.items:
            spec = specs.get(item.spec)
            if spec is None or item.spec in skip or item.kind is Kind.DRY_RUN:
                continue
            before = bindings.get(item.spec)
            if before is None or before.phase is not item.phase or before.backfill_id != item.backfill_id:
                self._audit(
                    "observe",
                    "observation",
                    spec,
                    outcome=item.phase.value,
                    backfill_id=item.backfill_id,
                    message=item.reason,
                )
                self._bind(
                    spec,
                    item.backfill_id,
                    item.phase,
                    item.reason,
                    item.facts.get("runs"),
                    applied_state=before.applied_state if before else "active",
                )

    def _bind(  # noqa: PLR0917 - one call shape for every binding update
        self,
        spec: BackfillSpec,
        backfill_id: int | None,
        phase: Phase,
        reason: str,
        runs: Any,
        applied_state: str | None = None,
        keep: Mapping[str, Any] | None = None,
    ) -> None:
        """Save the binding; `keep` (create-time counts) survives later updates of the reason."""
        current = self.store.binding(spec.name) or {}
        detail = {**(current.get("detail") or {}), **(keep or {}), "reason": reason}
        values: dict[str, Any] = {
            "airflow_url": self.airflow_url,
            "dag_id": spec.dag_id,
            "backfill_id": backfill_id,
            "spec_digest": spec.digest,
            "git_commit": self.commit,
            "phase": phase.value,
            "run_counts": runs if runs is not None else current.get("run_counts"),
            "detail": detail,
        }
        if applied_state is not None:
            values["applied_state"] = applied_state
        self.store.bind(spec.name, values)

    def _audit(self, action: str, phase: str, spec: BackfillSpec | None, **fields: Any) -> AuditRecord:
        entry = AuditEntry(
            action=action,
            phase=phase,
            actor=self.settings.actor,
            controller_version=__version__,
            git_commit=self.commit,
            spec_commit=self.provenance.get(spec.path, (None, ""))[0] if spec else None,
            spec_name=spec.name if spec else None,
            spec_path=spec.path if spec else None,
            spec_digest=spec.digest if spec else None,
            dag_id=spec.dag_id if spec else None,
            **fields,
        )
        rows = outbox_rows(entry, self.policy.notify, spec)  # notifications, in the record's transaction
        return self.store.append(entry, rows) if rows else self.store.append(entry)

    def _audit_findings(self, plan: Plan) -> None:
        """Each finding is audited when it appears or its message changes (not again on every pass)."""
        recorded = self.store.recorded_findings()
        for finding in plan.findings:
            if recorded.get((finding.kind, finding.dag_id, finding.backfill_id)) != finding.message:
                self.store.append(
                    AuditEntry(
                        action="finding",
                        phase="observation",
                        actor=self.settings.actor,
                        controller_version=__version__,
                        git_commit=self.commit,
                        spec_name=finding.spec,
                        dag_id=finding.dag_id,
                        backfill_id=finding.backfill_id,
                        outcome=finding.kind,
                        message=finding.message,
                    )
                )

    def _audit_refusal(self, message: str) -> None:
        entry = controller_event("reconcile", self.settings.actor, "refused", message)
        rows = outbox_rows(entry, self.policy.notify, None)
        self.store.append(entry, rows) if rows else self.store.append(entry)

    def _audit_pass(self, plan: Plan, result: PassResult) -> None:
        changed = len(result.applied)
        self._audit(
            "reconcile",
            "observation",
            None,
            outcome="applied" if changed else "no-changes",
            message=f"{changed} change(s); plan {plan.checksum()}",
        )


def plan_errors(plan: Plan) -> list[str]:
    """One line per error: each spec's own, and each unobserved cause once (not once per spec or DAG)."""
    own = [
        f"{i.spec}: {i.reason}"
        for i in plan.items
        if i.error and i.kind is not Kind.REFUSE and not i.reason.startswith(UNOBSERVED)
    ]
    return own + [message for kind, message in findings(plan) if kind == INCOMPLETE]


def _dry_run_detail(item: Item) -> dict[str, Any]:
    return {
        "runs_to_create": item.runs_to_create,
        "runs_in_range": item.runs_in_range,
        "first_date": item.first_date.isoformat() if item.first_date else None,
        "last_date": item.last_date.isoformat() if item.last_date else None,
        "first_partition": item.facts.get("first_partition"),
        "last_partition": item.facts.get("last_partition"),
    }
