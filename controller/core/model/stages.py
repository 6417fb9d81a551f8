"""Environments, rehearsals, verification and publish as immutable values (pure).

A policy names each environment's Airflow by the *names* of the environment variables that hold its URL and
credentials; production may rehearse in another environment. A spec may rehearse short slices of its range
there, verify with a DAG of the team's own, and publish once its final verification passed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

PRODUCTION = "production"  # the environment reached with BACKFILLCTL_AIRFLOW_* unless the policy says otherwise
# what each of an environment's variables holds (its policy key → how messages name it), in the order of `names`
ROLES = (
    ("airflow_url_env", "Airflow URL"),
    ("token_env", "token"),
    ("username_env", "user name"),
    ("password_env", "password"),
)
PRODUCTION_DEFAULTS = (  # production's variables for the keys its policy entry leaves out
    "BACKFILLCTL_AIRFLOW_URL",
    "BACKFILLCTL_AIRFLOW_TOKEN",
    "BACKFILLCTL_AIRFLOW_USERNAME",
    "BACKFILLCTL_AIRFLOW_PASSWORD",
)
DEFAULT_VERIFY_TIMEOUT_MINUTES = 60


class Promotion(StrEnum):
    MANUAL = "manual"  # a reviewed `promote: true` lets a canary continue
    ON_VERIFICATION = "on_verification"  # the verification run after the canary decides


class Stage(StrEnum):
    """Where a verification (or publish) run belongs; part of its derived run id."""

    REHEARSAL = "rehearsal"
    CANARY = "canary"
    FINAL = "final"
    PUBLISH = "publish"


@dataclass(frozen=True, slots=True)
class Environment:
    """An Airflow the reconciler drives, by the names of the variables holding its URL and credentials (None:
    production's defaults, BACKFILLCTL_AIRFLOW_URL / _TOKEN / _USERNAME / _PASSWORD)."""

    name: str
    airflow_url_env: str | None = None
    token_env: str | None = None
    username_env: str | None = None
    password_env: str | None = None
    rehearse_in: str | None = None  # the environment whose rehearsal must succeed first

    @property
    def named(self) -> tuple[str | None, str | None, str | None, str | None]:
        """The variables the policy names, in the order of `ROLES` (None: not named)."""
        return (self.airflow_url_env, self.token_env, self.username_env, self.password_env)

    @property
    def names(self) -> tuple[str, str, str, str]:
        """The variables read for this environment: production fills what it leaves out with its defaults; another
        environment reads nothing it does not name ("")."""
        fallback = PRODUCTION_DEFAULTS if self.name == PRODUCTION else ("", "", "", "")
        url, token, user, password = (name or default for name, default in zip(self.named, fallback, strict=True))
        return url, token, user, password


@dataclass(frozen=True, slots=True)
class Slice:
    from_date: datetime
    to_date: datetime


@dataclass(frozen=True, slots=True)
class Rehearsal:
    slices: tuple[Slice, ...]
    attempt: int = 1  # a new value re-runs the rehearsal (after a DAG fix)


@dataclass(frozen=True, slots=True)
class Verify:
    dag_id: str
    conf: Mapping[str, Any] | None = None  # merged under the key "backfillctl" with what the run verifies
    timeout_minutes: int = DEFAULT_VERIFY_TIMEOUT_MINUTES
    result_task: str | None = None  # a task whose XCom {passed, metrics} decides (None: the run's state decides)


@dataclass(frozen=True, slots=True)
class Publish:
    dag_id: str
    conf: Mapping[str, Any] | None = None


def run_id(spec: str, environment: str, stage: Stage, key: str) -> str:
    """The dag_run_id of a verification or publish run: derived, so a retried trigger after a lost answer or a
    crash finds the run it started (Airflow answers 409) instead of starting a second one."""
    return f"backfillctl__{spec}__{environment}__{stage.value}__{key}"


class StageState(StrEnum):
    REHEARSING = "rehearsing"  # the rehearsal's slices are running, one backfill at a time (one per DAG in Airflow)
    VERIFYING = "verifying"  # the verification run was triggered; its result is awaited
    PASSED = "passed"
    FAILED = "failed"

    @property
    def settled(self) -> bool:
        return self in (StageState.PASSED, StageState.FAILED)


@dataclass(frozen=True, slots=True)
class StageRecord:
    """One stage of a spec in one environment, as the store keeps it: a rehearsal (its slices' backfills, then
    its verification run), a canary's or the final verification, or the publish run."""

    spec: str
    environment: str
    stage: Stage
    key: str  # the rehearsal key; for a verification after production backfills, the backfills it verifies
    state: StageState
    started_at: datetime
    backfill_ids: tuple[int, ...] = ()  # the rehearsal's slice backfills, in slice order (created so far)
    run_id: str | None = None  # the verification (or publish) run, once triggered
    triggered_at: datetime | None = None
    reason: str | None = None  # why it failed, or what it passed with
    metrics: Mapping[str, Any] | None = None  # what the verification's result task reported
    runs: Mapping[str, int] | None = None  # the slices' runs by state (a rehearsal)
