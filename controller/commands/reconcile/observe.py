"""Observe: what Airflow holds for the DAGs with work, as one `World` (backfills, details, runs, dry runs).

Independent DAGs are observed concurrently with a small bounded pool; the dry runs of the queue heads a
create would start are part of the observation, so the plan is made once from a complete world.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from functools import partial

from controller.adapters.airflow import AirflowClient
from controller.commands.reconcile.dryrun import DryRunner
from controller.commands.reconcile.history import HistoryRead, KeptHistory
from controller.commands.reconcile.summaries import SummaryReader
from controller.commands.runtime.concurrency import alongside, concurrently
from controller.core.model.airflow import Backfill, DagInfo, RunSummary
from controller.core.model.binding import Binding, Claim
from controller.core.model.drain import DrainHold
from controller.core.model.load import DagLoad, pools_of
from controller.core.model.policy import Policy
from controller.core.model.spec import BackfillSpec
from controller.core.model.stages import Stage, StageRecord
from controller.core.plan.drains import draining, with_drain
from controller.core.plan.identity import Identity, creator_of
from controller.core.plan.load import creates, with_load
from controller.core.plan.matching import chunks_among, matched
from controller.core.plan.queue import dry_runs_needed
from controller.core.plan.reads import bound_only, has_backfill, owners_of, runs_wanted
from controller.core.plan.values import Plan
from controller.core.plan.world import DagObservation, DryRun, World, closest_ids
from controller.errors import AirflowError, AirflowNotFound

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Created:
    """A create Airflow answered: the new backfill, and the runs it made (None: not known, read them)."""

    backfill: Backfill
    made: RunSummary | None = None


class Observer:
    def __init__(self, client: AirflowClient) -> None:
        self.client = client
        self.dry_runs = DryRunner(client)
        self.runs = SummaryReader(client)  # each backfill's own runs by state
        self.identity: Identity | None = None  # this controller's Airflow login (read once, after the preflight)
        self.history: KeptHistory | None = None  # the store's backfill history (None: every read lists it whole)

    def world(
        self,
        specs: Sequence[BackfillSpec],
        policy: Policy,
        bindings: Mapping[str, Binding],
        intents: Mapping[str, datetime],
        now: datetime,
        *,
        with_dry_runs: bool = True,
        stages: Mapping[tuple[str, Stage], StageRecord] | None = None,
        claims: Mapping[str, Claim] | None = None,
    ) -> World:
        """`stages`: what the stage gates decide by (a spec awaiting its rehearsal needs no dry run yet); `claims`:
        of finished specs at rest on the DAGs read (`World.claims`)."""
        if self.identity is None or self.identity.login is None:  # known once the client has its token (preflight)
            self.identity = identity_of(self.client)
        identity = self.identity
        claims = claims or {}
        observations, listed = self._observations(specs, bindings, claims)
        by_name = {s.name: s for s in specs}
        dry_runs: dict[str, DryRun] = {}
        scheduler = self.client.scheduler_health() if policy.scheduler_guard.pause_when_unhealthy else None
        while True:  # a head with nothing to reprocess is settled at once, so the next spec becomes head
            airflow = self.client.known_capabilities
            world = World(
                observations,
                bindings,
                dict(dry_runs),
                intents,
                now=now,
                scheduler=scheduler,
                airflow=airflow,
                stages=stages or {},
                identity=identity,
                claims=claims,
            )
            needed = [n for n in dry_runs_needed(specs, policy, world) if n not in dry_runs] if with_dry_runs else []
            if not needed:
                return world
            heads = [by_name[n] for n in needed if observations[by_name[n].dag_id].error is None]
            dry_run = partial(self._dry_run, policy=policy, bindings=bindings, observations=observations)
            details, ran = self._heads(heads, observations, listed, dry_run)
            observations.update(details)
            dry_runs.update({s.name: ran[s.name] for s in heads if observations[s.dag_id].error is None})

    def _heads(
        self,
        heads: Sequence[BackfillSpec],
        observations: Mapping[str, DagObservation],
        listed: set[str],
        dry_run: Callable[[BackfillSpec], DryRun],
    ) -> tuple[dict[str, DagObservation], dict[str, DryRun]]:
        """The details of the heads' DAGs (`_rerun_choices`) and the heads' dry runs, read at once: the details
        only add the DAG's rerun choice, which no dry run needs."""
        by_name = {s.name: s for s in heads}
        return alongside(
            lambda: self._rerun_choices(observations, listed, heads),
            lambda: concurrently(by_name, lambda n: dry_run(by_name[n])),
        )

    def load(self, plan: Plan, policy: Policy) -> Plan:
        """The plan with the load of each DAG it creates a backfill on: per DAG its tasks and the
        assets they emit (two calls), and the pools once per pass; nothing when nothing is created. A create
        that drains its DAG also says what it holds back (the DAG's details: its schedule and `catchup`)."""
        plan = with_drain(plan, concurrently(draining(plan), partial(drain_hold, self.client)))
        dag_ids = creates(plan)
        if not dag_ids:
            return plan
        try:
            slots: dict[str, int] | str = self.client.pool_slots()
        except AirflowError as exc:
            slots = f"pools: not known ({exc.message})"
        return with_load(plan, concurrently(dag_ids, lambda dag_id: dag_load(self.client, dag_id, slots)), policy)

    def _dry_run(
        self,
        spec: BackfillSpec,
        policy: Policy,
        bindings: Mapping[str, Binding],
        observations: Mapping[str, DagObservation],
    ) -> DryRun:
        """A new spec's dry run, or a chunked spec's next chunk (a `select` spec's lost sub-ranges: its whole range)."""
        progress = binding.progress if (binding := bindings.get(spec.name)) is not None else None
        if progress is not None and not (spec.select is not None and progress.sub_ranges is None):
            return self.dry_runs.next_chunk(spec, progress, policy, observations.get(spec.dag_id))
        return self.dry_runs.dry_run(spec, observations)

    def dags(self, specs: Sequence[BackfillSpec], bindings: Mapping[str, Binding]) -> dict[str, DagObservation]:
        """Every DAG with unfinished work: a live spec, or a deleted spec whose backfill may still run."""
        return self._observations(specs, bindings)[0]

    def _observations(
        self, specs: Sequence[BackfillSpec], bindings: Mapping[str, Binding], claims: Mapping[str, Claim] | None = None
    ) -> tuple[dict[str, DagObservation], set[str]]:
        """`dags`, and the DAGs whose infos came from the listing (which has no `rerun_with_latest_version`)."""
        names = {s.name for s in specs}
        live = {s.dag_id for s in specs if not (s.name in bindings and bindings[s.name].phase.terminal)}
        live |= {b.dag_id for n, b in bindings.items() if n not in names and not b.phase.terminal and b.backfill_id}
        wanted = live - {s.dag_id for s in specs if s.select is not None}  # select: its latest code, from details
        listed = listed_infos(self.client, wanted)
        with reading(self.history, self.client, live, specs, bindings) as history:
            observed = concurrently(
                sorted(live), lambda d: self._dag(d, specs, bindings, listed.get(d), history, claims=claims)
            )
        return with_similar(self.client, observed), set(listed)

    def _rerun_choices(
        self, observations: Mapping[str, DagObservation], listed: set[str], creating: Sequence[BackfillSpec]
    ) -> dict[str, DagObservation]:
        """The observations, read again with their details, of each listed DAG a create will start on: for the
        DAG's own `rerun_with_latest_version` (the listing does not carry it; a spec that sets
        `run_on_latest_version` needs none); once per DAG, and only where the release has the field. `listed`
        loses the DAGs read; a failed read leaves the DAG unobserved (its create would send a guess)."""
        caps = self.client.known_capabilities
        if caps is None or not caps.rerun_with_latest_version:
            return {}
        wanted = sorted({s.dag_id for s in creating if s.run_on_latest_version is None and s.dag_id in listed})
        listed.difference_update(wanted)
        return concurrently(wanted, lambda dag_id: self._details(observations[dag_id]))

    def _details(self, observed: DagObservation) -> DagObservation:
        try:
            return replace(observed, info=self.client.dag(observed.dag_id, with_tasks=False))
        except AirflowError as exc:
            return DagObservation(observed.dag_id, None, error=f"DAG details: {exc.message}")

    def after(
        self,
        before: World,
        specs: Sequence[BackfillSpec],
        bindings: Mapping[str, Binding],
        *,
        intents: Mapping[str, datetime],
        now: datetime,
        changed: Mapping[str, Sequence[Created | None]],
    ) -> World:
        """The world after this pass's changes (`changed`: DAG → what each change created, None when it
        created nothing or its answer was not a backfill). Only the DAGs the changes touched are read again,
        with the infos already read; a DAG whose every change was a create Airflow answered is not listed
        again (those answers are its new backfills), and their runs are the ones the creates made (the dry
        run's dates, queued): only a create whose runs are not known has them read."""

        def again(dag_id: str) -> DagObservation:
            prior, created = before.observations.get(dag_id), changed[dag_id]
            if prior is None or prior.error is not None or prior.info is None:
                return self._dag(dag_id, specs, bindings, history=history, claims=before.claims)
            if created and all(c is not None for c in created):
                made = [c for c in created if c is not None]
                new = tuple(c.backfill for c in made)
                listed = prior.backfills + new
                known = {c.backfill.id: c.made for c in made if c.made is not None}
                unknown = tuple(b for b in new if b.id not in known)
                owners = owners_of(bindings, specs, listed, before.claims)
                runs, owned = self.runs.summaries(
                    dag_id, unknown, listed, bindings, owners, partitioned=prior.info.partitioned
                )
                return DagObservation(
                    dag_id, prior.info, listed, {**prior.runs, **known, **runs}, owned={**prior.owned, **owned}
                )
            return self._dag(dag_id, specs, bindings, prior.info, history, claims=before.claims)

        with reading(self.history, self.client, changed, specs, bindings) as history:
            observations = {**before.observations, **concurrently(sorted(changed), again)}
        return World(
            observations,
            dict(bindings),
            {},
            intents,
            now=now,
            scheduler=before.scheduler,
            airflow=before.airflow,
            holds=before.holds,
            stages=before.stages,
            identity=before.identity,
            claims=before.claims,
        )

    def _dag(
        self,
        dag_id: str,
        specs: Sequence[BackfillSpec],
        bindings: Mapping[str, Binding],
        info: DagInfo | None = None,
        history: HistoryRead | None = None,
        *,
        claims: Mapping[str, Claim] | None = None,
    ) -> DagObservation:
        try:
            backfills = backfills_of(self.client, dag_id, bound_only(dag_id, specs, bindings), history)
            if info is None:
                try:
                    info = self.client.dag(dag_id, with_tasks=False)  # the dry run enforces depends_on_past
                except AirflowNotFound:
                    info = None
            partitioned = info is not None and info.partitioned
            backfills = self._creators(dag_id, backfills, specs, bindings, claims or {}, partitioned=partitioned)
            wanted = runs_wanted(dag_id, backfills, specs, bindings)
            owners = owners_of(bindings, specs, backfills, claims)
            runs, owned = self.runs.summaries(dag_id, wanted, backfills, bindings, owners, partitioned=partitioned)
        except AirflowError as exc:
            return DagObservation(dag_id, None, error=exc.message)
        return DagObservation(dag_id, info, backfills, runs, owned=owned)

    def _creators(
        self,
        dag_id: str,
        backfills: tuple[Backfill, ...],
        specs: Sequence[BackfillSpec],
        bindings: Mapping[str, Binding],
        claims: Mapping[str, Claim],
        *,
        partitioned: bool,
    ) -> tuple[Backfill, ...]:
        """The creator of each backfill the store does not bind that blocks the DAG's queue (active) or that a spec
        could adopt (one page of its newest runs each): another login's is owned elsewhere (`core.plan.identity`).
        Nothing is read when the identity decides nothing (its login unknown, or Airflow 3.4's display names)."""
        identity = self.identity
        if identity is None or identity.login is None or not identity.by_runs:
            return backfills
        bound = {i for b in bindings.values() for i in (*b.backfills, b.backfill_id) if i is not None}
        bound.update(*(c.owned for c in claims.values()))
        unbound = [s for s in specs if s.dag_id == dag_id and not has_backfill(bindings.get(s.name))]
        candidates = {b.id for _s, b in matched(unbound, backfills)} | chunks_among(unbound, backfills)
        found = []
        for backfill in backfills:
            if backfill.id not in bound and (backfill.active or backfill.id in candidates):
                runs = self.client.newest_runs(dag_id, backfill.from_date, backfill.to_date, partitioned=partitioned)
                backfill = replace(backfill, creator=creator_of(backfill, runs))  # noqa: PLW2901
            found.append(backfill)
        return tuple(found)


