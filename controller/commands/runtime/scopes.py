"""One store per team: the store records the scope each Airflow login reconciles with, and refuses a
reconciler whose scope overlaps another login's (exit 2): two teams' controllers sharing one store would take
turns at one lease, adopt each other's history and report each other's specs as orphaned."""

from __future__ import annotations

import logging

from controller.adapters.store import Store
from controller.core.model.policy import Policy
from controller.core.plan.identity import Identity, shown
from controller.core.rules.scope import EVERY_DAG, conflict
from controller.errors import ScopeConflict

log = logging.getLogger(__name__)
DOC = 'README, "Several teams, one Airflow"; docs/least-privilege.md'


def claim_scope(store: Store, identity: Identity | None, policy: Policy, *, record: bool) -> None:
    """Refuse this reconciler when its scope overlaps another login's in this store; else record it (`record`)."""
    login = None if identity is None else identity.login
    if login is None:
        log.info("the Airflow login is not known (no JWT to read): the store's scope check is skipped")
        return
    scope = policy.scope or EVERY_DAG
    found = conflict(login, scope, store.recorded_scopes())
    if found is not None:
        other, shared = found
        where = policy.path or "the policy"
        raise ScopeConflict(
            f"this store already reconciles for Airflow login {shown(other)!r}, whose scope overlaps this "
            f"reconciler's (login {shown(login)!r}, scope {scope.text()} in {where}): both may touch {shared}",
            hint="one store and one Airflow login per team: point BACKFILLCTL_STORE_URL at this team's own store, "
            f"or make the two policies' `scope` disjoint ({DOC})",
        )
    if record:
        store.record_scope(login, scope.to_json())
