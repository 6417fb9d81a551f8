"""One reconcile pass: load → observe → make_plan → the refining steps → apply → record.

`Reconciler.run_once` loads the specs (git order, provenance), observes Airflow into a `World` (`observe.py` in this
room), plans once (`core/plan/queue.py`), refines the plan through the named steps `plan` and `status` run too
(`steps.py`: consumers, gate; look-ahead, shown only), applies the changes with intent/outcome audit and
crash recovery (`apply.py`), and records phases, findings and the pass (`record.py`). docs/architecture.md draws it.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from itertools import groupby

from controller.adapters.airflow import AirflowClient
from controller.adapters.gitsource import GitSource
from controller.adapters.store import Store
from controller.commands.reconcile.analysis import Analyst
from controller.commands.reconcile.applied import with_applied
from controller.commands.reconcile.apply import Applied, Applier
from controller.commands.reconcile.consumers import Consumers
from controller.commands.reconcile.coverage import at_end, cover_ended, keep_coverage, record_outcomes
from controller.commands.reconcile.gate import EvidenceGiven, PassFacts, gather
from controller.commands.reconcile.history import kept_history
from controller.commands.reconcile.holds import lift_due, record_hand_stops, with_holds
from controller.commands.reconcile.lookahead import judged_now, kept
from controller.commands.reconcile.observe import Created, Observer
from controller.commands.reconcile.record import Recorder
from controller.commands.reconcile.run_notes import NoteWriter
from controller.commands.reconcile.spec_source import SpecLoader, SpecSource, heads, last_good_policy
from controller.commands.reconcile.stages import StageRunner
from controller.commands.reconcile.steps import DECIDING, GATE, LOOK_AHEAD, Refining, refine
from controller.commands.reconcile.stuck import record_stuck
from controller.commands.runtime.environments import check_production, open_other
from controller.commands.runtime.scopes import claim_scope
from controller.commands.runtime.settings import Settings
from controller.core.audit.vocabulary import Outcome
from controller.core.checks.loaded import LoadedSpec
from controller.core.checks.result import SpecSet
from controller.core.model.binding import Binding
from controller.core.model.coverage import Coverage
from controller.core.model.evidence import GateDecision
from controller.core.model.policy import DEFAULT_POLICY, Policy
from controller.core.model.secret import redact_url
from controller.core.model.spec import BackfillSpec
from controller.core.model.stages import PRODUCTION
from controller.core.plan.desired import Desired, plan_desired
from controller.core.plan.edits import applied_view
from controller.core.plan.provenance import Gate, SpecOrigin, assess, resumable
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
    after: Plan | None = None  # re-observed after the changes, with the queued specs looked ahead (shown only)
    source: SpecSource | None = None  # where the specs came from, and the files that differ from HEAD
    analysis: Mapping[str, Verdict] | None = None  # the downstream systems' verdicts this pass (None: not evaluated)
    policy: Policy = DEFAULT_POLICY  # the pass's policy (what happens around it reads its `notify`, its liveness)

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


@dataclass(frozen=True, slots=True)
class Viewed:
    """What `plan` and `status` show: the plan, the specs it was made from, the world observed, the policy."""

    plan: Plan
    specs: list[BackfillSpec]
    world: World
    policy: Policy


NOTES_LOGIN = "(run notes)"  # the run-notes login's client, kept with the environments' and closed with them


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
        self.observer.history = kept_history(store, self.airflow_url, settings.actor)  # a create lists only new ones
        self.analyst = Analyst(store)  # each downstream system's metric analysis, once a pass
        self._policy = DEFAULT_POLICY  # this pass's (its environments open the stages' clients)
        self.evidence = EvidenceGiven()  # `--evidence` documents, and `--evidence-unavailable` commits
        self.connect = connect  # opens another environment's client (None: production only)
        self.environments: dict[str, AirflowClient] = {}  # opened on first use, closed with the session
        self.stages = StageRunner(store, self.client_for, self.clock)
        self.rest_finished = False  # only `--once`'s text shows the pass: count finished specs at rest, not build them

    def client_for(self, name: str, dag_id: str) -> AirflowClient:
        """The client of an environment the policy declares (production's is the session's); another one is opened
        once, after DAG `dag_id` showed it is not production (`commands.environments.open_other`)."""
        if name == PRODUCTION:
            return self.client
        if name not in self.environments:
            environment = self._policy.environment(name)
            if environment is None or self.connect is None:
                raise ConfigError(
                    f"no Airflow for environment {name}", hint="declare it under the policy's `environments`"
                )
            self.environments[name] = open_other(environment, dag_id, self.settings, self.client, self.connect)
        return self.environments[name]

    def notes_client(self) -> AirflowClient:
        """The client that writes run notes: a login of its own when one is given (`Settings.for_notes`), opened
        once; else the reconciler's."""
        notes = self.settings.for_notes()
        if notes is None or self.connect is None:
            return self.client
        if NOTES_LOGIN not in self.environments:
            self.environments[NOTES_LOGIN] = self.connect(notes)
        return self.environments[NOTES_LOGIN]

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

    def load(self, bindings: Mapping[str, Binding] | None = None, source: SpecSource | None = None) -> SpecSet:
        """The valid specs in queue order, the invalid files, the policy (`SpecLoader.load`)."""
        return self.specs.load(None if bindings is None else heads(bindings), source)

    def desired(
        self, bindings: Mapping[str, Binding] | None, source: SpecSource | None = None
    ) -> tuple[Desired, dict[str, Binding]]:
        """What the pass plans from, and the bindings with what each applied spec asked then: an edited spec is
        planned as it was applied and shown Blocked (`core.plan.edits`). `bindings` None: the store's, read whole
        only for the specs not at rest (`rest_finished`)."""
        found, bindings = self.specs.planned(bindings, source, rest=self.rest_finished)
        bound = with_applied(bindings, found.valid, self.store, self.git, self.settings.specs_dir)
        commits = {path: origin.commit for path, origin in self.provenance.items() if origin.commit}
        specs, edits = applied_view(found.valid, bound, commits)
        errors = found.policy_errors
        where = errors[0].location.source if errors else (found.policy.path or "specs/policy.yaml")
        policy = (last_good_policy(self.store) or found.policy) if errors else found.policy  # guards keep pausing
        check_production(self.settings, policy)
        held = tuple(e.text() for e in errors)
        desired = Desired(
            tuple(specs), policy, found.invalid, edits, held, where, found.policy_text, self.specs.at_rest
        )
        return desired, bound

    # --- read only: plan and status ----------------------------------------------------------------------

    def plan(self, *, with_dry_runs: bool = True, ahead: bool = False, only: Collection[str] | None = None) -> Viewed:
        """What reconcile would do, read only: the deciding steps of a pass (`steps.DECIDING`), nothing decided or
        written. With dry runs, the queue heads'; `ahead`: the queued specs' too, judged afresh (of `only`, when
        given); without dry runs, `ahead` says what reconcile kept of them (`status`)."""
        desired, bindings = self.desired(self.store.bindings())
        specs, policy = list(desired.specs), desired.policy
        self._policy = policy
        world = self._observe(specs, policy, bindings, with_dry_runs=with_dry_runs)
        world = with_holds(world, self.client, self.store)
        world = replace(world, analysis=self.analyst.verdicts(specs, policy, world.now, write=False))
        gate = self._gate(desired, bindings, decide=False)  # what the store keeps: nothing is decided here
        decisions = assess(gate) if gate is not None else {}
        observer, memo = (self.observer, None) if with_dry_runs else (None, kept(bindings))
        refining = Refining(policy, specs, world, Consumers(self.client), observer, gate, decisions, only, memo)
        if not with_dry_runs:  # `status`: the deciding steps, each read once
            plan = refine(planned(desired, world), refining, DECIDING).plan
        else:  # `plan`: the loads it shows apply the consumers rule on the same reads (`observe.load`)
            plan = self.observer.load(refine(planned(desired, world), refining, (GATE,)).plan, policy)
        return Viewed((refine(plan, refining, (LOOK_AHEAD,)).plan if ahead else plan), specs, world, policy)

    def _observe(
        self, specs: Sequence[BackfillSpec], policy: Policy, bindings: dict[str, Binding], *, with_dry_runs: bool
    ) -> World:
        intents, now = self.store.pending_creates(), self.clock()
        stages = self.stages.records(specs, policy, bindings)  # before the dry runs: a rehearsing head needs none
        world = self.observer.world(
            specs, policy, bindings, intents, now, with_dry_runs=with_dry_runs, stages=stages, claims=self.specs.claims
        )
        return replace(world, rested=self.specs.at_rest.names)

    # --- one pass -----------------------------------------------------------------------------------------

    def spec_source(self) -> SpecSource:
        """Reconcile acts on what is committed at HEAD: the files that differ are named, and applied only with
        --allow-dirty. A folder outside any repository has no commit: it is applied as it is, with a warning."""
        if self.git.moved():  # git-sync's link leads to a new commit's worktree (the old one is removed): open that
            self.git = self.specs.git = GitSource(self.settings.specs_dir)
        if not self.git.available:
            return SpecSource(None, working_tree=True, repository=False)
        self.commit = self.git.head()  # HEAD may have moved since the last pass (a pull under --watch)
        status = self.git.uncommitted(self.settings.specs_dir)
        return SpecSource(self.commit, self.allow_dirty, tuple(status.files), untidy=status.other)

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
        source = self.spec_source()
        desired, bindings = self.desired(None, source)
        specs, policy = list(desired.specs), desired.policy
        self._policy = policy
        recorder = Recorder(
            self.settings, self.store, self.commit, self.provenance, self.airflow_url, policy=policy, bindings=bindings
        )
        self._tell(source, recorder, dry_run)
        gate = self._gate(desired, recorder.bindings, decide=True)
        decisions = assess(gate) if gate is not None else {}
        world = with_holds(self._observe(specs, policy, recorder.bindings, with_dry_runs=True), self.client, self.store)
        claim_scope(self.store, world.identity, policy, record=not dry_run)  # one store per team
        if not dry_run:  # expired stops, stops a resume the gate lets through names, hand pauses unpaused in Airflow
            lifting = resumable(specs, gate, decisions) if gate is not None else specs
            world = lift_due(world, lifting, self.store, recorder, self.settings.actor)
        world = replace(world, analysis=self.analyst.verdicts(specs, policy, world.now, write=not dry_run))
        refining = Refining(policy, specs, world, Consumers(self.client), self.observer, gate, decisions)
        refined = refine(planned(desired, world), refining, DECIDING)
        plan, recorder.approvals = refined.plan, dict(refined.approvals)
        check_reviewed(plan, plan_checksum, recorder)  # the steps keep the checksum `make_plan`'s plan had
        refused = [f"{i.spec}: {i.reason}" for i in refusals(plan)]
        if dry_run:
            return PassResult(
                plan, errors=plan_errors(plan), refused=refused, source=source, analysis=world.analysis, policy=policy
            )
        record_hand_stops(plan, world, self.store, recorder)
        by_name = {s.name: s for s in specs}
        plan, measured = record_outcomes(self.store, self.client, recorder, plan, by_name, now=world.now)
        applied = _apply(self.store, Applier(self.client, recorder, self.sleep), plan, by_name, world)
        with self.store.batch("recording observed phases"):
            recorder.phases(plan, by_name, skip={a.item.spec for a in applied})
        after = None
        if applied:  # re-observe (bindings from memory), so phases and status reflect what the changes did
            after, also = self._observed_after(desired, refining, applied, recorder, by_name)
            measured |= also
        cover_ended(
            self.client, recorder, by_name, self.clock(), measured
        )  # every spec this pass ended keeps its coverage
        recorder.findings(after or plan, by_name)
        current = after or plan  # the rehearsals, verifications and publish runs this pass's plan waits on
        self.stages.advance(
            due(specs, policy, current.items, world.stages), specs, world.stages, recorder, verified_ids(current)
        )
        NoteWriter(self.notes_client(), self.store).annotate(specs, policy, recorder)  # opt-in: `airflow_notes`
        created = {a.item.spec for a in applied if a.outcome == Outcome.CREATED}
        record_stuck(self.client, self.store, recorder, self.loaded, current, world, created, policy, self.clock)
        recorder.pass_done(plan, len(applied), self.clock())
        if gate is not None:  # before the commit is recorded: a change decided now is never decided by omission
            self.store.save_gate_decisions(_kept(decisions), gate.files, gate.scope)
        self.store.record_reconciled(self.commit if source.repository else None, desired.policy_text)
        # each queued spec version judged once and kept: shown only (a queued item is no decision)
        memo = kept(recorder.bindings)  # filled with what this pass judges
        after = refine(after or plan, replace(refining, memo=memo), (LOOK_AHEAD,)).plan
        for name, ahead in judged_now(memo, specs, recorder.bindings).items():
            recorder.keep(name, ahead=ahead)  # `status` and the page say it from there
        errors = plan_errors(plan) + [a.error for a in applied if a.error]
        done: list[tuple[Item, str]] = [(a.item, a.outcome) for a in applied]
        return PassResult(plan, done, errors, refused, after, source, analysis=world.analysis, policy=policy)

    def _observed_after(
        self,
        desired: Desired,
        refining: Refining,
        applied: Sequence[Applied],
        recorder: Recorder,
        by_name: Mapping[str, BackfillSpec],
    ) -> tuple[Plan, dict[str, Coverage | None]]:
        """The plan re-observed after the changes, its phases recorded (each held to its spec's coverage when it ends
        now), and the coverage measured of the specs it ends."""
        world, now, specs = refining.world, self.clock(), refining.specs
        after_world = self.observer.after(
            world,
            specs,
            recorder.bindings,
            intents=self.store.pending_creates(),
            now=now,
            changed=changed_dags(applied),
        )
        after_world = replace(after_world, analysis=world.analysis, rested=world.rested)  # analysis: once a pass
        again = replace(refining, world=after_world)
        # the same consumers: their reads of this pass are kept
        plan = refine(planned(desired, again.world), again, DECIDING).plan
        after, measured = at_end(self.client, plan, recorder.bindings, by_name, now)
        with self.store.batch("recording observed phases"):
            recorder.phases(after, by_name, skip=set())
        keep_coverage(recorder, measured)
        return after, measured

    def _gate(self, desired: Desired, bindings: dict[str, Binding], *, decide: bool) -> Gate | None:
        """What the approval gate at reconcile decides with (`commands/reconcile/gate.py`); None: not in git, nothing to
        judge. A reviewed merge is required when the policy at HEAD or the last reconciled one says so (a push
        that drops the key is no way around it)."""
        last, summarised = last_good_policy(self.store), self.specs.summarised
        require = bool(desired.policy.require_reviewed_merge) or bool(last and last.require_reviewed_merge)
        facts = PassFacts(self.loaded, desired.specs, bindings, self.store.stops(), require, self.evidence, summarised)
        return gather(self.git, self.store, self.settings.specs_dir, facts, decide=decide)