def listed_infos(client: AirflowClient, dag_ids: Iterable[str]) -> dict[str, DagInfo]:
    """The DAG infos the listing holds; a listing Airflow refuses leaves each DAG to its own details. One DAG is
    looked up by its details, unless the listing's first page is at hand (the preflight's: no call)."""
    wanted = list(dag_ids)
    if not wanted or (len(wanted) == 1 and not client.dag_listing_at_hand):
        return {}
    try:
        return client.dag_infos(wanted)
    except AirflowError as exc:
        log.info("DAG listing unavailable (%s); reading each DAG's details", exc.message)
        return {}


def with_similar(client: AirflowClient, observed: dict[str, DagObservation]) -> dict[str, DagObservation]:
    """A DAG that does not exist gets the existing ids closest to its own, among every DAG id: the listing this pass
    read when it read it whole, else one listing (only when a DAG is missing)."""
    missing = [o for o in observed.values() if o.info is None and o.error is None]
    if not missing:
        return observed
    try:
        known = client.dag_ids()
    except AirflowError as exc:
        log.info("DAG listing unavailable (%s); no suggestion for a missing DAG", exc.message)
        return observed
    return observed | {o.dag_id: replace(o, similar=closest_ids(o.dag_id, known)) for o in missing}


@contextlib.contextmanager
def reading(
    kept: KeptHistory | None,
    client: AirflowClient,
    dag_ids: Iterable[str],
    specs: Sequence[BackfillSpec],
    bindings: Mapping[str, Binding],
) -> Iterator[HistoryRead | None]:
    """The kept history of the DAGs whose whole backfill history the plan needs (a spec may adopt one from any
    time), read before the pool, and what the pool's reads taught, written after it: by this thread only."""
    wanted = [d for d in dag_ids if bound_only(d, specs, bindings) is None]
    read = kept.read(client, wanted) if kept is not None and wanted else None
    yield read
    if kept is not None and read is not None:
        kept.write(read)


