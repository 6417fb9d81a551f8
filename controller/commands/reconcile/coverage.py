"""Version coverage read from Airflow (read only): measured once when a spec ends (reconcile keeps it in the
binding: status, the status page and the completion notification show it), read again by `report` and by
`report NAME --check` (`commands/verbs/report.py`), which exits 1 when it does not hold.

The reads are the change record's own: the DAG's details (its latest version: the target) and every run of the
spec's range, a page of 100 at a time; never a call per run.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import TYPE_CHECKING

from controller.adapters.airflow import AirflowClient
from controller.adapters.store import Store
from controller.commands.reconcile.record import Recorder
from controller.core.model.airflow import DagInfo, DagRun
from controller.core.model.binding import Binding
from controller.core.model.coverage import Coverage
from controller.core.model.ranges import expand
from controller.core.model.spec import BackfillSpec
from controller.core.plan.outcome import covered_outcomes
from controller.core.plan.values import Plan
from controller.core.rules.coverage import changed_since, coverage, judged
from controller.errors import AirflowError, AirflowNotFound

if TYPE_CHECKING:  # a pass measures coverage; only `report` builds a change record
    from controller.core.render.change_record import ChangeRecord

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class RangeView:
    """What Airflow shows of a spec's range: the DAG (None: not found) and every run, with its run type."""

    info: DagInfo | None
    runs: list[tuple[DagRun, str]]


def read_range(client: AirflowClient, spec: BackfillSpec) -> RangeView:
    """The DAG's details (one call) and every run of the range by logical or partition date (paged)."""
    try:
        info = client.dag(spec.dag_id, with_tasks=False)
    except AirflowNotFound:
        info = None
    partitioned = info is not None and info.partitioned
    runs = client.runs_with_types(spec.dag_id, spec.from_date, spec.to_date, partitioned=partitioned)
    return RangeView(info, runs)


def again(record: ChangeRecord, view: RangeView) -> ChangeRecord:
    """A finished spec's record with its coverage read now, against the target recorded when it ended, and the
    intervals not covered now that were then; an unfinished spec's record as it is (coverage is an end's)."""
    if not record.outcome.terminal:
        return record
    stored = record.coverage
    latest = view.info.latest_version if view.info is not None else None
    runs = [run for run, _ in view.runs]
    now = judged(runs, _expand(record), stored=stored, latest=latest, ended=_ended(record))
    if now is None:
        return record
    changed = changed_since(stored, now) if stored is not None else ()
    return replace(record, coverage=now, coverage_changed=changed)


def _expand(record: ChangeRecord) -> list[datetime]:
    return expand(record.own_dates or ())


def _ended(record: ChangeRecord) -> datetime | None:
    """When the spec ended: its last terminal audit record's time (None: not recorded)."""
    try:
        return None if record.completed_at is None else datetime.fromisoformat(record.completed_at)
    except ValueError:
        return None


def at_end(
    client: AirflowClient,
    plan: Plan,
    bindings: Mapping[str, Binding],
    specs: Mapping[str, BackfillSpec],
    now: datetime,
) -> tuple[Plan, dict[str, Coverage | None]]:
    """The coverage of each spec the plan ends (terminal now, bound but not recorded terminal yet), measured before
    its outcome is recorded (None: nothing to judge by, or the read failed: not read again this pass), and the plan
    with each `select` spec's outcome held to it (`covered_outcome`): the audit record and its notification say the
    outcome that stays."""
    ending = [
        binding
        for item in plan.items
        if item.phase.terminal and (binding := bindings.get(item.spec)) is not None and not binding.phase.terminal
    ]
    measured: dict[str, Coverage | None] = dict.fromkeys(b.spec_name for b in ending)
    measured |= measure_ended(client, ending, specs, now) if ending else {}
    return covered_outcomes(plan, measured), measured


def measure_ended(
    client: AirflowClient, ended: Iterable[Binding], specs: Mapping[str, BackfillSpec], now: datetime
) -> dict[str, Coverage]:
    """The coverage of each spec that ended this pass, measured once at its end against the DAG's latest version:
    per DAG, its details and its runs over the ended specs' joint range are read once (specs adopted together after
    a lost store cost one read). A read that fails is logged; the record then reads coverage against the DAG's
    latest version when it is shown."""
    by_dag: dict[str, list[tuple[BackfillSpec, Binding]]] = {}
    for binding in ended:
        spec = specs.get(binding.spec_name)
        if spec is not None and binding.backfill_id is not None:
            by_dag.setdefault(spec.dag_id, []).append((spec, binding))
    measured: dict[str, Coverage] = {}
    for dag_id, ending in by_dag.items():
        try:
            measured |= _at_end(client, dag_id, ending, now)
        except AirflowError as exc:
            log.warning("version coverage of %s not measured at its end: %s", dag_id, exc.message)
    return measured


def _at_end(
    client: AirflowClient, dag_id: str, ending: list[tuple[BackfillSpec, Binding]], now: datetime
) -> dict[str, Coverage]:
    try:
        info = client.dag(dag_id, with_tasks=False)
    except AirflowNotFound:
        return {}
    latest = info.latest_version
    if latest is None:  # Airflow names no version: nothing to judge against (the runs are not read)
        return {}
    first, last = min(s.from_date for s, _ in ending), max(s.to_date for s, _ in ending)
    runs = [run for run, _ in client.runs_with_types(dag_id, first, last, partitioned=info.partitioned)]
    found = {}
    for spec, binding in ending:
        own = binding.created.own_dates if binding.created is not None else None
        inside = [r for r in runs if spec.from_date <= (r.logical_date or r.partition_date or first) <= spec.to_date]
        # (a run with neither date is no interval: coverage leaves it out)
        found[spec.name] = coverage(inside, latest, own or (), ended=now)
    return found


# --- the pass's bookkeeping: outcomes held to their coverage, and every ended spec's kept ----------------


def record_outcomes(
    store: Store,
    client: AirflowClient,
    recorder: Recorder,
    plan: Plan,
    by_name: Mapping[str, BackfillSpec],
    *,
    now: datetime,
) -> tuple[Plan, dict[str, Coverage | None]]:
    """The outcomes the plan observed, stored before its changes, each held to the version coverage of its spec,
    measured before this pass's creates (the next spec on its queue) add runs to its range; the plan as recorded, and
    the coverage measured."""
    plan, measured = at_end(client, plan, recorder.bindings, by_name, now)
    with store.batch("recording outcomes"):
        recorder.outcomes(plan, by_name)
    keep_coverage(recorder, measured)
    return plan, measured


def keep_coverage(recorder: Recorder, measured: Mapping[str, Coverage | None]) -> None:
    """Keep the coverage measured of each spec that has ended and keeps none yet (status, the page and its
    notification show it)."""
    for binding in recorder.ended():
        found = measured.get(binding.spec_name)
        if found is not None and binding.coverage is None:
            recorder.keep(binding.spec_name, coverage=found)


def cover_ended(
    client: AirflowClient,
    recorder: Recorder,
    by_name: Mapping[str, BackfillSpec],
    now: datetime,
    measured: Mapping[str, Coverage | None],
) -> None:
    """Every spec this pass ended keeps its coverage: as measured at its end, else (it ended another way) read now;
    a spec measured with nothing to keep is not read again."""
    missing = [b for b in recorder.ended() if b.coverage is None and b.spec_name not in measured]
    keep_coverage(recorder, {**measured, **measure_ended(client, missing, by_name, now)} if missing else measured)