def check_reviewed(plan: Plan, checksum: str | None, recorder: Recorder) -> None:
    """A reviewed plan's checksum (`--plan-checksum`) must be this pass's, over a complete observation."""
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


def _kept(decisions: Mapping[str, GateDecision]) -> list[GateDecision]:
    return [decisions[path] for path in sorted(decisions)]


def planned(desired: Desired, world: World) -> Plan:
    """The plan of the World; one made with analysis verdicts carries the checksum of the plan without them (a
    reviewed checksum must not go stale because a gauge moved)."""
    plan = plan_desired(desired, world)
    if world.analysis is None:
        return plan
    return replace(plan, unmetered=plan_desired(desired, replace(world, analysis=None)).checksum())


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


def _apply(
    store: Store, applier: Applier, plan: Plan, by_name: Mapping[str, BackfillSpec], world: World
) -> list[Applied]:
    applied: list[Applied] = []
    for adopting, items in groupby(iter_changes(plan), key=lambda i: i.kind is Kind.ADOPT):
        # adoptions call nothing: a run of them is recorded in one transaction
        with store.batch("recording adoptions") if adopting else contextlib.nullcontext():
            applied += [applier.apply(item, by_name[item.spec], world) for item in items]
    return applied


def plan_errors(plan: Plan) -> list[str]:
    """One line per error: each spec's own, and each unobserved cause once (not once per spec or DAG)."""
    own = [f"{i.spec}: {i.reason}" for i in plan.items if i.error and i.kind is not Kind.REFUSE and not i.unobserved]
    return own + [message for kind, message in findings(plan) if kind == INCOMPLETE]
