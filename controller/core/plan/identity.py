"""Which backfills are this controller's by identity (pure): several teams share one Airflow, each controller with
its own Airflow login and its own store.

Adoption after a lost store, the queue and drift consider only backfills this controller's login made; one made by
another login is "owned elsewhere (created by LOGIN)": it blocks its DAG's queue like an unmanaged backfill and is
never adopted, even when its parameters are a spec's. Airflow's backfill answer names no creator; the runs its
create made do (`triggering_user_name`, the token's `sub` on 3.1-3.3). On 3.4 that field is the user's display
name, which is no identity: there `Identity.by_runs` is False and only the store's bindings and the create
parameters decide (`elsewhere` is the one test to switch).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from controller.core.documents.escaping import plain
from controller.core.model.airflow import Backfill, DagRun
from controller.core.plan.ownership import CREATE_SPAN

SHOWN = 100  # the longest login shown; Airflow's user names are short, anything longer is cut


@dataclass(frozen=True, slots=True)
class Identity:
    """This controller's Airflow login (None: not known, nothing is decided by identity), and whether the runs'
    `triggering_user_name` names logins (Airflow 3.1-3.3) or display names (3.4: never compared)."""

    login: str | None = None
    by_runs: bool = True


NO_IDENTITY = Identity()


def creator_of(backfill: Backfill, runs: Sequence[DagRun]) -> str | None:
    """The login the backfill's create made its runs as: the `triggering_user_name` most of the runs queued in its
    creation window name (from `created_at`, within CREATE_SPAN, not after it completed); None: no such run names
    one (a create that only re-ran older runs keeps their names, which are not its creator's)."""
    end = backfill.created_at + CREATE_SPAN
    if backfill.completed_at is not None:
        end = min(end, backfill.completed_at)
    names = Counter(
        r.triggering_user_name
        for r in runs
        if r.triggering_user_name and r.queued_at is not None and backfill.created_at <= r.queued_at <= end
    )
    return min(names, key=lambda name: (-names[name], name)) if names else None


def elsewhere(backfill: Backfill, identity: Identity) -> str | None:
    """The one identity test: the login that made the backfill when it is not this controller's (None: ours, or
    not known). On 3.4 (`by_runs` False) it is never decided here: the store's bindings and the create parameters
    alone say what is ours."""
    if not identity.by_runs or identity.login is None or backfill.creator is None:
        return None
    return None if backfill.creator == identity.login else backfill.creator


def shown(login: str) -> str:
    """A login as status, plans and audit records show it: one plain line, cut to SHOWN characters."""
    text = plain(login).strip()
    return text[:SHOWN] + ("..." if len(text) > SHOWN else "")


def owned_elsewhere(backfill: Backfill, login: str) -> str:
    """`backfill #7 owned elsewhere (created by team-b)`."""
    return f"backfill #{backfill.id} owned elsewhere (created by {shown(login)})"
