"""Where each secret of the workflows lives, which job reads it and what it needs: the one table (pure data).

docs/least-privilege.md shows it, the README `backfillctl init` writes shows it, and every error a workflow prints
about a secret names the place this table gives (tests/test_secret_places.py holds all three to it).

The PR check's read-only Airflow login has names of its own (`BACKFILLCTL_PLAN_…`) and is a set of repository
secrets: its job runs in no environment, so it can read no environment's secrets. The reconciler's are secrets of
the environment, restricted to the protected branch. Separate names also keep the reconcile job from falling back
to the plan's login: a called job in an environment reads the environment's secret when it is set, and otherwise
the value its caller passed, which is the repository's secret of that name.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Place(StrEnum):
    repository = "repository"
    environment = "environment"


@dataclass(frozen=True, slots=True)
class SecretPlace:
    names: tuple[str, ...]  # one login: the alternatives it may be given as
    place: Place
    read_by: tuple[tuple[str, tuple[str, ...]], ...]  # (workflow, its steps that get the value)
    needs: str  # the Airflow role (or what else the value must allow)

    @property
    def shown_names(self) -> str:
        return " / ".join(f"`{name}`" for name in self.names)

    @property
    def shown_readers(self) -> str:
        return "; ".join(f"{job}: {', '.join(f'`{s}`' for s in steps)}" for job, steps in self.read_by)


PR, RECONCILE, STOP = "PR check", "reconcile", "stop"
_PLAN_ROLE = (
    "a login of its own: SimpleAuthManager `user` (Airflow authorises the dry run like a create), FAB the "
    "`backfillctl` role"
)
_RECONCILER_ROLE = "the reconciler's own login: SimpleAuthManager `user`, FAB the `backfillctl` role"
_LOGIN = "USERNAME", "PASSWORD", "TOKEN"
SECRETS = (
    SecretPlace(("BACKFILLCTL_PLAN_AIRFLOW_URL",), Place.repository, ((PR, ("plan",)),), "—"),
    SecretPlace(
        tuple(f"BACKFILLCTL_PLAN_AIRFLOW_{part}" for part in _LOGIN), Place.repository, ((PR, ("plan",)),), _PLAN_ROLE
    ),
    SecretPlace(
        ("BACKFILLCTL_STORE_URL",),
        Place.environment,
        ((RECONCILE, ("evidence", "reconcile", "status", "audit")), (STOP, ("stop",))),
        "— (a database user with rights on backfillctl's tables only)",
    ),
    SecretPlace(
        ("BACKFILLCTL_AIRFLOW_URL",), Place.environment, ((RECONCILE, ("reconcile", "status")), (STOP, ("stop",))), "—"
    ),
    SecretPlace(
        tuple(f"BACKFILLCTL_AIRFLOW_{part}" for part in _LOGIN),
        Place.environment,
        ((RECONCILE, ("reconcile", "status")), (STOP, ("stop",))),
        _RECONCILER_ROLE,
    ),
    SecretPlace(
        ("BACKFILLCTL_AUDIT_KEY",),
        Place.environment,
        ((RECONCILE, ("reconcile", "audit")), (STOP, ("stop",))),
        "— (optional: keys the audit chain)",
    ),
    SecretPlace(
        ("BACKFILLCTL_ORG_READ_TOKEN",),
        Place.environment,
        ((STOP, ("teams",)),),
        "— (optional: a GitHub token with read:org, for ORG/TEAM owners)",
    ),
)


def secrets_table() -> str:
    """The table as Markdown (docs/least-privilege.md and the team README carry it as it is)."""
    rows = ["| secret | where | read by (workflow: steps) | needs |", "|---|---|---|---|"]
    rows += [f"| {r.shown_names} | {r.place} | {r.shown_readers} | {r.needs} |" for r in SECRETS]
    return "\n".join(rows) + "\n"
