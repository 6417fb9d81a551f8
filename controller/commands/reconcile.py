"""One reconcile pass, in four steps with typed hand-offs: observe → plan → apply → record.

`Reconciler.run_once` loads the specs (git order, provenance), observes Airflow into a `World`
(`commands/observe.py`), plans once (`core/plan/queue.py`), applies the changes with intent/outcome audit and
crash recovery (`commands/apply.py`), and records phases, findings and the pass (`commands/record.py`).
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from itertools import groupby
from pathlib import Path

from controller.adapters.airflow import AirflowClient
from controller.adapters.gitsource import GitSource
from controller.adapters.store import Store
from controller.commands.analysis import Analyst
from controller.commands.apply import Applied, Applier
from controller.commands.consumers import Consumers
from controller.commands.holds import lift_due, record_hand_stops, with_holds
from controller.commands.observe import Created, Observer
from controller.commands.record import Recorder
from controller.commands.settings import Settings
from controller.commands.spec_source import SpecLoader, SpecSource
from controller.commands.stages import StageRunner
from controller.core.checks.loaded import LoadedSpec
from controller.core.model.binding import Binding
from controller.core.model.policy import DEFAULT_POLICY, Policy
from controller.core.model.secret import redact_url
from controller.core.model.spec import BackfillSpec
from controller.core.model.stages import PRODUCTION
from controller.core.plan.provenance import Evidence, Gate, SpecOrigin, gate_plan
from controller.core.plan.queue import make_plan
from controller.core.plan.stages import due
from controller.core.plan.values import INCOMPLETE, Item, Kind, Plan, iter_changes, refusals, stuck
from controller.core.plan.world import World
from controller.core.render.plan import findings
from controller.core.rules.analysis import Verdict
from controller.errors import ConfigError, StalePlan

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class PassResult:
    plan: Plan  # what this pass decided
    applied: list[tuple[Item, str]] = field(default_factory=list)  # (item, outcome), in the order applied
    errors: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    after: Plan | None = None  # re-observed after applying changes (None when nothing changed)
    source: SpecSource | None = None  # where the specs came from, and the files that differ from HEAD
    analysis: Mapping[str, Verdict] | None = None  # the downstream systems' verdicts this pass (None: not evaluated)

    @property
    def current(self) -> Plan:
        return self.after or self.plan

    @property
    def settled(self) -> bool:
        """Nothing more will happen without a human: finished, orphaned, paused or blocked, or queued behind such."""
        behind = stuck(self.current)
        return all(not i.moving or i.spec in behind for i in self.current.items)

    def stuck_lines(self) -> list[str]:
        """What holds each spec queued behind one that needs a human."""
        return [
            f"{spec} is queued behind {head.spec}, which is {head.phase.value}: {head.reason}"
            for spec, head in stuck(self.current).items()
        ]


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
        allow_dirty: bool = False,
        connect: Callable[[Settings], AirflowClient] | None = None,
    ) -> None:
        self.settings, self.store, self.client, self.clock, self.sleep = settings, store, client, clock, sleep
        self.allow_dirty = allow_dirty
        self.told: SpecSource | None = None  # said once, and again when the files differ (--watch)
        self.git = git or GitSource(settings.specs_dir)
        self.specs = SpecLoader(settings, store, self.git, clock)  # the specs, their queue order and provenance
        self.commit = self.git.head()
        self.airflow_url = redact_url(settings.airflow_url or client.base_url)  # recorded in every binding: no secret
        self.observer = Observer(client)
        self.analyst = Analyst(store)  # each downstream system's metric analysis, once a pass
        self.policy = DEFAULT_POLICY  # the last pass's policy (the pass hooks read its `notify`)
        self.evidence: Evidence | None = None  # the merged pull request's reviews (`--pr-reviews`)
        self.recorder: Recorder | None = None  # the last pass's (the pass hooks audit stuck findings through it)
        self.connect = connect  # opens another environment's client (None: production only)
        self.environments: dict[str, AirflowClient] = {}  # opened on first use, closed with the session
        self.stages = StageRunner(store, self.client_for, self.clock)

    def client_for(self, name: str) -> AirflowClient:
        """The client of an environment the policy declares (production's is the session's)."""
        if name == PRODUCTION:
            return self.client
        if name not in self.environments:
            environment = self.policy.environment(name)
            if environment is None or self.connect is None:
                raise ConfigError(
                    f"no Airflow for environment {name}", hint="declare it under the policy's `environments`"
                )
            self.environments[name] = self.connect(self.settings.for_environment(environment))
        return self.environments[name]

    def close(self) -> None:
        for client in self.environments.values():
            client.close()
        self.environments.clear()

    # --- the specs -----------------------------------------------------------------------------------------

    @property
    def provenance(self) -> dict[str, SpecOrigin]:
        """Spec path → its last commit and the author who added it (filled by each load)."""
        return self.specs.provenance

    @property
    def loaded(self) -> dict[str, LoadedSpec]:
        """The last load's specs with their documents (the gate locates)."""
        return self.specs.loaded

    def load(
        self, bindings: Mapping[str, Binding] | None = None, source: SpecSource | None = None
    ) -> tuple[list[BackfillSpec], Policy]:
        """The specs in queue order and the policy (`SpecLoader.load`)."""
        return self.specs.load(bindings, source)

    # --- read only: plan and status ----------------------------------------------------------------------

    def plan(self, *, with_dry_runs: bool = True) -> tuple[Plan, list[BackfillSpec], World]:
        specs, policy = self.load()
        self.policy = policy
        world = self._observe(specs, policy, self.store.bindings(), with_dry_runs=with_dry_runs)
        world = with_holds(world, self.client, self.store)
        world = replace(world, analysis=self.analyst.verdicts(specs, policy, world.now, write=False))
        plan = planned(specs, policy, world)
        return (self.observer.load(plan, policy) if with_dry_runs else plan), specs, world

    def _observe(
        self, specs: Sequence[BackfillSpec], policy: Policy, bindings: dict[str, Binding], *, with_dry_runs: bool
    ) -> World:
        intents = self.store.pending_creates()
        stages = self.stages.records(specs, policy, bindings)  # before the dry runs: a rehearsing head needs none
        return self.observer.world(
            specs, policy, bindings, intents, self.clock(), with_dry_runs=with_dry_runs, stages=stages
        )

    # --- one pass -----------------------------------------------------------------------------------------

    def spec_source(self) -> SpecSource:
        """Reconcile acts on what is committed at HEAD: the files that differ are named, and applied only with
        --allow-dirty. A folder outside any repository has no commit: it is applied as it is, with a warning."""
        if not self.git.available:
            return SpecSource(None, working_tree=True, repository=False)
        self.commit = self.git.head()  # HEAD may have moved since the last pass (a pull under --watch)
        differing = tuple(self.git.uncommitted(self.settings.specs_dir))
        return SpecSource(self.commit, working_tree=self.allow_dirty, differing=differing)

    def _tell(self, source: SpecSource, recorder: Recorder, dry_run: bool) -> None:
        """Warn of the files that differ from HEAD when they change; audit applying them (--allow-dirty)."""
        if self.told is not None and (self.told.differing, self.told.repository) == (
            source.differing,
            source.repository,
        ):
            return
        for line in source.lines():
            log.warning("%s", line)
        if source.working_tree and source.differing and not dry_run:
            recorder.dirty([f"{path} ({how})" for path, how in source.differing])
        self.told = source

    def run_once(self, *, dry_run: bool = False, plan_checksum: str | None = None) -> PassResult:
        bindings = self.store.bindings()
        source = self.spec_source()
        specs, policy = self.load(bindings, source)
        self.policy = policy
        recorder = Recorder(
            self.settings, self.store, self.commit, self.provenance, self.airflow_url, policy=policy, bindings=bindings
        )
        self.recorder = recorder
        self._tell(source, recorder, dry_run)
        world = with_holds(self._observe(specs, policy, recorder.bindings, with_dry_runs=True), self.client, self.store)
        if not dry_run:  # expired stops, stops a reviewed resume names, hand pauses unpaused in Airflow
            world = lift_due(world, specs, self.store, recorder, self.settings.actor)
        world = replace(world, analysis=self.analyst.verdicts(specs, policy, world.now, write=not dry_run))
        consumers = Consumers(self.client)  # the policy rule `asset_consumers: require_downstream` refuses creates
        plan = consumers.refuse(planned(specs, policy, world), policy)
        self._check_reviewed(plan, plan_checksum, recorder)
        plan, recorder.approvals = gate_plan(plan, self._gate(specs, policy, recorder))
        refused = [f"{i.spec}: {i.reason}" for i in refusals(plan)]
        if dry_run:
            return PassResult(plan, errors=plan_errors(plan), refused=refused, source=source, analysis=world.analysis)
        record_hand_stops(plan, world, self.store, recorder)
        by_name = {s.name: s for s in specs}
        with self.store.batch("recording outcomes"):
            recorder.outcomes(plan, by_name)
        applied = self._apply(plan, specs, world, recorder)
        with self.store.batch("recording observed phases"):
            recorder.phases(plan, by_name, skip={a.item.spec for a in applied})
        after = None
        if applied:  # re-observe (bindings from memory), so phases and status reflect what the changes did
            after_world = self.observer.after(
                world,
                specs,
                recorder.bindings,
                intents=self.store.pending_creates(),
                now=self.clock(),
                changed=changed_dags(applied),
            )
            after_world = replace(after_world, analysis=world.analysis)  # evaluated once a pass
            after = consumers.refuse(planned(specs, policy, after_world), policy)
            after = gate_plan(after, self._gate(specs, policy, recorder))[0]
            with self.store.batch("recording observed phases"):
                recorder.phases(after, by_name, skip=set())
        recorder.findings(after or plan, by_name)
        current = after or plan  # the rehearsals, verifications and publish runs this pass's plan waits on
        self.stages.advance(
            due(specs, policy, current.items, world.stages), specs, world.stages, recorder, verified_ids(current)
        )
        recorder.pass_done(plan, len(applied), self.clock())
        errors = plan_errors(plan) + [a.error for a in applied if a.error]
        done: list[tuple[Item, str]] = [(a.item, a.outcome) for a in applied]
        return PassResult(plan, done, errors, refused, after, source, analysis=world.analysis)

    def _apply(self, plan: Plan, specs: Sequence[BackfillSpec], world: World, recorder: Recorder) -> list[Applied]:
        applier = Applier(self.client, recorder, self.sleep)
        by_name = {s.name: s for s in specs}
        applied: list[Applied] = []
        for adopting, items in groupby(iter_changes(plan), key=lambda i: i.kind is Kind.ADOPT):
            # adoptions call nothing: a run of them is recorded in one transaction
            with self.store.batch("recording adoptions") if adopting else contextlib.nullcontext():
                applied += [applier.apply(item, by_name[item.spec], world) for item in items]
        return applied

    def _gate(self, specs: Sequence[BackfillSpec], policy: Policy, recorder: Recorder) -> Gate:
        """What the approval gate at reconcile needs: the evidence, and the specs the merged commit touched."""
        changed: frozenset[str] = frozenset()
        if self.evidence is not None and self.git.available:
            touched = self.git.changed_by_head(self.settings.specs_dir)
            changed = frozenset(s.name for s in specs if self.git.relative(Path(s.path)) in touched)
        return Gate(self.evidence, changed, self.loaded, recorder.bindings, policy, self.commit)

    @staticmethod
    def _check_reviewed(plan: Plan, checksum: str | None, recorder: Recorder) -> None:
        if checksum is None:
            return
        if not plan.complete:
            recorder.refusal(f"plan checksum {checksum} given, but the observation is incomplete")
            raise StalePlan(
                f"cannot check the reviewed plan {checksum}: the observation of Airflow is incomplete",
                hint="fix what the findings name (Airflow reachable, permissions), then run again",
            )
        if checksum != plan.checksum():
            recorder.refusal(f"plan checksum {checksum} does not match the plan computed now, {plan.checksum()}")
            raise StalePlan(
                f"stale plan: checksum={checksum} does not match computed={plan.checksum()}",
                hint="run `backfillctl plan` again, review it, and pass its checksum",
            )


