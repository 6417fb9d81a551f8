"""Stuck: a pass's last finding, made before its final record. A backfill whose runs stay queued with none running
past the policy's `notify.stuck_after_minutes` (a cancelled one's queued runs at once: they never start) is audited
as a `stuck` finding, once per backfill and cause, and so notified.

One call per candidate (its queued runs, read concurrently); a backfill created in this pass cannot be stuck yet,
and the scheduler's health is read only when something is stuck (it names the cause). Never stops a pass.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime

from controller.adapters.airflow import AirflowClient
from controller.adapters.store import Store
from controller.commands.reconcile.record import Recorder
from controller.commands.runtime.concurrency import POOL
from controller.core.audit.vocabulary import Outcome
from controller.core.checks.loaded import LoadedSpec
from controller.core.model.guards import SchedulerHealth
from controller.core.model.policy import Policy
from controller.core.plan import stuck
from controller.core.plan.values import Item, Plan
from controller.core.plan.world import World
from controller.errors import ControllerError

log = logging.getLogger(__name__)


def record_stuck(  # noqa: PLR0917 - the pass's reads, its record, and what it created
    client: AirflowClient,
    store: Store,
    recorder: Recorder,
    loaded: Mapping[str, LoadedSpec],
    plan: Plan,
    world: World,
    created: Collection[str],
    policy: Policy,
    clock: Callable[[], datetime],
) -> None:
    """Audit (and so notify) each backfill of `plan` stuck now; a failed read ends the check for this pass."""
    threshold, now = policy.notify.stuck_after_minutes, clock()
    since = {b.id: b.created_at for o in world.observations.values() for b in o.backfills}
    health: SchedulerHealth | None = None
    try:
        items = [
            i
            for i in stuck.candidates(plan)
            if i.spec not in created
            and not stuck.too_young(since.get(i.backfill_id or 0), now, stuck.threshold_of(i, threshold))
        ]
        recorded = store.recorded_findings() if items else {}
        with ThreadPoolExecutor(max_workers=max(1, min(POOL, len(items))), thread_name_prefix="stuck") as pool:
            reads = [pool.submit(_queued, client, item) for item in items]
            for item, read in zip(items, reads, strict=True):
                queued, oldest = read.result()  # a failed read stops here, after the candidates before it
                if not stuck.overdue(queued, oldest, now, stuck.threshold_of(item, threshold)):
                    continue
                health = health or client.scheduler_health()
                found = stuck.find_stuck(
                    item, queued, oldest, plan, health=health, now=now, threshold_minutes=threshold
                )
                if found is not None:
                    _audit(recorder, loaded, found, found.message(threshold), recorded)
    except ControllerError as exc:
        log.warning("stuck check skipped this pass: %s", exc.message)


def _queued(client: AirflowClient, item: Item) -> tuple[int, datetime | None]:
    source = item.source
    if source is not None:  # a spec's backfill covers the spec's range
        return client.queued_runs(item.dag_id, source.from_date, source.to_date)
    backfill = client.get_backfill(item.backfill_id or 0)
    return client.queued_runs(backfill.dag_id, backfill.from_date, backfill.to_date)


def _audit(
    recorder: Recorder,
    loaded: Mapping[str, LoadedSpec],
    found: stuck.Stuck,
    message: str,
    recorded: Mapping[tuple[str, str, int | None], str],
) -> None:
    """Through the pass's recorder, as every finding is (the spec as this pass loaded it: its receivers)."""
    spec = loaded.get(found.spec)
    written = recorder.finding(
        Outcome.STUCK,
        found.dag_id,
        message,
        spec_name=found.spec,
        backfill_id=found.backfill_id,
        spec=spec.spec if spec is not None else None,
        recorded=recorded,
    )
    if written:
        log.warning("stuck: %s: %s", found.spec, message, extra={"spec": found.spec, "dag": found.dag_id})
