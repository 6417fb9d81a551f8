"""Which Airflow is which: production's is reached through the variables its policy names, and another environment's
client is opened only once it is shown not to be production — by its URL, then by a DAG's version ids, which each
metadata database makes itself (`core.rules.environments`) — so a rehearsal never creates anything in production.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from controller.adapters import files
from controller.commands.runtime.settings import Settings
from controller.commands.runtime.validator import build_validator
from controller.core.model.policy import Policy
from controller.core.model.stages import PRODUCTION, Environment
from controller.core.rules.environments import fingerprint_refusal, url_refusal
from controller.errors import ConfigError

if TYPE_CHECKING:  # `validate` reads production's variables here without the Airflow client's imports
    from controller.adapters.airflow import AirflowClient


def production_settings(settings: Settings, fallback: Policy | None = None) -> Settings:
    """The settings with production's Airflow as the policy in the specs folder names it (its
    `environments.production` variables; BACKFILLCTL_AIRFLOW_* for those it does not name). With an invalid policy,
    `fallback` (the last valid policy a pass read) names them if there is one, as a pass decides
    (`Reconciler.desired`); names that are not production's own are refused either way (`Settings.for_environment`)."""
    tree = files.collect([], settings.specs_dir)
    if tree.policy is None:
        return settings
    policy, problems = build_validator().load_policy(tree.policy)
    return settings.for_production((fallback or policy) if any(p.is_error for p in problems) else policy)


def check_production(settings: Settings, policy: Policy) -> None:
    """The policy a pass decides by names the production variables this command reads (it read them when it
    started: a policy edited since reaches production another way only after a restart)."""
    wanted = (policy.environment(PRODUCTION) or Environment(PRODUCTION)).names
    if wanted == settings.names:
        return
    changed = [f"{now} (not {then})" for now, then in zip(wanted, settings.names, strict=True) if now != then]
    raise ConfigError(
        f"the policy reads production's Airflow from {', '.join(changed)}: this command started with the others",
        hint="restart backfillctl: it reads production's variables from the policy when it starts",
    )


def open_other(
    environment: Environment,
    dag_id: str,
    settings: Settings,
    production: AirflowClient,
    connect: Callable[[Settings], AirflowClient],
) -> AirflowClient:
    """The client of a non-production environment, proven another Airflow than production's: not by its normalised
    URL (checked before anything is sent to it), and not by DAG `dag_id`'s version ids (read in both). A
    `ConfigError` says which, and nothing is created in either."""
    theirs = settings.for_environment(environment)
    hint = (
        f"point {theirs.names[0]} at {environment.name}'s own api-server: an environment whose Airflow is "
        "production's would run its rehearsals in production"
    )
    why = url_refusal(environment.name, theirs.airflow_address(), settings.airflow_url or production.base_url)
    if why is not None:
        raise ConfigError(why, hint=hint)
    client = connect(theirs)
    try:
        why = fingerprint_refusal(
            environment.name, dag_id, client.dag_version_ids(dag_id), production.dag_version_ids(dag_id)
        )
    except BaseException:
        client.close()
        raise
    if why is not None:
        client.close()
        raise ConfigError(why, hint=hint)
    return client