def planned(specs: Sequence[BackfillSpec], policy: Policy, world: World) -> Plan:
    """The plan of the World; one made with analysis verdicts carries the checksum of the plan without them (a
    reviewed checksum must not go stale because a gauge moved)."""
    plan = make_plan(specs, policy, world)
    if world.analysis is None:
        return plan
    return replace(plan, unmetered=make_plan(specs, policy, replace(world, analysis=None)).checksum())


def verified_ids(plan: Plan) -> dict[str, tuple[int, ...]]:
    """Per spec waiting on a verification, the backfills it verifies: every chunk's, or its one backfill."""
    ids: dict[str, tuple[int, ...]] = {}
    for item in plan.items:
        if item.stage is None:
            continue
        chunks = tuple(c.backfill_id for c in item.progress.chunks) if item.progress is not None else ()
        ids[item.spec] = chunks or ((item.backfill_id,) if item.backfill_id is not None else ())
    return ids


def changed_dags(applied: Sequence[Applied]) -> dict[str, list[Created | None]]:
    """DAG → what each change on it created, with the runs it made (None: created nothing, or no answer to
    trust). An adoption changes nothing in Airflow, so its DAG needs no second look."""
    changed: dict[str, list[Created | None]] = {}
    for a in applied:
        if a.item.kind is not Kind.ADOPT:
            changed.setdefault(a.item.dag_id, []).append(None if a.created is None else Created(a.created, a.made))
    return changed


def plan_errors(plan: Plan) -> list[str]:
    """One line per error: each spec's own, and each unobserved cause once (not once per spec or DAG)."""
    own = [f"{i.spec}: {i.reason}" for i in plan.items if i.error and i.kind is not Kind.REFUSE and not i.unobserved]
    return own + [message for kind, message in findings(plan) if kind == INCOMPLETE]
