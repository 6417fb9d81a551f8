"""The backfills on a DAG that are not its specs' (pure): another Airflow login's (owned elsewhere: never adopted)
and unmanaged ones, said as who holds the DAG's slot and as findings of the queue."""

from __future__ import annotations

from collections.abc import Sequence

from controller.core.model.airflow import Backfill
from controller.core.model.spec import BackfillSpec
from controller.core.plan.identity import Identity, elsewhere, owned_elsewhere, shown
from controller.core.plan.matching import matches
from controller.core.plan.values import Finding, FindingKind
from controller.core.plan.world import Context


def stranger(backfill: Backfill, identity: Identity) -> str:
    """Who holds the DAG's slot when no spec of this queue does: another login's backfill, or an unmanaged one."""
    login = elsewhere(backfill, identity)
    return (
        f"unmanaged backfill #{backfill.id}"
        if login is None
        else f"a backfill owned elsewhere (created by {shown(login)})"
    )


def not_adopted(ctx: Context, queue: Sequence[BackfillSpec]) -> list[Finding]:
    """Another login's backfill with a spec's parameters is never adopted, after a lost store neither: said once."""
    found = []
    for spec in queue:
        for backfill in ctx.obs.backfills:
            login = elsewhere(backfill, ctx.world.identity)
            if login is not None and backfill.id not in ctx.taken and matches(spec, backfill):
                message = (
                    f"{owned_elsewhere(backfill, login)} has the parameters of spec {spec.name}: not adopted, it is "
                    "another controller's (this controller adopts only the backfills its own Airflow login made)"
                )
                found.append(Finding(FindingKind.UNMANAGED, ctx.dag_id, message, spec.name, backfill.id))
    return found


def unmanaged(ctx: Context) -> list[Finding]:
    """Each active backfill no spec of the queue holds: it blocks the queue, and backfillctl never touches it."""
    found = []
    for backfill in ctx.obs.backfills:
        if not backfill.active or backfill.id in ctx.taken:
            continue
        login = elsewhere(backfill, ctx.world.identity)
        what = f"unmanaged active backfill #{backfill.id}" if login is None else owned_elsewhere(backfill, login)
        message = f"{what} blocks this DAG's queue; backfillctl never touches it"
        found.append(Finding(FindingKind.UNMANAGED, ctx.dag_id, message, None, backfill.id))
    return found
