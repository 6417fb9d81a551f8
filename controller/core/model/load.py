"""The load a backfill sets off that its own plan line does not show (pure): the DAGs its runs trigger through
the assets they emit (apache/airflow#52665: every backfilled run emits its tasks' asset events, so a DAG
scheduled on such an asset runs once per backfilled run), the pools its tasks take slots in, and the rows it
adds to Airflow's metadata database (runs × tasks), so a cleanup can be agreed before approval.

Read for a DAG with a planned create only; never part of `Plan.checksum()` (a consumer DAG added in Airflow
must not make a reviewed plan stale: the policy rule `asset_consumers` is what gates on it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeAlias

AssetConsumers: TypeAlias = Literal["warn", "require_downstream"]  # the policy rule's `asset_consumers`


@dataclass(frozen=True, slots=True)
class AssetTrigger:
    """An asset a task of the DAG produces (an outlet) and the other DAGs scheduled on it."""

    uri: str
    consumers: tuple[str, ...]  # sorted DAG ids


@dataclass(frozen=True, slots=True)
class PoolUse:
    name: str
    tasks: int  # the DAG's tasks that run in this pool
    slots: int | None  # the pool's slots; None: Airflow lists no such pool (those tasks are never queued)


@dataclass(frozen=True, slots=True)
class DagLoad:
    """What a DAG's runs set off beyond themselves; a part None is not known, `unknown` says why."""

    dag_id: str
    tasks: int | None = None
    assets: tuple[AssetTrigger, ...] | None = None
    pools: tuple[PoolUse, ...] | None = None
    unknown: tuple[str, ...] = ()  # why a part is not known, one line each
    assets_unknown: str | None = None  # of those lines, the one that says why the assets are not known

    @property
    def consumers(self) -> tuple[str, ...]:
        """Every DAG the runs trigger, sorted, once each."""
        return tuple(sorted({d for a in self.assets or () for d in a.consumers}))


def assets_of(dag_id: str, assets: Sequence[tuple[str, Sequence[str], Sequence[str]]]) -> tuple[AssetTrigger, ...]:
    """The assets `dag_id` produces with their consumers, from (uri, producing DAG ids, scheduled DAG ids)
    per asset: only those with a consumer other than the DAG itself, sorted by URI."""
    found = {
        uri: tuple(sorted(set(scheduled) - {dag_id}))
        for uri, producers, scheduled in assets
        if dag_id in producers and set(scheduled) - {dag_id}
    }
    return tuple(AssetTrigger(uri, consumers) for uri, consumers in sorted(found.items()))


def pools_of(task_pools: Sequence[str | None], slots: dict[str, int]) -> tuple[PoolUse, ...]:
    """The pools the DAG's tasks use (a task without one runs in `default_pool`), with each pool's slots."""
    counts: dict[str, int] = {}
    for pool in task_pools:
        counts[pool or "default_pool"] = counts.get(pool or "default_pool", 0) + 1
    return tuple(PoolUse(name, n, slots.get(name)) for name, n in sorted(counts.items()))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def load_lines(load: DagLoad, runs: int) -> list[str]:
    """The plan's lines for a create of `runs` runs on the DAG (empty when there is nothing to say)."""
    lines = [
        f"each run emits asset {a.uri} → triggers {', '.join(a.consumers)} (up to {_plural(runs, 'run')} each)"
        for a in load.assets or ()
    ]
    if load.pools:
        lines.append("pools: " + ", ".join(_pool_text(p) for p in load.pools))
    if load.tasks is not None:
        triggered = len(load.consumers) * runs
        more = f", plus up to {_plural(triggered, 'run')} of the DAGs it triggers" if triggered else ""
        rows = f"{_plural(runs, 'DAG run')} and {_plural(runs * load.tasks, 'task instance')}"
        product = f"{_plural(runs, 'run')} × {_plural(load.tasks, 'task')}"
        lines.append(f"metadata database: adds up to {rows} ({product}){more}")
    return lines + list(load.unknown)


def _pool_text(pool: PoolUse) -> str:
    tasks = _plural(pool.tasks, "task")
    if pool.slots is None:
        return f"{pool.name} (not in Airflow: its {tasks} will not be queued)"
    return f"{pool.name} {_plural(pool.slots, 'slot')} ({tasks})"


def load_json(load: DagLoad, runs: int) -> dict[str, Any]:
    """The plan JSON's `facts.load` of a create (keys only for what is known)."""
    found: dict[str, Any] = {}
    if load.assets is not None:
        found["assets"] = [{"uri": a.uri, "triggers": list(a.consumers), "runs_each": runs} for a in load.assets]
    if load.pools is not None:
        found["pools"] = [{"name": p.name, "slots": p.slots, "tasks": p.tasks} for p in load.pools]
    if load.tasks is not None:
        found["metadata"] = {"dag_runs": runs, "task_instances": runs * load.tasks, "tasks": load.tasks}
    if load.unknown:
        found["not_known"] = list(load.unknown)
    return found


def consumers_message(dag_id: str, load: DagLoad, unnamed: Sequence[str], rule: int, mode: AssetConsumers) -> str:
    """What the policy rule `asset_consumers` says of a spec whose downstream leaves out DAGs its runs trigger."""
    hit = [(a.uri, [d for d in a.consumers if d in unnamed]) for a in load.assets or ()]
    via = "; ".join(f"{uri} → {', '.join(dags)}" for uri, dags in hit if dags)
    return (
        f"each run of {dag_id} triggers {', '.join(unnamed)} through the assets it emits ({via}), and the spec's "
        f"downstream does not name {'it' if len(unnamed) == 1 else 'them'} (policy rule {rule + 1}: "
        f"asset_consumers: {mode})"
    )