def backfills_of(
    client: AirflowClient, dag_id: str, newest: frozenset[int] | None, history: HistoryRead | None
) -> tuple[Backfill, ...]:
    """The DAG's backfills: the newest ones its bound specs need (`newest`), else its whole history, which with a
    kept history is the kept backfills and those newer than its watermark."""
    if newest is None and history is not None:
        return tuple(history.backfills(dag_id))
    return tuple(client.list_backfills(dag_id, newest=newest))


def identity_of(client: AirflowClient) -> Identity:
    """This controller's Airflow login: its token's `sub` (after the preflight's login with a user name and password
    too). Where the runs' creator field is a display name (the capability `user_display_name`, Airflow 3.4+), it is
    never compared (`by_runs` False): the store's bindings and the create parameters decide alone."""
    claims = client.token_claims()
    sub = None if claims is None else claims.get("sub")
    caps = client.known_capabilities
    by_runs = caps is None or not caps.user_display_name
    return Identity(sub if isinstance(sub, str) and sub else None, by_runs)


def drain_hold(client: AirflowClient, dag_id: str) -> DrainHold:
    """What a drain of `dag_id` holds back, from its details; a failed read says why it is not known."""
    try:
        return DrainHold.of(dag_id, client.dag(dag_id, with_tasks=False))
    except AirflowError as exc:
        return DrainHold.of(dag_id, None, f"its details could not be read: {exc.message}")


def dag_load(client: AirflowClient, dag_id: str, slots: dict[str, int] | str | None) -> DagLoad:
    """One DAG's load: its assets and their consumers, and with `slots` (or why they are not known) its tasks'
    pools and count; a part whose call fails is not known, and the line says why."""
    unknown: list[str] = []
    try:
        assets, not_read = client.produced_assets(dag_id)
    except AirflowError as exc:
        assets, not_read = None, f"assets: not known ({exc.message})"
    unknown += [not_read] if not_read else []
    assets_unknown = not_read if assets is None else None
    if slots is None:
        return DagLoad(dag_id, assets=assets, unknown=tuple(unknown), assets_unknown=assets_unknown)
    try:
        task_pools = client.task_pools(dag_id)
    except AirflowError as exc:
        unknown.append(f"tasks and pools: not known ({exc.message})")
        return DagLoad(dag_id, assets=assets, unknown=tuple(unknown), assets_unknown=assets_unknown)
    pools = pools_of(task_pools, slots) if isinstance(slots, dict) else None
    unknown += [slots] if isinstance(slots, str) else []
    return DagLoad(dag_id, len(task_pools), assets, pools, tuple(unknown), assets_unknown)
